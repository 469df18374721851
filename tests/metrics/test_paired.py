"""The paired bootstrap test of a corpus rate (REP, DROP) between two systems: ``scanmt.metrics.paired``."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scanmt.errors import DataError
from scanmt.metrics.paired import MIN_INPUTS, NO_TEST, format_p, paired_bootstrap_rate, paired_rates


def exact_p_lower(a, b, n) -> float:
    """The shifted-bootstrap p-value over *every* resample of 3 inputs (all 27 index triples, equally likely):
    the independent oracle for the Monte Carlo estimate."""
    diff, den = np.subtract(a, b, dtype=float), np.asarray(n, dtype=float)
    delta = 100 * diff.sum() / den.sum()
    hits = [100 * diff[list(ix)].sum() / den[list(ix)].sum() - delta <= delta
            for ix in itertools.product(range(len(den)), repeat=len(den))]
    return float(np.mean(hits))


def test_the_rates_and_their_difference_are_the_corpus_scores():
    t = paired_bootstrap_rate([1, 0, 2], [3, 1, 2], [10, 5, 5], samples=10)
    assert t.a == pytest.approx(100 * 3 / 20) and t.b == pytest.approx(100 * 6 / 20)
    assert t.delta == pytest.approx(-15.0) and t.inputs == 3 and t.samples == 10


@pytest.mark.parametrize("a, b, n", [([1, 0, 2], [3, 1, 2], [10, 5, 5]), ([0, 0, 1], [1, 0, 0], [4, 4, 4]),
                                      ([2, 2, 2], [0, 1, 0], [3, 7, 5])])
def test_the_monte_carlo_p_value_matches_the_exact_one_over_all_resamples(a, b, n):
    t = paired_bootstrap_rate(a, b, n, samples=20000, min_inputs=1)  # (the estimator itself: 3 inputs enumerate)
    exact = exact_p_lower(a, b, n)
    assert t.p_lower == pytest.approx(exact, abs=0.015), (t.p_lower, exact)


def test_a_clearly_lower_system_is_significant_and_the_reverse_is_not():
    rng = np.random.default_rng(0)
    n = rng.integers(5, 30, size=300)
    b = rng.binomial(n, 0.08)
    a = rng.binomial(n, 0.04)
    assert paired_bootstrap_rate(a, b, n).p_lower < 0.01
    assert paired_bootstrap_rate(b, a, n).p_lower > 0.99


def test_identical_systems_are_never_lower():
    assert paired_bootstrap_rate([1, 2, 3] * 4, [1, 2, 3] * 4, [5, 5, 5] * 4).p_lower == 1.0


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5), st.integers(1, 20)), min_size=MIN_INPUTS,
                max_size=30))
def test_p_is_a_probability_and_the_test_is_reproducible(rows):
    a, b, n = zip(*rows)
    t = paired_bootstrap_rate(a, b, n, samples=200)
    assert 0 < t.p_lower <= 1
    assert paired_bootstrap_rate(a, b, n, samples=200) == t
    # the same resamples test the reverse: P(d* <= 2 delta) + P(d* >= 2 delta) covers every draw at least once
    reverse = paired_bootstrap_rate(b, a, n, samples=200)
    assert reverse.delta == pytest.approx(-t.delta)
    assert t.p_lower + reverse.p_lower >= 1


def test_pooling_resamples_every_pair_and_refuses_other_inputs():
    one = ({"rep_sigma": [0, 1], "ref_words": [5, 5], "dropped": [1, 0], "source_words": [6, 4]},
           {"rep_sigma": [2, 1], "ref_words": [5, 5], "dropped": [1, 1], "source_words": [6, 4]})
    pooled = paired_rates([one, one], samples=50)
    assert pooled["REP"].inputs == 4 and pooled["REP"].delta == pytest.approx(-20.0)
    assert pooled["DROP"].delta == pytest.approx(-10.0)
    no_drop = ({"rep_sigma": [0], "ref_words": [5]}, {"rep_sigma": [1], "ref_words": [5]})
    assert set(paired_rates([no_drop], samples=10)) == {"REP"}
    # dropped words without their denominator: DROP is left out, not a KeyError
    half = ({**no_drop[0], "dropped": [1]}, {**no_drop[1], "dropped": [0]})
    assert set(paired_rates([half], samples=10)) == {"REP"}
    other = (one[0], {**one[1], "ref_words": [5, 6]})
    with pytest.raises(DataError, match="scored different inputs"):
        paired_rates([other])


@pytest.mark.parametrize("a, b, n, message", [([1], [1, 2], [3, 3], "must score the same inputs"),
                                               ([], [], [], "no inputs"), ([0], [0], [0], "sum to 0")])
def test_bad_input_is_named(a, b, n, message):
    with pytest.raises(DataError, match=message):
        paired_bootstrap_rate(a, b, n)


def exact_p_two_sided(a, b, n) -> float:
    """The two-sided shifted-bootstrap p-value over every resample of the inputs (the oracle, as above)."""
    diff, den = np.subtract(a, b, dtype=float), np.asarray(n, dtype=float)
    delta = 100 * diff.sum() / den.sum()
    hits = [abs(100 * diff[list(ix)].sum() / den[list(ix)].sum() - delta) >= abs(delta)
            for ix in itertools.product(range(len(den)), repeat=len(den))]
    return float(np.mean(hits))


@pytest.mark.parametrize("a, b, n", [([1, 0, 2], [3, 1, 2], [10, 5, 5]), ([2, 2, 2], [0, 1, 0], [3, 7, 5]),
                                      ([1, 0, 4, 0], [0, 2, 1, 1], [6, 4, 9, 5])])
def test_the_two_sided_p_value_matches_the_exact_one(a, b, n):
    t = paired_bootstrap_rate(a, b, n, samples=20000, min_inputs=1)
    assert t.p_two_sided == pytest.approx(exact_p_two_sided(a, b, n), abs=0.015)
    # a difference is at least as surprising one-sided, in its own direction, as two-sided
    reverse = paired_bootstrap_rate(b, a, n, samples=20000, min_inputs=1)
    assert min(t.p_lower, reverse.p_lower) <= t.p_two_sided + 1e-9


def counts(sigma: list[int], dropped: list[int]) -> dict[str, list[int]]:
    return {"rep_sigma": sigma, "ref_words": [10] * len(sigma), "dropped": dropped, "source_words": [8] * len(sigma)}


def test_difference_in_differences_is_the_arms_delta_minus_the_references():
    """Arm: 2 repeats fewer per input than its baseline; reference: 1 fewer. Over 12 inputs of 10 reference words,
    the arm's Δ REP is -20, the reference's -10, and ΔΔ -10; DROP moves the other way."""
    from scanmt.metrics.paired import difference_in_differences

    arm, arm0 = counts([0, 1, 0, 1] * 3, [2, 2, 2, 2] * 3), counts([2, 3, 2, 3] * 3, [1, 1, 1, 1] * 3)
    ref, ref0 = counts([1, 1, 1, 1] * 3, [1, 1, 1, 1] * 3), counts([2, 2, 2, 2] * 3, [1, 1, 1, 1] * 3)
    got = difference_in_differences([(arm, arm0, ref, ref0)], samples=200)
    assert (got["REP"].a, got["REP"].b, got["REP"].delta) == pytest.approx((-20.0, -10.0, -10.0))
    assert (got["DROP"].a, got["DROP"].b, got["DROP"].delta) == pytest.approx((12.5, 0.0, 12.5))
    # a constant shift on every input is no chance event: every resample has the same ΔΔ
    assert got["REP"].p_two_sided == pytest.approx(1 / 201) and got["REP"].p_lower == pytest.approx(1 / 201)
    # the same effect in both settings: ΔΔ 0, nothing to see
    same = difference_in_differences([(arm, arm0, arm, arm0)], samples=200)
    assert same["REP"].delta == 0 and same["REP"].p_two_sided == 1.0
    # pooling two seeds doubles the inputs
    assert difference_in_differences([(arm, arm0, ref, ref0)] * 2, samples=50)["REP"].inputs == 24


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(*[st.integers(0, 4)] * 4, st.integers(1, 12)), min_size=MIN_INPUTS, max_size=20))
def test_difference_in_differences_is_a_paired_test_of_the_two_deltas(rows):
    """Swapping arm and reference negates ΔΔ and keeps its two-sided p; the result is the plain paired test of the
    per-input differences, an independent computation of the same quantity."""
    from scanmt.metrics.paired import difference_in_differences

    a, a0, r, r0, n = (list(x) for x in zip(*rows))
    quad = tuple({"rep_sigma": x, "ref_words": n} for x in (a, a0, r, r0))
    got = difference_in_differences([quad], samples=100)["REP"]
    swapped = difference_in_differences([(quad[2], quad[3], quad[0], quad[1])], samples=100)["REP"]
    assert swapped.delta == pytest.approx(-got.delta) and swapped.p_two_sided == pytest.approx(got.p_two_sided)
    plain = paired_bootstrap_rate([x - y for x, y in zip(a, a0)], [x - y for x, y in zip(r, r0)], n, samples=100)
    assert got == plain
    assert 100 * (sum(a) - sum(a0) - sum(r) + sum(r0)) / sum(n) == pytest.approx(got.delta)


def test_difference_in_differences_refuses_runs_of_other_inputs():
    from scanmt.metrics.paired import difference_in_differences

    good = counts([0, 1], [0, 0])
    other = {**good, "source_words": [8, 9]}
    with pytest.raises(DataError, match="DROP difference in differences: the four runs of a seed scored different"):
        difference_in_differences([(good, good, good, other)])
    assert difference_in_differences([]) == {}


@pytest.mark.parametrize("deltas, lower, two", [
    ([-1.0, -2.0, -3.0], 1 / 8, 2 / 8),       # every seed lower: the smallest p 3 seeds allow
    ([-3.78, -1.64, 0.11], 2 / 8, 4 / 8),     # flips with a mean <= -1.77: (-,-,+), (-,-,-)
    ([1.0, 2.0], 1.0, 2 / 4),
    ([0.0, 0.0, 0.0], 1.0, 1.0),
])
def test_the_sign_flip_p_counts_the_flips_by_hand(deltas, lower, two):
    from scanmt.metrics.paired import sign_flip_p

    assert sign_flip_p(deltas) == pytest.approx(lower)
    assert sign_flip_p(deltas, two_sided=True) == pytest.approx(two)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-10, 10, allow_nan=False), min_size=2, max_size=6))
def test_the_sign_flip_p_against_an_enumeration(deltas):
    from scanmt.metrics.paired import sign_flip_p

    observed = sum(deltas) / len(deltas)
    means = [sum(s * d for s, d in zip(flip, deltas)) / len(deltas)
             for flip in itertools.product((1, -1), repeat=len(deltas))]
    tol = 1e-12 * max(1.0, max(abs(d) for d in deltas))  # ties within rounding count as ties, as the code does
    lower = sum(m <= observed + tol for m in means) / len(means)
    two = sum(abs(m) >= abs(observed) - tol for m in means) / len(means)
    assert sign_flip_p(deltas) == pytest.approx(lower) and sign_flip_p(deltas, two_sided=True) == pytest.approx(two)
    assert 2 ** -len(deltas) <= sign_flip_p(deltas) <= 1


def test_one_seed_has_no_seed_level_test():
    from scanmt.metrics.paired import sign_flip_p

    assert sign_flip_p([-1.0]) is None and sign_flip_p([]) is None


def test_paired_means_are_percent_over_the_inputs_both_measured():
    """P(</s>) after the first sentence: an input either side left out (None) does not count, seeds pool."""
    from scanmt.metrics.paired import paired_means

    t = paired_means([([0.9, None, 0.5, 0.1], [0.3, 0.7, None, 0.2]), ([0.6], [0.6])], samples=200)
    assert t.inputs == 3 and t.a == pytest.approx(100 * (0.9 + 0.1 + 0.6) / 3)
    assert t.b == pytest.approx(100 * (0.3 + 0.2 + 0.6) / 3)
    assert t.delta == pytest.approx(100 * (0.6 - 0.1 + 0.0) / 3)
    assert (t.p_lower, t.p_two_sided) == (None, None)  # 3 inputs: no test
    # the same as a rate whose denominators are all 1, resampled alike
    t = paired_means([([0.9, None, 0.5, 0.1], [0.3, 0.7, None, 0.2]), ([0.6], [0.6])] * 4, samples=200)
    same = paired_bootstrap_rate([0.9, 0.1, 0.6] * 4, [0.3, 0.2, 0.6] * 4, [1] * 12, samples=200)
    assert t.p_lower is not None and (t.p_lower, t.p_two_sided) == (same.p_lower, same.p_two_sided)
    assert paired_means([([None], [0.5])]) is None and paired_means([]) is None
    with pytest.raises(DataError, match="2 and 1 values"):
        paired_means([([0.1, 0.2], [0.3])])


def test_fewer_than_min_inputs_give_no_p_value_and_the_printers_say_so():
    """One joined input (a stress test at a K as large as the test set): every resample is that input, and the
    p-value was 1 / (1 + samples) = 0.001 whatever the difference (issue 52, item 9)."""
    from scanmt.metrics.paired import difference_in_differences, paired_means

    one = paired_bootstrap_rate([3], [5], [40])
    assert one.delta == pytest.approx(-5.0) and one.inputs == 1
    assert one.p_lower is None and one.p_two_sided is None
    few = [1, 0, 2, 0, 1, 0, 0, 1, 2][: MIN_INPUTS - 1]
    assert paired_bootstrap_rate(few, [x + 1 for x in few], [10] * len(few)).p_lower is None
    enough = paired_bootstrap_rate(few + [0], [x + 1 for x in few + [0]], [10] * MIN_INPUTS)
    assert enough.p_lower is not None and enough.p_lower < 0.01
    pair = counts([1], [0]), counts([2], [1])
    assert all(t.p_lower is None and t.p_two_sided is None for t in paired_rates([pair]).values())
    assert difference_in_differences([(*pair, *pair)])["REP"].p_two_sided is None
    assert paired_means([([0.5], [0.1])]).p_two_sided is None
    assert format_p(None) == NO_TEST == f"n/a: fewer than {MIN_INPUTS} inputs"
    assert format_p(0.0123) == "0.012" and format_p(0.0123, significant_below=0.05) == "0.012 †"
    assert format_p(0.2, significant_below=0.05) == "0.200"
