"""REP-score against hand-computed values (paper: n = 2, λ1 = 1, λ2 = 2, ×100 / reference words)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scanmt.errors import DataError
from scanmt.metrics.rep import ngram_counts, rep_score, rep_sentence


def toks(s: str) -> list[str]:
    return s.split()


def test_ngram_counts():
    assert ngram_counts(toks("a b a b"), 2) == {("a", "b"): 2, ("b", "a"): 1}
    assert ngram_counts(toks("a"), 2) == {}
    assert ngram_counts([], 2) == {}


def test_repeated_bigram():
    # hyp bigrams: (the,cat) x2, (cat,the), (cat,sat); ref has (the,cat) once -> 2 - 1 = 1
    assert rep_sentence(toks("the cat the cat sat"), toks("the cat sat")) == 1


def test_repeated_word_counts_in_both_terms():
    # (dog,dog) x2, not in ref: n-gram term 2, ww term 2 * 2 = 4
    assert rep_sentence(toks("a dog dog dog runs"), toks("a dog runs")) == 6


def test_single_ww_only_in_second_term():
    # (the,the) occurs once: below the t(s) >= 2 threshold, but the ww term counts it: 2 * 1
    assert rep_sentence(toks("the the cat"), toks("the cat")) == 2


def test_ngrams_also_in_reference_are_discounted():
    # the reference repeats "very" too: t(very very) = 1 <= r = 2 -> nothing
    assert rep_sentence(toks("very very good"), toks("it is very very very good")) == 0
    # (no,no): t = 3, r = 2 -> n-gram term 1, ww term 2 * 1 = 2
    assert rep_sentence(toks("no no no no"), toks("no no no")) == 3
    # a bigram repeated as often in the reference costs nothing
    assert rep_sentence(toks("the cat and the cat"), toks("the cat saw the cat")) == 0


def test_weights_and_n():
    hyp, ref = toks("a dog dog dog runs"), toks("a dog runs")
    assert rep_sentence(hyp, ref, lambda1=0.0, lambda2=1.0) == 2
    assert rep_sentence(hyp, ref, lambda1=1.0, lambda2=0.0) == 2
    # n = 3: trigram (dog,dog,dog) occurs once -> n-gram term 0; ww (bigram) term still 2 * 2
    assert rep_sentence(hyp, ref, n=3) == 4
    # n = 1: unigram dog x3 vs ref 1 -> 2; ww term 4
    assert rep_sentence(hyp, ref, n=1) == 6


def test_corpus_score_with_empty_lines():
    hyps = [toks("the cat the cat sat"), toks("a dog dog dog runs"), [], toks("x")]
    refs = [toks("the cat sat"), toks("a dog runs"), toks("a b"), []]
    # sigma: 1 + 6 + 0 + 0 = 7; reference words 3 + 3 + 2 + 0 = 8
    assert rep_score(hyps, refs) == pytest.approx(100 * 7 / 8)


def test_corpus_errors():
    with pytest.raises(DataError, match="2 hypotheses but 1 references"):
        rep_score([["a"], ["b"]], [["a"]])
    with pytest.raises(DataError, match="no words"):
        rep_score([["a"]], [[]])


words = st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=12)


@given(words)
def test_identical_translation_scores_zero(sent):
    assert rep_sentence(sent, sent) == 0


@given(words, words)
def test_nonnegative_and_zero_without_repeats(hyp, ref):
    value = rep_sentence(hyp, ref)
    assert value >= 0
    bigrams = ngram_counts(hyp, 2)
    if all(c == 1 for c in bigrams.values()) and all(a != b for a, b in bigrams):
        assert value == 0
