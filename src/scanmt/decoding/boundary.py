"""Does a model end a joined input after its first sentence?  P(``</s>``) at the sentence boundary.

The coverage stress test (:mod:`scanmt.api.stress`) joins K test sentences into one input.  A model trained on
single sentences may have learned "one sentence, then stop": its output ends after about one sentence, and DROP
counts the rest as dropped.  This module measures that directly.  The model reads each joined reference
teacher-forced, and at the step after the first sentence's last subword, where the reference goes on with the
second sentence, we take the probability the model gives ``</s>`` and whether ``</s>`` is its most probable
word there.

- ``P(</s>) >= 0.5`` (:data:`STOP_PROBABILITY`): ending outweighs every continuation together
  (:attr:`BoundaryEos.stop_share`).  Not 0.99: label smoothing ε trains the most probable word toward 1 − ε,
  so that a model smoothed with ε = 0.1 gives ``</s>`` 0.9 where it is sure; at 0.99 its share would read 0
  whatever it does (measured: the recipe ablation's SGD softmax, smoothed with 0.1, drops a whole sentence
  from 84 % of its K = 3 inputs and gives ``</s>`` between 0.75 and 0.99 after the first sentence in 95 % of
  them, 0.99 or more in none);
- ``</s>`` the most probable word: greedy search would end there (:attr:`BoundaryEos.argmax_share`);
- the median of P(``</s>``) (:attr:`BoundaryEos.median`);
- for contrast, the median P(``</s>``) at the joined reference's end, where ``</s>`` is right
  (:attr:`BoundaryEos.median_at_end`).

The joined lines are those of :func:`scanmt.metrics.stress.join_groups` (K lines joined by a space).  An input
is left out (None) where the joined reference's subwords do not begin with its first sentence's subwords, or
add nothing to them (the boundary is not known exactly), or where its source has no subword.  A constrained
model takes its bounds from its fertility provider, as ``scanmt translate`` does
(:meth:`scanmt.decoding.translator.Translator.forced_word_probs`).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from scanmt.data.vocab import EOS_ID

if TYPE_CHECKING:
    from scanmt.decoding.translator import Translator

#: P(</s>) at or above which ending outweighs every continuation together (module docstring)
STOP_PROBABILITY = 0.5


@dataclass(frozen=True)
class BoundaryEos:
    """Per joined input, P(``</s>``) after its first sentence, whether ``</s>`` is the most probable word there,
    and P(``</s>``) at the joined reference's end; None for an input left out (its boundary is not known exactly)."""

    p_eos: list[float | None]
    eos_most_probable: list[bool | None]
    p_eos_at_end: list[float | None]

    @property
    def measured(self) -> list[float]:
        return [p for p in self.p_eos if p is not None]

    @property
    def left_out(self) -> int:
        return len(self.p_eos) - len(self.measured)

    @property
    def median(self) -> float | None:
        """The median P(``</s>``) at the boundary (None: no input measured)."""
        return statistics.median(self.measured) if self.measured else None

    @property
    def median_at_end(self) -> float | None:
        """The median P(``</s>``) at the measured inputs' ends (None: no input measured)."""
        m = [p for p in self.p_eos_at_end if p is not None]
        return statistics.median(m) if m else None

    @property
    def stop_share(self) -> float | None:
        """Percent of the measured inputs with P(``</s>``) >= :data:`STOP_PROBABILITY` at the boundary."""
        return share_at_least(self.p_eos, STOP_PROBABILITY)

    @property
    def argmax_share(self) -> float | None:
        """Percent of the measured inputs where ``</s>`` is the most probable word at the boundary."""
        m = [b for b in self.eos_most_probable if b is not None]
        return 100.0 * sum(m) / len(m) if m else None


def share_at_least(p_eos: Sequence[float | None], threshold: float) -> float | None:
    """Percent of the measured inputs (not None) whose P(``</s>``) is ``threshold`` or more (None: none measured)."""
    m = [p for p in p_eos if p is not None]
    return 100.0 * sum(p >= threshold for p in m) / len(m) if m else None


def first_sentence_steps(joined: Sequence[Sequence[str]], first: Sequence[Sequence[str]]) -> list[int | None]:
    """The teacher-forced step after each joined target's first sentence: the number of its first sentence's
    subwords ``len(first[i])``, where ``joined[i]`` begins with exactly those subwords and has more; else None."""
    if len(joined) != len(first):
        raise ValueError(f"{len(joined)} joined targets but {len(first)} first sentences")
    return [len(f) if f and list(j[:len(f)]) == list(f) and len(j) > len(f) else None
            for j, f in zip(joined, first)]


def boundary_eos(translator: "Translator", src: Sequence[str], ref: Sequence[str], first_ref: Sequence[str]
                 ) -> BoundaryEos:
    """:class:`BoundaryEos` of ``translator`` on the joined inputs ``src`` with their joined references ``ref``
    (raw text, one joined input a line), whose first sentences are ``first_ref`` (raw text, one per input)."""
    if not len(src) == len(ref) == len(first_ref):
        raise ValueError(f"{len(src)} sources, {len(ref)} references and {len(first_ref)} first sentences")
    pipe = translator.pipeline
    src_pieces, tgt = pipe.source_pieces_all(list(src)), pipe.target_pieces_all(list(ref))
    steps = first_sentence_steps(tgt, pipe.target_pieces_all([s.strip() for s in first_ref]))
    keep = [i for i, t in enumerate(steps) if t is not None and src_pieces[i]]  # (an empty source: no translation)
    probs = translator.forced_word_probs([src_pieces[i] for i in keep], [tgt[i] for i in keep],
                                         [[steps[i], len(tgt[i])] for i in keep], EOS_ID) if keep else []
    p_eos: list[float | None] = [None] * len(src)
    best: list[bool | None] = [None] * len(src)
    at_end: list[float | None] = [None] * len(src)
    for i, ((p, b), (end, _)) in zip(keep, probs):
        p_eos[i], best[i], at_end[i] = p, b, end
    return BoundaryEos(p_eos, best, at_end)
