"""REP-score: over-translation as repeated n-grams (Malaviya et al. 2018, Section 5).

For a translation ``t`` and its reference ``r`` (token lists), with ``t(s)`` and
``r(s)`` the counts of an n-gram ``s`` in each::

    σ(t, r) = λ1 Σ_{s ∈ V^n, t(s) ≥ 2} max{0, t(s) − r(s)}
            + λ2 Σ_{w ∈ V} max{0, t(ww) − r(ww)}

where ``ww`` is the bigram of a word repeated back to back.  The corpus score is
``100 · Σ σ / (number of tokens in the reference corpus)``.  The paper uses
``n = 2``, ``λ1 = 1``, ``λ2 = 2`` on tokenized text.  A bigram ``ww`` counts in
both terms (when ``n = 2``), as in the formula.  Lower is better.
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence

from scanmt.errors import DataError


def ngram_counts(tokens: Sequence[str], n: int) -> Counter[tuple[str, ...]]:
    """Counts of the ``len(tokens) - n + 1`` n-grams of one sentence (empty when shorter than n)."""
    return Counter(tuple(tokens[k : k + n]) for k in range(len(tokens) - n + 1))


def rep_sentence(
    hyp: Sequence[str], ref: Sequence[str], *, n: int = 2, lambda1: float = 1.0, lambda2: float = 2.0
) -> float:
    """σ(t, r) for one sentence pair of token lists (not normalized)."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    t, r = ngram_counts(hyp, n), ngram_counts(ref, n)
    ngram_term = sum(max(0, c - r[s]) for s, c in t.items() if c >= 2)
    t2, r2 = (t, r) if n == 2 else (ngram_counts(hyp, 2), ngram_counts(ref, 2))
    double_term = sum(max(0, c - r2[s]) for s, c in t2.items() if s[0] == s[1])
    return lambda1 * ngram_term + lambda2 * double_term


def rep_score(
    hyps: Sequence[Sequence[str]],
    refs: Sequence[Sequence[str]],
    *,
    n: int = 2,
    lambda1: float = 1.0,
    lambda2: float = 2.0,
) -> float:
    """Corpus REP-score: ``100 · Σ_sentences σ / reference tokens``.

    Args:
        hyps, refs: one token list per sentence (tokenized text split on spaces).

    Raises:
        DataError: different numbers of sentences, or a reference without tokens.
    """
    if len(hyps) != len(refs):
        raise DataError(f"REP: {len(hyps)} hypotheses but {len(refs)} references")
    ref_words = sum(len(r) for r in refs)
    if ref_words == 0:
        raise DataError("REP: the reference corpus has no words to normalize by")
    total = sum(rep_sentence(h, r, n=n, lambda1=lambda1, lambda2=lambda2) for h, r in zip(hyps, refs))
    return 100.0 * total / ref_words
