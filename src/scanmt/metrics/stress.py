"""The stress test's pure parts: longer inputs made of K sentences, and sentences dropped whole.

Joining (:func:`join_groups`)
    K consecutive lines become one: lines ``gK .. gK+K-1`` (0-based) are joined with one space into
    joined line ``g``, for ``g = 0 .. n // K - 1``, on the source and the reference side alike.  The
    last ``n mod K`` lines, an incomplete group, are **dropped**, so that every joined input holds
    exactly K sentences (a K-group and a shorter one would mix two difficulties).  With K = 1 the
    lines are the test set itself.

Dropped sentence (:func:`dropped_sentences`)
    The words of a joined source line are its constituent sentences' Moses-tokenized words, one sentence
    after the other (:func:`sentence_spans`: sentence ``j`` holds words ``[start_j, end_j)``).  With the
    word alignment between the joined source and the output (the source-output alignment DROP uses,
    eflomal, ``scanmt evaluate --align-model``), constituent sentence ``j`` **is dropped** when fewer
    than :data:`DROPPED_COVERAGE` (20 %) of its words are linked to any output word.  A sentence without
    words is never dropped.  A joined input *drops a sentence* when at least one of its K sentences is
    dropped; the stress test reports the share of joined inputs that do (:attr:`DroppedSentences.share`,
    in percent).  A good translation links most source words (typically 70-90 % of them); an omitted
    sentence has nothing in the output to be linked to, and grow-diag-final-and adds no link from an
    unaligned source word to an output word that is linked already.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Collection, Sequence

from scanmt.errors import ConfigError, DataError

#: a constituent sentence is dropped when fewer than this share of its words are linked to the output
DROPPED_COVERAGE = 0.2

Link = tuple[int, int]


def join_groups(lines: Sequence[str], k: int) -> list[str]:
    """``lines`` joined K at a time: ``lines[gK:(g+1)K]`` joined by one space, for each complete group ``g``
    (the last ``len(lines) % k`` lines are left out).  The lines are stripped first and blank ones skipped, so a
    joined line has one space between its sentences."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigError(f"--k must be whole numbers >= 1, got {k!r}")
    return [" ".join(s for s in (line.strip() for line in lines[g * k:(g + 1) * k]) if s)
            for g in range(len(lines) // k)]


def sentence_spans(lengths: Sequence[int]) -> list[tuple[int, int]]:
    """``[(start, end), ...]``: the word positions of sentences of ``lengths`` words, written one after another."""
    spans, start = [], 0
    for n in lengths:
        spans.append((start, start + n))
        start += n
    return spans


def dropped_in_line(links: Collection[Link], spans: Sequence[tuple[int, int]],
                    coverage: float = DROPPED_COVERAGE) -> list[bool]:
    """For each sentence span of one joined source line: whether it is dropped, i.e. fewer than ``coverage``
    of its words are the source side of a ``(source word, output word)`` link (a span without words: False)."""
    linked = {i for i, _ in links}
    out = []
    for start, end in spans:
        n = end - start
        covered = sum(1 for i in range(start, end) if i in linked)
        out.append(n > 0 and covered < coverage * n)
    return out


@dataclass(frozen=True)
class DroppedSentences:
    """Whole sentences dropped from joined inputs.

    Attributes:
        inputs: joined inputs scored.
        inputs_dropping: joined inputs with at least one dropped constituent sentence.
        sentences: constituent sentences scored (K per joined input).
        dropped: constituent sentences dropped.
    """

    inputs: int
    inputs_dropping: int
    sentences: int
    dropped: int

    @property
    def share(self) -> float:
        """Joined inputs that drop a whole sentence, in percent (0 for none)."""
        return 100.0 * self.inputs_dropping / self.inputs if self.inputs else 0.0

    @property
    def sentence_share(self) -> float:
        """Constituent sentences dropped, in percent of all of them (0 for none)."""
        return 100.0 * self.dropped / self.sentences if self.sentences else 0.0


def dropped_sentences(links: Sequence[Collection[Link]], lengths: Sequence[Sequence[int]],
                      coverage: float = DROPPED_COVERAGE) -> DroppedSentences:
    """Count dropped sentences over joined inputs.

    Args:
        links: per joined input, its 0-based ``(source word, output word)`` links.
        lengths: per joined input, the word counts of its constituent source sentences, in order.
        coverage: the share of a sentence's words below which it is dropped.

    Raises:
        DataError: the two sequences differ in length, or a link's source word lies outside its joined input.
    """
    if len(links) != len(lengths):
        raise DataError(f"dropped sentences: {len(links)} alignments but {len(lengths)} joined inputs")
    inputs_dropping = dropped = sentences = 0
    for g, (line_links, sizes) in enumerate(zip(links, lengths)):
        total = sum(sizes)
        bad = next(((i, j) for i, j in line_links if not 0 <= i < total), None)
        if bad is not None:
            raise DataError(f"dropped sentences: joined input {g + 1}: link {bad[0]}-{bad[1]} outside a source "
                            f"of {total} words")
        flags = dropped_in_line(line_links, sentence_spans(sizes), coverage)
        sentences += len(flags)
        dropped += sum(flags)
        inputs_dropping += any(flags)
    return DroppedSentences(len(links), inputs_dropping, sentences, dropped)
