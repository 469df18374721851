"""Fertility providers stored in NMT checkpoints, so that translation needs nothing else.

A provider maps source subword sentences to per-token fertility bounds:

* ``constant``: ``{"strategy": "constant", "value": f}``
* ``guided``:   ``{"strategy": "guided", "table": {type: max aligned count}}``
* ``predicted``: ``{"strategy": "predicted", "add": c, "predictor": predictor checkpoint}``; the
  checkpoint's config says whether the predictor has subword or word targets (``level``,
  subword when absent: predictors saved before the key existed)
* ``actual``:   an oracle that needs each pair's own alignment; translation then
  requires explicit fertilities (``scanmt translate --fertility FILE``).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch

from scanmt.config import PREDICTOR_LEVELS
from scanmt.data.dataset import collate
from scanmt.data.fertility import ConstantFertility, GuidedFertility
from scanmt.data.vocab import Vocab
from scanmt.data.word_fertility import piece_bounds
from scanmt.errors import ConfigError
from scanmt.model.fertility_predictor import FertilityPredictor


class PredictedFertility:
    """Expected fertility from a :class:`FertilityPredictor`, plus ``add``.

    ``level`` is the predictor's target level: ``subword``, the bound of a token is its
    expected fertility; ``word``, the expected fertility of its word shared evenly among the
    word's pieces (:func:`scanmt.data.word_fertility.piece_bounds`).  Either way ``add`` is
    then added to every token.
    """

    name = "predicted"

    def __init__(self, predictor: FertilityPredictor, vocab: Vocab, add: float, state: dict | None = None,
                 level: str = "subword"):
        if level not in PREDICTOR_LEVELS:
            raise ConfigError(f"fertility predictor level {level!r} unknown (known: {', '.join(PREDICTOR_LEVELS)})")
        self.predictor = predictor.eval()
        self.vocab = vocab
        self.add = add
        self.level = level
        self._state = state

    @classmethod
    def from_checkpoint_state(cls, ckpt: dict, add: float) -> "PredictedFertility":
        m = ckpt["config"]["model"]
        vocab = Vocab(ckpt["vocab"])
        pred = FertilityPredictor(len(vocab), m["emb_size"], m["hidden_size"], m["layers"], 0.0, m["max_fertility"])
        pred.load_state_dict(ckpt["model"])
        slim = {"config": ckpt["config"], "vocab": ckpt["vocab"], "model": ckpt["model"]}
        return cls(pred, vocab, add, slim, level=ckpt["config"].get("level", "subword"))

    @torch.no_grad()
    def _per_token(self, src: Sequence[Sequence[str]], fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
                   batch_size: int) -> list[list[Any]]:
        """``fn(src [B, S], src_len [B]) -> [B, S, ...]`` over batches of sentences, cut to each length."""
        out: list[list[Any]] = []
        for i in range(0, len(src), batch_size):
            chunk = [self.vocab.encode(s) for s in src[i : i + batch_size]]
            b = collate(chunk, None, list(range(len(chunk))))
            e = fn(b.src, b.src_len)
            out.extend(e[j, : len(s)].tolist() for j, s in enumerate(chunk))
        return out

    def expected(self, src: Sequence[Sequence[str]], batch_size: int = 256, plus: float = 0.0) -> list[list[float]]:
        """The predictor's expected class per token (``[S]`` per sentence) plus ``plus`` (float32 sums)."""
        return self._per_token(src, lambda x, n: self.predictor.expected(x, n) + plus, batch_size)

    def probabilities(self, src: Sequence[Sequence[str]], batch_size: int = 256) -> list[list[list[float]]]:
        """Class probabilities ``[S, F_max + 1]`` per sentence."""
        return self._per_token(src, lambda x, n: torch.softmax(self.predictor(x, n).float(), dim=-1), batch_size)

    def apply(self, src: Sequence[Sequence[str]], batch_size: int = 256) -> list[list[float]]:
        """Fertility bounds ``[S]`` per source sentence of pieces."""
        if self.level == "subword":
            return self.expected(src, batch_size, plus=self.add)  # as before `level` existed, to the bit
        return [[u + self.add for u in piece_bounds(e, s)] for e, s in zip(self.expected(src, batch_size), src)]

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
