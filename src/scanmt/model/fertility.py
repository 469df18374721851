"""Fertility providers stored in NMT checkpoints, so that translation needs nothing else.

A provider maps source subword sentences to per-token fertility bounds:

* ``constant``: ``{"strategy": "constant", "value": f}``
* ``guided``:   ``{"strategy": "guided", "table": {type: max aligned count}}``
* ``predicted``: ``{"strategy": "predicted", "add": c, "predictor": predictor checkpoint}``
* ``actual``:   an oracle that needs each pair's own alignment; translation then
  requires explicit fertilities (``scanmt translate --fertility FILE``).
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from scanmt.data.dataset import collate
from scanmt.data.fertility import ConstantFertility, GuidedFertility
from scanmt.data.vocab import Vocab
from scanmt.errors import ConfigError
from scanmt.model.fertility_predictor import FertilityPredictor


class PredictedFertility:
    """Expected fertility from a :class:`FertilityPredictor`, plus ``add``."""

    name = "predicted"

    def __init__(self, predictor: FertilityPredictor, vocab: Vocab, add: float, state: dict | None = None):
        self.predictor = predictor.eval()
        self.vocab = vocab
        self.add = add
        self._state = state

    @classmethod
    def from_checkpoint_state(cls, ckpt: dict, add: float) -> "PredictedFertility":
        m = ckpt["config"]["model"]
        vocab = Vocab(ckpt["vocab"])
        pred = FertilityPredictor(len(vocab), m["emb_size"], m["hidden_size"], m["layers"], 0.0, m["max_fertility"])
        pred.load_state_dict(ckpt["model"])
        slim = {"config": ckpt["config"], "vocab": ckpt["vocab"], "model": ckpt["model"]}
        return cls(pred, vocab, add, slim)

    @torch.no_grad()
    def apply(self, src: Sequence[Sequence[str]], batch_size: int = 256) -> list[list[float]]:
        out: list[list[float]] = []
        for i in range(0, len(src), batch_size):
            chunk = [self.vocab.encode(s) for s in src[i : i + batch_size]]
            b = collate(chunk, None, list(range(len(chunk))))
            e = self.predictor.expected(b.src, b.src_len) + self.add
            out.extend(e[j, : len(s)].tolist() for j, s in enumerate(chunk))
        return out

    def state(self) -> dict[str, Any]:
        return {"strategy": "predicted", "add": self.add, "predictor": self._state}


def provider_state(provider: Any) -> dict[str, Any]:
    if isinstance(provider, ConstantFertility):
        return {"strategy": "constant", "value": provider.value}
    if isinstance(provider, GuidedFertility):
        return {"strategy": "guided", "table": dict(provider.table)}
    if isinstance(provider, PredictedFertility):
        return provider.state()
    if provider == "actual":
        return {"strategy": "actual"}
    raise TypeError(f"unknown fertility provider {provider!r}")


def provider_from_state(state: dict[str, Any] | None):
    """The provider saved by :func:`provider_state` (None for unconstrained models)."""
    if not state:
        return None
    s = state["strategy"]
    if s == "constant":
        return ConstantFertility(state["value"])
    if s == "guided":
        return GuidedFertility(state["table"])
    if s == "predicted":
        return PredictedFertility.from_checkpoint_state(state["predictor"], state["add"])
    if s == "actual":
        return "actual"
    raise ConfigError(f"checkpoint has an unknown fertility strategy {s!r}")
