"""Alignment error rates of attention: AER (Och & Ney 2003) and SAER (Tu et al. 2016, §5.3).

Gold alignments have sure links ``S`` and possible links ``P ⊇ S``; links are
0-based ``(source word, target word)``.

- AER of a hard alignment ``A``: ``1 − (|A∩S| + |A∩P|) / (|A| + |S|)``.
- SAER of a soft alignment matrix ``M_A`` (attention projected to words):
  ``1 − (|M_A ⊙ M_S| + |M_A ⊙ M_P|) / (|M_A| + |M_S|)``, where ``M_S``/``M_P``
  are 0/1 matrices of the gold links and ``|M|`` is the sum of the entries.

Both are computed at the corpus level (numerators and denominators summed over
sentences, as the standard AER tools do) and returned **in percent**; lower
is better.

Attention is stored per subword ``[T, S]`` (output step × source position),
with an optional ``<sink>`` column and the final ``</s>`` row
(:mod:`scanmt.data.attention_file`).  :func:`strip_specials` removes those;
the caller supplies the subword→word maps (``scanmt.data.subword.word_index``,
kept out of this low layer), and:

- :func:`hard_alignment` links, for every output subword, the word of its
  argmax source subword (a row that gives no weight to any real source token,
  e.g. all on the sink, yields no link);
- :func:`word_attention` sums the columns of a source word's subwords (the
  probability of attending to that word) and averages the rows of a target
  word's subwords (so a word's row is still a distribution).

AER on attention requires the output to be the gold target sentence
(forced decoding), so that target word indices match the gold links.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from scanmt.data.attention_file import labelled_sink
from scanmt.errors import DataError

Link = tuple[int, int]
LinkSet = set[Link]
EOS = "</s>"


def strip_specials(
    attention: np.ndarray, src: Sequence[str], hyp: Sequence[str], sink: bool | None = None
) -> tuple[np.ndarray, list[str], list[str]]:
    """Drop the ``<sink>`` column (last source token) and the final ``</s>`` row.

    Args:
        attention: ``[T, S]``.
        sink: whether the last column is the sink (an attention file's record); None: by its label.
    Returns:
        ``(attention [T', S'], src tokens S', hyp tokens T')``.
    """
    a = np.asarray(attention)
    src, hyp = list(src), list(hyp)
    if labelled_sink(src) if sink is None else sink:
        a, src = a[:, :-1], src[:-1]
    if hyp and hyp[-1] == EOS:
        a, hyp = a[:-1, :], hyp[:-1]
    return a, src, hyp


def _check_maps(attention: np.ndarray, src_words: Sequence[int], tgt_words: Sequence[int]) -> None:
    if attention.shape != (len(tgt_words), len(src_words)):
        raise DataError(
            f"attention shape {attention.shape} does not match {len(tgt_words)} output x "
            f"{len(src_words)} source word indices"
        )


def hard_alignment(attention: np.ndarray, src_words: Sequence[int], tgt_words: Sequence[int]) -> LinkSet:
    """Word links from attention: argmax source token of every output token.

    Args:
        attention: ``[T, S]`` subword attention without sink column / ``</s>`` row.
        src_words: ``[S]`` word index of each source subword.
        tgt_words: ``[T]`` word index of each output subword.
    Returns:
        0-based ``(source word, target word)`` links.
    """
    a = np.asarray(attention, dtype=np.float64)
    _check_maps(a, src_words, tgt_words)
    links: LinkSet = set()
    if a.size == 0:
        return links
    best = a.argmax(axis=1)
    for t, j in enumerate(best):
        if a[t, j] > 0:
            links.add((int(src_words[j]), int(tgt_words[t])))
    return links


def word_attention(attention: np.ndarray, src_words: Sequence[int], tgt_words: Sequence[int]) -> np.ndarray:
    """Project subword attention ``[T, S]`` to words ``[T_w, S_w]``.

    Columns of a source word are summed; rows of a target word are averaged.
    """
    a = np.asarray(attention, dtype=np.float64)
    _check_maps(a, src_words, tgt_words)
    si, ti = np.asarray(src_words, dtype=np.int64), np.asarray(tgt_words, dtype=np.int64)
    n_s = int(si.max()) + 1 if si.size else 0
    n_t = int(ti.max()) + 1 if ti.size else 0
    cols = np.zeros((a.shape[0], n_s))
    np.add.at(cols.T, si, a.T)  # cols[:, w] += a[:, j] for si[j] == w
    rows = np.zeros((n_t, n_s))
    np.add.at(rows, ti, cols)
    counts = np.bincount(ti, minlength=n_t).astype(np.float64)
    return rows / np.maximum(counts, 1.0)[:, None]


def _check_len(n_pred: int, n_gold: int, what: str) -> None:
    if n_pred != n_gold:
        raise DataError(f"{what}: {n_pred} predicted alignments but {n_gold} gold alignments")


def aer(predicted: Sequence[LinkSet], gold: Sequence[tuple[LinkSet, LinkSet]]) -> float:
    """Corpus AER in percent.

    Args:
        predicted: per sentence, hard links ``A``.
        gold: per sentence, ``(sure, possible)`` with ``possible ⊇ sure``
            (sure links are added to possible if missing).
    """
    _check_len(len(predicted), len(gold), "AER")
    a_s = a_p = n_a = n_s = 0
    for a, (sure, possible) in zip(predicted, gold):
        possible = set(possible) | set(sure)
        a = set(a)
        a_s += len(a & sure)
        a_p += len(a & possible)
        n_a += len(a)
        n_s += len(sure)
    if n_a + n_s == 0:
        raise DataError("AER: no predicted and no sure gold links: the rate is undefined")
    return 100.0 * (1.0 - (a_s + a_p) / (n_a + n_s))


def _gold_matrix(links: LinkSet, shape: tuple[int, int], sent: int) -> np.ndarray:
    """0/1 matrix ``[T_w, S_w]`` of 0-based ``(source, target)`` links."""
    m = np.zeros(shape)
    for i, j in links:
        if not (0 <= j < shape[0] and 0 <= i < shape[1]):
            raise DataError(
                f"SAER: sentence {sent + 1}: gold link {i}-{j} (0-based) outside "
                f"{shape[1]} source x {shape[0]} target words"
            )
        m[j, i] = 1.0
    return m


def saer(soft: Sequence[np.ndarray], gold: Sequence[tuple[LinkSet, LinkSet]]) -> float:
    """Corpus SAER in percent.

    Args:
        soft: per sentence, word attention ``[T_w, S_w]`` (target × source, as
            returned by :func:`word_attention`).
        gold: per sentence, ``(sure, possible)`` 0-based ``(source, target)`` links.
    """
    _check_len(len(soft), len(gold), "SAER")
    num = den = 0.0
    for k, (m_a, (sure, possible)) in enumerate(zip(soft, gold)):
        m_a = np.asarray(m_a, dtype=np.float64)
        m_s = _gold_matrix(set(sure), m_a.shape, k)
        m_p = _gold_matrix(set(possible) | set(sure), m_a.shape, k)
        num += float((m_a * m_s).sum() + (m_a * m_p).sum())
        den += float(m_a.sum() + m_s.sum())
    if den == 0:
        raise DataError("SAER: no attention mass and no sure gold links: the rate is undefined")
    return 100.0 * (1.0 - num / den)
