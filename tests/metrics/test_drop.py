"""DROP-score against hand-computed values."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scanmt.errors import DataError
from scanmt.metrics.drop import DropResult, DropSamples, aligned_and_dropped, drop_score, sentence_drops


def test_hand_computed():
    src_lens = [4, 3, 2, 0]
    ref = [
        {(0, 0), (1, 1), (2, 1), (3, 2)},  # every source word aligned to the reference
        {(0, 0), (0, 1)},  # word 0 only; word 2 aligned to nothing anywhere (not dropped)
        {(0, 0), (1, 0)},
        set(),  # an empty source line
    ]
    hyp = [
        {(0, 0), (1, 1)},  # words 2, 3 dropped
        {(1, 0)},  # word 0 dropped; word 1 aligned only to the output (not dropped)
        set(),  # an empty hypothesis: both words dropped
        set(),
    ]
    r = drop_score(ref, hyp, src_lens)
    assert r == DropResult(dropped=5, source_words=9, ref_aligned=7)
    assert r.score == pytest.approx(100 * 5 / 9)
    assert r.score_of_aligned == pytest.approx(100 * 5 / 7)
    # the same counts sentence by sentence (the stress test's paired bootstrap resamples them)
    assert sentence_drops(ref, hyp, src_lens) == [DropResult(2, 4, 4), DropResult(1, 3, 1), DropResult(2, 2, 2),
                                                  DropResult(0, 0, 0)]
    # and which words (DROP by word class, scripts/drop_by_pos.py)
    assert aligned_and_dropped(ref, hyp, src_lens) == [({0, 1, 2, 3}, {2, 3}), ({0}, {0}), ({0, 1}, {0, 1}),
                                                       (set(), set())]


def test_word_aligned_several_times_counts_once():
    r = drop_score([{(0, 0), (0, 1), (0, 2)}], [set()], [1])
    assert (r.dropped, r.ref_aligned, r.score) == (1, 1, 100.0)


def test_empty_corpus():
    r = drop_score([], [], [])
    assert r.score == 0.0 and r.score_of_aligned == 0.0


def test_errors():
    with pytest.raises(DataError, match="must match"):
        drop_score([set()], [], [1])
    with pytest.raises(DataError, match="sentence 2: source-output link 3-0 outside a source of 3 words"):
        drop_score([set(), set()], [set(), {(3, 0)}], [1, 3])


link_sets = st.sets(st.tuples(st.integers(0, 7), st.integers(0, 7)), max_size=20)


@given(st.lists(st.tuples(link_sets, link_sets), max_size=6))
def test_bounds_and_identity(pairs):
    ref = [r for r, _ in pairs]
    hyp = [h for _, h in pairs]
    lens = [8] * len(pairs)
    r = drop_score(ref, hyp, lens)
    assert 0 <= r.dropped <= r.ref_aligned <= r.source_words
    assert drop_score(ref, ref, lens).dropped == 0
    assert drop_score(ref, [set()] * len(ref), lens).dropped == r.ref_aligned


def test_samples_average_hand_computed_pairings():
    """DropSamples: the mean and sample standard deviation over the pairings, by hand."""
    a = DropResult(dropped=2, source_words=10, ref_aligned=8)  # 20 %, 25 % of aligned
    b = DropResult(dropped=4, source_words=10, ref_aligned=8)  # 40 %, 50 %
    c = DropResult(dropped=3, source_words=10, ref_aligned=6)  # 30 %, 50 %
    d = DropSamples((a, b, c, a))
    assert d.scores == pytest.approx([20.0, 40.0, 30.0, 20.0])
    assert d.score == pytest.approx(27.5)
    # sample sd of 20, 40, 30, 20: sqrt(((-7.5)^2 + 12.5^2 + 2.5^2 + (-7.5)^2) / 3)
    assert d.score_sd == pytest.approx((275 / 3) ** 0.5)
    assert d.score_of_aligned == pytest.approx((25 + 50 + 50 + 25) / 4)
    assert d.dropped == pytest.approx(11 / 4) and d.ref_aligned == pytest.approx(30 / 4)
    assert d.source_words == 10
    one = DropSamples((b,))
    assert (one.score, one.score_sd, one.dropped, one.ref_aligned) == (40.0, 0.0, 4, 8)
    assert isinstance(one.dropped, int)


def test_samples_needs_a_result():
    with pytest.raises(DataError, match="no alignment samples"):
        DropSamples(())
