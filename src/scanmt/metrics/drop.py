"""DROP-score: under-translation as dropped source words (Malaviya et al. 2018, Section 5).

Two word alignments are computed for each test sentence: source↔reference and
source↔MT output (the paper used fast_align trained on the training data; we
use eflomal with priors, :mod:`scanmt.data.align`).  A source word is
*dropped* when it is aligned to some reference word but to no output word.

Two normalizations are reported (they differ only in the denominator):

- :attr:`DropResult.score`: dropped words as a percentage of **all source
  words**, the literal reading of the paper's definition ("the percentage of
  source words that aligned with some word from the reference translation, but
  not with any word from the predicted translation").  This is our DROP.
- :attr:`DropResult.score_of_aligned`: dropped words as a percentage of the
  source words aligned to the reference, which is what the authors' released
  script (``drop_score.py``) prints.

Words are tokenized words (not subwords); lower is better.

The aligner samples at random (eflomal's Gibbs sampler cannot be seeded), so one
DROP measurement carries alignment noise: on 1,000 Multi30k test sentences two
alignments of the same output differ by about 0.1 DROP points.
:class:`DropSamples` averages DROP over several alignments.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Sequence

from scanmt.errors import DataError

Link = tuple[int, int]


@dataclass(frozen=True)
class DropResult:
    """Counts over the corpus.

    Attributes:
        dropped: source words aligned to the reference but not to the output.
        source_words: all source words.
        ref_aligned: source words aligned to at least one reference word.
    """

    dropped: int
    source_words: int
    ref_aligned: int

    @property
    def score(self) -> float:
        """DROP in percent of all source words (0 for an empty corpus)."""
        return 100.0 * self.dropped / self.source_words if self.source_words else 0.0

    @property
    def score_of_aligned(self) -> float:
        """DROP in percent of reference-aligned source words (the authors' script)."""
        return 100.0 * self.dropped / self.ref_aligned if self.ref_aligned else 0.0


@dataclass(frozen=True)
class DropSamples:
    """DROP of one output measured over several random alignments.

    Attributes:
        results: one :class:`DropResult` per pairing of a source-reference
            alignment with a source-output alignment (all pairings of K samples of each: K×K).
    """

    results: tuple[DropResult, ...]

    def __post_init__(self) -> None:
        if not self.results:
            raise DataError("DROP: no alignment samples to average")

    @property
    def scores(self) -> list[float]:
        """DROP of each pairing, in percent of all source words."""
        return [r.score for r in self.results]

    @property
    def score(self) -> float:
        """Mean DROP over the pairings (percent of all source words)."""
        return statistics.fmean(self.scores)

    @property
    def score_sd(self) -> float:
        """Sample standard deviation of DROP over the pairings (0 for one pairing)."""
        return statistics.stdev(self.scores) if len(self.results) > 1 else 0.0

    @property
    def score_of_aligned(self) -> float:
        """Mean DROP in percent of reference-aligned source words (the authors' script)."""
        return statistics.fmean(r.score_of_aligned for r in self.results)

    @property
    def dropped(self) -> float:
        """Mean number of dropped source words (an integer for one pairing)."""
        return statistics.mean(r.dropped for r in self.results)

    @property
    def ref_aligned(self) -> float:
        """Mean number of reference-aligned source words (an integer for one pairing)."""
        return statistics.mean(r.ref_aligned for r in self.results)

    @property
    def source_words(self) -> int:
        """Number of source words (the same in every pairing)."""
        return self.results[0].source_words


def _aligned_sources(links: set[Link] | frozenset[Link], src_len: int, sent: int, what: str) -> set[int]:
    out = set()
    for i, j in links:
        if not 0 <= i < src_len or j < 0:
            raise DataError(f"DROP: sentence {sent + 1}: {what} link {i}-{j} outside a source of {src_len} words")
        out.add(i)
    return out


def aligned_and_dropped(
    src_ref_links: Sequence[set[Link]],
    src_hyp_links: Sequence[set[Link]],
    src_lens: Sequence[int],
) -> list[tuple[set[int], set[int]]]:
    """Per sentence, the 0-based source words aligned to the reference, and those of them that are dropped
    (aligned to no output word).

    Args:
        src_ref_links: per sentence, 0-based ``(source word, reference word)`` links.
        src_hyp_links: per sentence, 0-based ``(source word, output word)`` links.
        src_lens: per sentence, the number of source words.

    Raises:
        DataError: the three sequences differ in length, or a link's source
            index is outside its sentence (the message names the sentence, 1-based).
    """
    if not len(src_ref_links) == len(src_hyp_links) == len(src_lens):
        raise DataError(
            f"DROP: {len(src_ref_links)} source-reference alignments, {len(src_hyp_links)} "
            f"source-output alignments and {len(src_lens)} source sentences must match"
        )
    out = []
    for k, (ref_l, hyp_l, n) in enumerate(zip(src_ref_links, src_hyp_links, src_lens)):
        in_ref = _aligned_sources(ref_l, n, k, "source-reference")
        out.append((in_ref, in_ref - _aligned_sources(hyp_l, n, k, "source-output")))
    return out


def sentence_drops(
    src_ref_links: Sequence[set[Link]],
    src_hyp_links: Sequence[set[Link]],
    src_lens: Sequence[int],
) -> list[DropResult]:
    """Dropped source words of each sentence (:func:`drop_score` sums them; arguments and errors:
    :func:`aligned_and_dropped`)."""
    return [DropResult(dropped=len(dropped), source_words=int(n), ref_aligned=len(in_ref))
            for (in_ref, dropped), n in zip(aligned_and_dropped(src_ref_links, src_hyp_links, src_lens), src_lens)]


def drop_score(
    src_ref_links: Sequence[set[Link]],
    src_hyp_links: Sequence[set[Link]],
    src_lens: Sequence[int],
) -> DropResult:
    """Count dropped source words over the corpus (arguments and errors: :func:`sentence_drops`)."""
    per = sentence_drops(src_ref_links, src_hyp_links, src_lens)
    return DropResult(dropped=sum(r.dropped for r in per), source_words=int(sum(src_lens)),
                      ref_aligned=sum(r.ref_aligned for r in per))
