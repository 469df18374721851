"""Fertility providers: source subwords -> per-token upper bounds, and their saved state.

A provider is what a constrained NMT checkpoint stores (``fertility`` key) so that translation
needs nothing else.  Each has a ``name`` (its strategy, :data:`scanmt.fertility.rules.STRATEGIES`),
``apply(pieces)`` for sentences of subwords, ``apply_ids(ids, vocab)`` for id-encoded ones,
and ``state()`` (read back by ``from_state``, :func:`provider_from_state`):

* ``constant``: ``{"strategy": "constant", "value": f}``: every token gets ``f`` (finite, > 0).
* ``guided``: ``{"strategy": "guided", "table": {type: max aligned count}}``: per source *type*,
  the largest number of target tokens any of its occurrences is aligned to in the training
  alignments; **1 if the type is unseen or was never aligned** (the paper's "or 1 if no
  alignment was observed"), hence ``max(1, table.get(token, 0))``.
* ``predicted``: ``{"strategy": "predicted", "add": c, "predictor": {"config", "vocab", "model"}}``:
  the expected fertility of a :class:`~scanmt.fertility.predictor.network.FertilityPredictor`, plus ``c``;
  the predictor's config says whether it has subword or word targets (``level``, subword when
  absent: predictors saved before the key existed).
* ``actual``: ``{"strategy": "actual"}``: an oracle for analysis, from the alignment of each
  pair itself (:func:`actual_fertility`: ``max(1, count)``, so an unaligned token gets 1, as
  guided's never-aligned types do, and no bound is 0).  It cannot bound new sentences:
  translation then requires explicit fertilities (``scanmt translate --fertility FILE``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping, Sequence

import torch

from scanmt.choices import PREDICTOR_LEVELS
from scanmt.checkpoint_file import load_checkpoint
from scanmt.data.dataset import collate
from scanmt.data.fertility import Fertilities, check_value
from scanmt.data.vocab import Vocab
from scanmt.errors import ConfigError, DataError
from scanmt.fertility.alignments import Link, alignment_counts
from scanmt.fertility.predictor.network import FertilityPredictor
from scanmt.fertility.predictor.targets import piece_bounds
from scanmt.fertility.rules import ORACLE


class FertilityProvider(ABC):
    """The interface of the providers (see the module docstring)."""

    name: str = ""

    @abstractmethod
    def apply(self, src: Sequence[Sequence[str]]) -> Fertilities:
        """Bounds ``[S]`` per source sentence of ``S`` subwords."""

    def apply_ids(self, src: Sequence[Sequence[int]], vocab: Vocab) -> Fertilities:
        """:meth:`apply` on id-encoded sentences (ids of ``vocab``)."""
        return self.apply([vocab.decode(s) for s in src])

    @abstractmethod
    def state(self) -> dict[str, Any]:
        """What :func:`provider_from_state` rebuilds the provider from (stored in checkpoints)."""

    @classmethod
    @abstractmethod
    def from_state(cls, state: Mapping[str, Any]) -> "FertilityProvider":
        """The provider whose :meth:`state` is ``state``."""


@dataclass(frozen=True)
class ConstantFertility(FertilityProvider):
    """Every source token gets ``value``."""

    value: float

    name = "constant"

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", check_value(self.value, where="constant fertility"))

    @property
    def params(self) -> dict:
        return {"value": self.value}

    def apply(self, src: Sequence[Sequence[str]]) -> Fertilities:
        return [[self.value] * len(s) for s in src]

    def apply_ids(self, src: Sequence[Sequence[int]], vocab: Vocab) -> Fertilities:
        return [[self.value] * len(s) for s in src]

    def state(self) -> dict[str, Any]:
        return {"strategy": self.name, "value": self.value}

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> "ConstantFertility":
        return cls(state["value"])


def constant(value: float) -> ConstantFertility:
    """The ``constant`` strategy with fertility ``value`` (> 0)."""
    return ConstantFertility(value)


def _per_sentence_counts(src: Sequence[Sequence[str]], links: Sequence[Iterable[Link]]) -> list[list[int]]:
    """:func:`~scanmt.fertility.alignments.alignment_counts` of every sentence, errors naming the sentence."""
    if len(src) != len(links):
        raise DataError(f"{len(src)} source sentences but {len(links)} alignment lines")
    out = []
    for n, (sent, ls) in enumerate(zip(src, links)):
        try:
            out.append(alignment_counts(ls, len(sent)))
        except DataError as exc:
            raise DataError(f"alignment of sentence {n + 1}: {exc}") from None
    return out


class GuidedFertility(FertilityProvider):
    """Per source type: the largest aligned-target count seen in training; 1 if unseen/never aligned.

    Attributes:
        table: type -> max count observed (0 for types seen but never aligned).
    """

    name = "guided"

    def __init__(self, table: Mapping[str, int]):
        self.table: dict[str, int] = dict(table)

    @classmethod
    def train(cls, src: Sequence[Sequence[str]], links: Sequence[Iterable[Link]]) -> "GuidedFertility":
        """Learn the table from training source sentences and their (symmetrized) alignments."""
        table: dict[str, int] = {}
        for sent, counts in zip(src, _per_sentence_counts(src, links)):
            for tok, c in zip(sent, counts):
                if c > table.get(tok, -1):
                    table[tok] = c
        return cls(table)

    def fertility(self, token: str) -> int:
        return max(1, self.table.get(token, 0))

    def apply(self, src: Sequence[Sequence[str]]) -> Fertilities:
        return [[float(self.fertility(t)) for t in s] for s in src]

    def state(self) -> dict[str, Any]:
        return {"strategy": self.name, "table": dict(self.table)}

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> "GuidedFertility":
        return cls(state["table"])


def actual_fertility(src: Sequence[Sequence[str]], links: Sequence[Iterable[Link]]) -> Fertilities:
    """Oracle fertilities from each pair's own alignment: ``max(1, count)`` per source token."""
    return [[float(max(1, c)) for c in counts] for counts in _per_sentence_counts(src, links)]


class ActualFertility(FertilityProvider):
    """The ``actual`` oracle: bounds come from each pair's own alignment, so it bounds no new sentence."""

    name = ORACLE

    def apply(self, src: Sequence[Sequence[str]]) -> Fertilities:
        raise ConfigError(
            "this model uses a constrained transform and its checkpoint carries no fertility provider "
            "(strategy 'actual' is an oracle): give fertilities explicitly (scanmt translate --fertility FILE)"
        )

    def state(self) -> dict[str, Any]:
        return {"strategy": self.name}

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> "ActualFertility":
        return cls()


@dataclass
class PredictorWeights:
    """A trained predictor as a ``predicted`` provider stores it: ``{"config", "vocab", "model"}``."""

    config: dict[str, Any]
    vocab: list[str]
    weights: dict[str, torch.Tensor]

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "PredictorWeights":
        if "vocab" not in d:
            raise DataError("not a fertility predictor checkpoint (it has no vocabulary)")
        return cls(d["config"], d["vocab"], d["model"])

    def to_dict(self) -> dict[str, Any]:
        return {"config": self.config, "vocab": self.vocab, "model": self.weights}


class PredictedFertility(FertilityProvider):
    """Expected fertility from a :class:`FertilityPredictor`, plus ``add``.

    ``level`` is the predictor's target level: ``subword``, the bound of a token is its
    expected fertility; ``word``, the expected fertility of its word shared evenly among the
    word's pieces (:func:`scanmt.fertility.predictor.targets.piece_bounds`).  Either way ``add`` is
    then added to every token.
    """

    name = "predicted"

    def __init__(self, predictor: FertilityPredictor, vocab: Vocab, add: float,
                 weights: PredictorWeights | None = None, level: str = "subword"):
        if level not in PREDICTOR_LEVELS:
            raise ConfigError(f"fertility predictor level {level!r} unknown (known: {', '.join(PREDICTOR_LEVELS)})")
        self.predictor = predictor.eval()
        self.vocab = vocab
        self.add = add
        self.level = level
        self._weights = weights

    @classmethod
    def from_weights(cls, w: PredictorWeights, add: float) -> "PredictedFertility":
        m = w.config["model"]
        vocab = Vocab(w.vocab)
        pred = FertilityPredictor(len(vocab), m["emb_size"], m["hidden_size"], m["layers"], 0.0, m["max_fertility"])
        pred.load_state_dict(w.weights)
        return cls(pred, vocab, add, w, level=w.config.get("level", "subword"))

    @classmethod
    def from_checkpoint_state(cls, ckpt: Mapping[str, Any], add: float) -> "PredictedFertility":
        """From a predictor checkpoint's dict (its ``config``, ``vocab`` and ``model`` keys)."""
        return cls.from_weights(PredictorWeights.from_dict(ckpt), add)

    @classmethod
    def load(cls, path: str | Path, add: float) -> "PredictedFertility":
        """From a predictor checkpoint file (as ``scanmt fertility --train-predictor`` writes it)."""
        return cls.from_checkpoint_state(load_checkpoint(path), add)

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> "PredictedFertility":
        return cls.from_checkpoint_state(state["predictor"], state["add"])

    @torch.no_grad()
    def _per_token(self, src: Sequence[Sequence[int]], fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
                   batch_size: int) -> list[list[Any]]:
        """``fn(src [B, S], src_len [B]) -> [B, S, ...]`` over batches of id sentences, cut to each length."""
        out: list[list[Any]] = []
        for i in range(0, len(src), batch_size):
            chunk = [list(s) for s in src[i : i + batch_size]]
            b = collate(chunk, None, list(range(len(chunk))))
            e = fn(b.src, b.src_len)
            out.extend(e[j, : len(s)].tolist() for j, s in enumerate(chunk))
        return out

    def _ids(self, src: Sequence[Sequence[str]]) -> list[list[int]]:
        return [self.vocab.encode(s) for s in src]

    def expected(self, src: Sequence[Sequence[str]], batch_size: int = 256, plus: float = 0.0) -> list[list[float]]:
        """The predictor's expected class per token (``[S]`` per sentence) plus ``plus`` (float32 sums)."""
        return self._expected_ids(self._ids(src), batch_size, plus)

    def _expected_ids(self, ids: Sequence[Sequence[int]], batch_size: int, plus: float) -> list[list[float]]:
        return self._per_token(ids, lambda x, n: self.predictor.expected(x, n) + plus, batch_size)

    def probabilities(self, src: Sequence[Sequence[str]], batch_size: int = 256) -> list[list[list[float]]]:
        """Class probabilities ``[S, F_max + 1]`` per sentence."""
        return self._per_token(self._ids(src), lambda x, n: torch.softmax(self.predictor(x, n).float(), dim=-1),
                               batch_size)

    def apply(self, src: Sequence[Sequence[str]], batch_size: int = 256) -> Fertilities:
        """Fertility bounds ``[S]`` per source sentence of pieces."""
        return self._bounds(self._ids(src), lambda: src, batch_size)

    def apply_ids(self, src: Sequence[Sequence[int]], vocab: Vocab, batch_size: int = 256) -> Fertilities:
        """:meth:`apply` on ids of ``vocab``: used as they are when ``vocab`` is the predictor's own."""
        pieces = lambda: [vocab.decode(s) for s in src]  # noqa: E731  (only word-level bounds need them)
        ids = src if vocab.itos == self.vocab.itos else self._ids(pieces())
        return self._bounds(ids, pieces, batch_size)

    def _bounds(self, ids: Sequence[Sequence[int]], pieces: Callable[[], Sequence[Sequence[str]]],
                batch_size: int) -> Fertilities:
        if self.level == "subword":
            return self._expected_ids(ids, batch_size, plus=self.add)  # as before `level` existed, to the bit
        expected = self._expected_ids(ids, batch_size, plus=0.0)
        return [[u + self.add for u in piece_bounds(e, s)] for e, s in zip(expected, pieces())]

    def state(self) -> dict[str, Any]:
        return {"strategy": self.name, "add": self.add,
                "predictor": self._weights.to_dict() if self._weights is not None else None}


def provider_state(provider: FertilityProvider) -> dict[str, Any]:
    """What a checkpoint stores of ``provider`` (read back by :func:`provider_from_state`)."""
    if not isinstance(provider, FertilityProvider):
        raise TypeError(f"unknown fertility provider {provider!r}")
    return provider.state()


def provider_from_state(state: Mapping[str, Any] | None) -> FertilityProvider | None:
    """The provider saved by :func:`provider_state` (None for unconstrained models)."""
    if not state:
        return None
    cls = PROVIDERS.get(state["strategy"])
    if cls is None:
        raise ConfigError(f"checkpoint has an unknown fertility strategy {state['strategy']!r}")
    return cls.from_state(state)


#: strategy name -> the provider class that saves and restores its state
PROVIDERS: Mapping[str, type[FertilityProvider]] = MappingProxyType(
    {cls.name: cls for cls in (ConstantFertility, GuidedFertility, PredictedFertility, ActualFertility)})
