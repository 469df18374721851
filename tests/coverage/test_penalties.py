"""CovPenalty and the length penalty: hand-computed values, zero attention, padding, the sink."""

import math

import pytest
import torch

from scanmt.decoding.penalties import coverage_penalty, hypothesis_score, length_penalty

LOG_EPS = math.log(0.1)


@pytest.mark.parametrize(
    "length, alpha, expected",
    [(1, 0.0, 1.0), (1, 0.2, 1.0), (7, 1.0, 2.0), (7, 0.5, math.sqrt(2.0)), (19, 1.0, 4.0), (3, 0.6, (8 / 6) ** 0.6)],
)
def test_length_penalty_by_hand(length, alpha, expected):
    # lp(Y) = (5 + |Y|)^alpha / 6^alpha
    assert math.isclose(float(length_penalty(length, alpha)), (5 + length) ** alpha / 6**alpha)
    assert math.isclose(float(length_penalty(length, alpha)), expected)


def test_coverage_penalty_by_hand_with_padding():
    beta = torch.tensor([[0.5, 1.5, 0.0, 0.3], [1.0, 0.05, 0.0, 0.0]])
    mask = torch.tensor([[True, True, True, False], [True, True, False, False]])
    cp = coverage_penalty(beta, mask, 0.4, 0.1)
    # row 0: log .5 + log min(1, 1.5) + log max(.1, 0); the padded 0.3 does not count
    # row 1: log 1 + log max(.1, .05)
    expected = torch.tensor([0.4 * (math.log(0.5) + 0.0 + LOG_EPS), 0.4 * (0.0 + LOG_EPS)])
    torch.testing.assert_close(cp, expected)


def test_coverage_penalty_is_finite_for_zero_attention():
    beta = torch.zeros(2, 3)
    mask = torch.tensor([[True, True, True], [False, False, False]])
    cp = coverage_penalty(beta, mask, 1.0, 0.1)
    assert torch.isfinite(cp).all()
    torch.testing.assert_close(cp, torch.tensor([3 * LOG_EPS, 0.0]))  # fully padded row: 0
    cp = coverage_penalty(beta, mask, 1.0, 0.25)
    torch.testing.assert_close(cp, torch.tensor([3 * math.log(0.25), 0.0]))


def test_coverage_penalty_off_and_bounds():
    beta = torch.tensor([[0.0, 2.0, 0.7]])
    mask = torch.ones(1, 3, dtype=torch.bool)
    assert float(coverage_penalty(beta, mask, 0.0)) == 0.0
    full = torch.tensor([[1.0, 3.0, 1.0]])
    assert float(coverage_penalty(full, mask, 1.0)) == 0.0  # full coverage costs nothing
    assert float(coverage_penalty(beta, mask, 1.0)) <= 0.0
    with pytest.raises(ValueError, match="eps"):
        coverage_penalty(beta, mask, 1.0, 0.0)


def test_hypothesis_score_by_hand():
    beta = torch.tensor([0.5, 1.5, 0.0])
    mask = torch.ones(3, dtype=torch.bool)
    s = hypothesis_score(-4.0, 7, beta, mask, length_alpha=1.0, coverage_beta=0.4, coverage_eps=0.1)
    assert math.isclose(s, -4.0 / 2.0 + 0.4 * (math.log(0.5) + LOG_EPS), rel_tol=1e-6)
    assert hypothesis_score(-4.0, 7, beta, mask, length_alpha=0.0, coverage_beta=0.0) == -4.0
    batch = hypothesis_score(torch.tensor([-4.0, -1.0]), torch.tensor([7, 1]), torch.stack([beta, beta]),
                             torch.stack([mask, mask]), length_alpha=1.0, coverage_beta=0.4)
    torch.testing.assert_close(batch, torch.tensor([s, -1.0 + 0.4 * (math.log(0.5) + LOG_EPS)]))
