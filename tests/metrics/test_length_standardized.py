"""REP at equal length (:mod:`scanmt.metrics.length_standardized`): a hand-computed case, the edge cases, and
properties against a brute-force oracle over random inputs."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scanmt.errors import DataError
from scanmt.metrics.length_standardized import length_strata, standardize, standardize_drop


def test_strata_by_length_ratio():
    # ratios 0.3, 0.5 (on an edge: the upper group), 0.95, 2.0, and no reference words (ratio 0)
    assert length_strata([3, 5, 19, 20, 4], [10, 10, 20, 10, 0], (0.5, 1.0)) == [0, 1, 1, 2, 0]
    with pytest.raises(DataError, match="must be sorted"):
        length_strata([1], [1], (1.0, 0.5))
    with pytest.raises(DataError, match="2 output lengths for 1 references"):
        length_strata([1, 2], [1])


def test_a_hand_computed_case():
    # baseline B: group 0 (short) σ 1 per 100 words, group 1 (long) σ 10 per 100 words
    b_x, b_n, b_s = [1, 1, 10], [50, 50, 100], [0, 0, 1]
    # system A: 100 words in group 0, 300 in group 1; its σ 2 and 60
    a_x, a_n, a_s = [2, 60], [100, 300], [0, 1]
    r = standardize(a_x, a_n, a_s, b_x, b_n, b_s)
    assert r.system == pytest.approx(100 * 62 / 400)  # 15.5
    assert r.baseline == pytest.approx(100 * 12 / 200)  # 6.0
    # B's rates 0.02 and 0.10, weighted 100 : 300 -> (2 + 30) / 400 = 8 %
    assert r.baseline_at_system_lengths == pytest.approx(8.0)
    assert r.explained == pytest.approx((8.0 - 6.0) / (15.5 - 6.0))
    assert r.uncovered == 0.0


def test_groups_the_baseline_lacks_are_left_out_and_counted():
    r = standardize([5, 1], [100, 100], [2, 0], [1], [100], [0])
    assert r.baseline_at_system_lengths == pytest.approx(1.0) and r.uncovered == pytest.approx(0.5)
    nothing = standardize([5], [100], [2], [1], [100], [0])
    assert math.isnan(nothing.baseline_at_system_lengths) and nothing.uncovered == 1.0
    assert nothing.explained is None  # (it crashed the report: int(round(NaN)))
    assert standardize([1], [100], [0], [1], [100], [0]).explained is None  # no gap to explain


@pytest.mark.parametrize("args, message", [
    (([1], [1, 2], [0], [1], [1], [0]), "the system has 1 counts, 2 denominators"),
    (([1], [1], [0], [], [], []), "the baseline has no inputs"),
    (([1], [0], [0], [1], [1], [0]), "the system has no inputs, or its denominators sum to 0"),
])
def test_bad_inputs_are_named(args, message):
    with pytest.raises(DataError, match=message):
        standardize(*args)


inputs = st.lists(st.tuples(st.integers(0, 6), st.integers(1, 30), st.integers(0, 3)), min_size=1, max_size=25)


@settings(max_examples=150, deadline=None)
@given(a=inputs, b=inputs)
def test_against_a_per_group_oracle(a, b):
    r = standardize([x for x, _, _ in a], [n for _, n, _ in a], [s for _, _, s in a],
                    [x for x, _, _ in b], [n for _, n, _ in b], [s for _, _, s in b])
    groups = sorted({s for _, _, s in a})
    b_rate = {g: sum(x for x, _, s in b if s == g) / sum(n for _, n, s in b if s == g)
              for g in groups if any(s == g for _, _, s in b)}
    weight = {g: sum(n for _, n, s in a if s == g) for g in groups}
    covered = sum(weight[g] for g in b_rate)
    assert r.uncovered == pytest.approx(1 - covered / sum(weight.values()))
    if covered:
        assert r.baseline_at_system_lengths == pytest.approx(100 * sum(b_rate[g] * weight[g] for g in b_rate) / covered)
        # a weighted mean of B's group rates lies between the smallest and the largest of them
        assert min(b_rate.values()) * 100 - 1e-9 <= r.baseline_at_system_lengths <= max(b_rate.values()) * 100 + 1e-9
    # the system standardized to its own lengths is its own rate
    own = standardize([x for x, _, _ in a], [n for _, n, _ in a], [s for _, _, s in a],
                      [x for x, _, _ in a], [n for _, n, _ in a], [s for _, _, s in a])
    assert own.baseline_at_system_lengths == pytest.approx(own.system) and own.uncovered == 0.0


def test_drop_at_the_systems_lengths():
    """DROP counts dropped source words per source word; the length groups come from output/reference words.
    The baseline drops 6 of 10 words where it writes half the reference and 1 of 10 where it writes all of it;
    the system writes all of both: the baseline at its lengths drops 10 %, against 35 % as it wrote."""
    base = {"dropped": [6, 1], "source_words": [10, 10], "ref_words": [8, 8], "hyp_words": [4, 8]}
    system = {"dropped": [2, 1], "source_words": [10, 10], "ref_words": [8, 8], "hyp_words": [8, 8]}
    r = standardize_drop([system], [base])
    assert (r.system, r.baseline, r.baseline_at_system_lengths, r.uncovered) == (15.0, 35.0, 10.0, 0.0)
    assert r.explained == pytest.approx((10.0 - 35.0) / (15.0 - 35.0))
    with pytest.raises(DataError, match="DROP at equal length: the baseline's counts have no hyp_words"):
        standardize_drop([system], [{k: v for k, v in base.items() if k != "hyp_words"}])
