"""Does a model end a joined input after its first sentence?  P(full stop) and P(``</s>``) at the boundary.

The stress test (:mod:`scanmt.api.stress`) joins K test sentences into one input.  A model trained on
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

A search rarely reaches that step, though: the models of the recipe ablation write one sentence per joined input
(at most 0.3 % of their outputs hold two), so the output never has a full stop before its end, and whether it
stops after the first sentence's content is decided one step earlier: close the sentence with its full stop (and
then end), or go on with a connective ("..., while ...") into the second sentence's content.  So the module also
takes, at the step where the reference closes its first sentence (its last subword, where that is ``.``, ``!`` or
``?``: :data:`CLOSING`), the probability the model gives that punctuation and whether it is the most probable
word there (:attr:`BoundaryEos.median_close`, :attr:`BoundaryEos.close_argmax_share`).  Measured on the recipe
ablation's seed-1 LSTMs at K = 2 (docs/results.md 6d): the SGD softmax, which stops, gives the full stop 0.18
(median; the most probable word in 53 % of the inputs), the cpu-small-recipe ones, which go on, 0.003 (0 %).
P(``</s>``) after the full stop does not tell them apart: the label-smoothing-0 softmax of seed 2 gives it 0.92
(median, K = 3) and writes on, having given the full stop 0.004.

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
    from scanmt.data.vocab import Vocab
    from scanmt.decoding.translator import Translator

#: P(</s>) at or above which ending outweighs every continuation together (module docstring)
STOP_PROBABILITY = 0.5
#: the punctuation that closes a sentence: where a first sentence's last subword is one of these (its word
#: boundary marker aside), the model's probability of it at that step is P(close) (module docstring)
CLOSING = frozenset({".", "!", "?"})
#: the stress scores of this module that tables print with 3 decimals, not 2: the medians of P(full stop) run
#: from about 0.002 (models that go on) to 0.2 (models that stop), which 2 decimals print as 0.00
FINE_SCORES = frozenset({"boundary_close"})


@dataclass(frozen=True)
class BoundaryEos:
    """Per joined input, P(``</s>``) after its first sentence, whether ``</s>`` is the most probable word there,
    and P(``</s>``) at the joined reference's end; None for an input left out (its boundary is not known exactly).
    ``p_close``, ``close_most_probable``: at the step where the reference closes its first sentence, the
    probability of that closing punctuation and whether it is the most probable word there; None also where the
    first sentence does not end with one of :data:`CLOSING`."""

    p_eos: list[float | None]
    eos_most_probable: list[bool | None]
    p_eos_at_end: list[float | None]
    p_close: list[float | None]
    close_most_probable: list[bool | None]

    @property
    def measured(self) -> list[float]:
        return [p for p in self.p_eos if p is not None]

    @property
    def left_out(self) -> int:
        return len(self.p_eos) - len(self.measured)

    @property
    def median(self) -> float | None:
        """The median P(``</s>``) at the boundary (None: no input measured)."""
        return _median(self.p_eos)

    @property
    def median_at_end(self) -> float | None:
        """The median P(``</s>``) at the measured inputs' ends (None: no input measured)."""
        return _median(self.p_eos_at_end)

    @property
    def stop_share(self) -> float | None:
        """Percent of the measured inputs with P(``</s>``) >= :data:`STOP_PROBABILITY` at the boundary."""
        return share_at_least(self.p_eos, STOP_PROBABILITY)

    @property
    def argmax_share(self) -> float | None:
        """Percent of the measured inputs where ``</s>`` is the most probable word at the boundary."""
        return _true_share(self.eos_most_probable)

    @property
    def median_close(self) -> float | None:
        """The median P(close) over the inputs whose first sentence ends with closing punctuation (None: none)."""
        return _median(self.p_close)

    @property
    def close_argmax_share(self) -> float | None:
        """Percent of those inputs where the closing punctuation is the most probable word at its step."""
        return _true_share(self.close_most_probable)


def _median(values: Sequence[float | None]) -> float | None:
    m = [v for v in values if v is not None]
    return statistics.median(m) if m else None


def _true_share(flags: Sequence[bool | None]) -> float | None:
    m = [b for b in flags if b is not None]
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
    # the kept inputs and their boundary steps (an empty source has no translation)
    bound = {i: t for i, t in enumerate(steps) if t is not None and src_pieces[i]}
    keep = list(bound)
    queries: list[list[tuple[int, int]]] = []
    for i in keep:  # P(</s>) after the first sentence and at the end, then P(close) where it closes with one
        queries.append([(bound[i], EOS_ID), (len(tgt[i]), EOS_ID)])
        close = closing_word(tgt[i][bound[i] - 1], pipe.vocab)
        if close is not None:
            queries[-1].append((bound[i] - 1, close))
    probs = translator.forced_word_probs([src_pieces[i] for i in keep], [tgt[i] for i in keep], queries
                                         ) if keep else []
    p_eos: list[float | None] = [None] * len(src)
    best: list[bool | None] = [None] * len(src)
    at_end: list[float | None] = [None] * len(src)
    p_close: list[float | None] = [None] * len(src)
    close_best: list[bool | None] = [None] * len(src)
    for i, answers in zip(keep, probs):
        (p_eos[i], best[i]), (at_end[i], _) = answers[0], answers[1]
        if len(answers) == 3:
            p_close[i], close_best[i] = answers[2]
    return BoundaryEos(p_eos, best, at_end, p_close, close_best)


def closing_word(piece: str, vocab: "Vocab") -> int | None:
    """The vocabulary id of ``piece`` where it is closing punctuation (:data:`CLOSING`, after any leading word
    boundary marker ``▁``) in the vocabulary; else None."""
    if piece.lstrip("\u2581") not in CLOSING or piece not in vocab.stoi:
        return None
    return vocab.stoi[piece]
