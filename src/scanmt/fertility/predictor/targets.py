"""The predictor's targets: subword fertilities, and word-level ones carried to the pieces (``level: word``).

:func:`fertility_targets` reads a split's targets at either level (:func:`load_split`: with the
source, as a :class:`~scanmt.data.dataset.ParallelData` whose ``fertility`` holds them).  At the
subword level a piece's target is the number of target subwords aligned to it
(:func:`scanmt.fertility.alignments.alignment_counts`).

The paper (Section 4) sets the fertility of every source *word* from a word aligner.
The model attends to subwords, so a word's fertility has to be carried to its pieces.
Here the word fertility ``F_w`` is the number of distinct target words aligned to the
source word ``w`` in ``ALIGN_DIR/{split}.word.align`` (``scanmt align --level word``),
and the word of each piece is given by sentencepiece's ``▁`` marker
(:func:`scanmt.data.subword.word_index`).

Training targets (:func:`spread_to_pieces`): **every piece of ``w`` gets the class
``F_w``**.  The tagger thus learns the word's fertility from each of its pieces (its
BiLSTM sees the neighbouring pieces), and the classes stay integers, so accuracy and the
cross-entropy are those of the subword level.

Bounds (:func:`piece_bounds`): the pieces' expected fertilities ``E_j[F]`` are averaged
over the word, ``ê_w = mean_{j ∈ w} E_j[F]``, and **divided evenly among its ``k_w``
pieces**: ``u_j = ê_w / k_w`` (the predicted strategy then adds ``add`` to each token as
before).  Why divide: a constrained transform bounds the *cumulative* attention of each
token, ``Σ_t α_tj ≤ u_j``, so the attention a word can receive in total is the sum of its
pieces' bounds, ``Σ_{j∈w} u_j = ê_w + k_w · add``: the word's predicted fertility, plus the
usual slack per token.  Giving ``ê_w`` to every piece instead would let a word of ``k_w``
pieces take ``k_w`` times its fertility.  A one-piece word (90 % of Multi30k's German
words) gets ``ê_w`` itself, exactly the word-level bound of the paper.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Sequence

from scanmt.data.dataset import ParallelData
from scanmt.data.links import read_links
from scanmt.data.subword import word_index
from scanmt.data.vocab import Vocab
from scanmt.errors import DataError
from scanmt.fertility.alignments import Link, alignment_counts, alignment_path
from scanmt.io import read_lines


def word_count(pieces: Sequence[str]) -> int:
    """Number of tokenized words in a subword sentence (0 for an empty one)."""
    return word_index(pieces)[-1] + 1 if pieces else 0


def spread_to_pieces(word_values: Sequence[int], pieces: Sequence[str]) -> list[int]:
    """Each piece gets its word's value: ``out[j] = word_values[word_index(pieces)[j]]``.

    Raises:
        DataError: the number of values is not the number of words in ``pieces``.
    """
    n = word_count(pieces)
    if len(word_values) != n:
        raise DataError(f"{len(word_values)} word values for a subword sentence of {n} words")
    return [word_values[w] for w in word_index(pieces)]


def word_targets(pieces: Sequence[str], word_links: Iterable[Link]) -> list[int]:
    """Per piece, the fertility of its word: target words aligned to it (``[S]`` for ``S`` pieces).

    Raises:
        DataError: a link whose source word index is outside the sentence's words.
    """
    return spread_to_pieces(alignment_counts(word_links, word_count(pieces)), pieces)


def piece_bounds(expected: Sequence[float], pieces: Sequence[str]) -> list[float]:
    """Per-piece bounds ``[S]`` from per-piece expectations ``[S]`` of the word fertility.

    ``u_j = mean_{i ∈ w(j)} expected[i] / k_{w(j)}``: each word's mean prediction shared evenly
    among its pieces, so the pieces' bounds sum to the word's prediction.
    """
    if len(expected) != len(pieces):
        raise DataError(f"{len(expected)} expected fertilities for {len(pieces)} source pieces")
    wi = word_index(pieces)
    total = [0.0] * word_count(pieces)
    size = [0] * len(total)
    for w, e in zip(wi, expected):
        total[w] += float(e)
        size[w] += 1
    return [total[w] / size[w] / size[w] for w in wi]


def fertility_targets(pieces: list[list[str]], links_path: Path, level: str) -> list[list[int]]:
    """Per source piece, its fertility target at ``level`` from the links file of that level.

    Raises:
        DataError: naming the links file and line, for a line count or link index that does not fit.
    """
    if level == "subword":
        lens = [len(p) for p in pieces]
        return [alignment_counts(sure, n) for (sure, _), n in zip(read_links(links_path, src_lens=lens), lens)]
    links = read_links(links_path, src_lens=[word_count(p) for p in pieces])
    return [word_targets(p, sure) for p, (sure, _) in zip(pieces, links)]


def load_split(data_dir: Path, align_dir: Path, split: str, vocab: Vocab, src_lang: str, limit: int = 0,
               level: str = "subword") -> ParallelData:
    """Source subwords of ``split`` with their ``level`` fertility targets in ``ParallelData.fertility``."""
    src_path = data_dir / f"{split}.bpe.{src_lang}"
    path = alignment_path(align_dir, split, level)
    if not path.exists():
        raise DataError(f"{path}: no {level} alignment for {split!r}; run `scanmt align --data {data_dir}` first")
    data = ParallelData.from_files(src_path, None, vocab)
    pieces = read_lines(src_path, what="source file")
    targets = fertility_targets([ln.split() for ln in pieces], path, level)
    data = data.with_fertility(targets, source=str(path))
    if limit:
        data = ParallelData(data.src[:limit], None, data.index[:limit], data.fertility[:limit])
    return data
