"""centmax at extreme scores (issue 52, item 7): the property of tests/ops/test_extremes.py for the
other ops (every finite input up to 1e30 in magnitude gives a finite point of the bounded simplex,
in float32 and float64) for centmax, at alpha close to 1 and far above 2, with a number or a
per-row (learned) alpha tensor; and -1e30 acts as -inf.

Before the fix ``q = (b (z - t))^(1/b)`` overflowed to inf far above the threshold (``z = 1e3`` at
alpha 1 + 1e-5: ``(1 + 1e-2)^(1e5)``) and the capped entries' ``inf * 0`` made ``p`` NaN; and an
entry at -1e30 put the bracket's lower end there, so a Newton step at its rounding (1e14) ended the
search anywhere (0.005 for 0.073)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from scanmt.ops import centmax

from .cases import PROPERTY_SETTINGS
from .test_extremes import DTYPES, TOL, bounds, check_point, extreme_rows

#: close to 1 (the powers 1/b are huge), around 1.5, and far above 2
ALPHAS = (1.0 + 1e-5, 1.0001, 1.001, 1.01, 1.1, 1.5, 1.7, 2.5, 5.0, 10.0)
#: an entry at -1e30 is compared with -inf in rows whose other entries are all above this (far above it
#: at every alpha: 1 / (alpha - 1) <= 1e5)
FAR_ABOVE = -1e29


def _alpha(draw, R: int, dtype: torch.dtype):
    """A number, or one alpha per row (the learned-alpha path: a tensor that takes a gradient)."""
    if draw(st.booleans()):
        return draw(st.sampled_from(ALPHAS))
    return torch.tensor(draw(st.lists(st.sampled_from(ALPHAS), min_size=R, max_size=R)), dtype=dtype).reshape(R, 1)


def _as_minus_inf(z: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """``[R]`` bool: the rows where an entry at -1e30 must act as -inf: some entry is -1e30, the others
    are far above it (:data:`FAR_ABOVE`) and their bounds alone are feasible with room to spare."""
    low = z == -1e30
    others_high = torch.where(low, torch.inf, z.double()).amin(-1) >= FAR_ABOVE
    others_feasible = torch.where(low, 0.0, u.double().clamp(max=1.0)).sum(-1) >= 1.001
    return low.any(-1) & ~low.all(-1) & others_high & others_feasible


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
@PROPERTY_SETTINGS
@given(data=st.data())
def test_centmax_gives_a_bounded_simplex_point_at_extreme_scores_and_minus_1e30_acts_as_minus_inf(dtype, data):
    z = data.draw(extreme_rows(dtype))
    u = data.draw(bounds(z))
    alpha = _alpha(data.draw, z.shape[0], dtype)
    p = centmax(z, u, alpha)
    assert p.dtype == dtype
    check_point(p, u, True, TOL[dtype])
    rows = _as_minus_inf(z, u)
    if bool(rows.any()):
        a = alpha[rows] if isinstance(alpha, torch.Tensor) else alpha
        q = centmax(torch.where(z == -1e30, -torch.inf, z)[rows], u[rows], a)
        torch.testing.assert_close(p[rows], q, atol=TOL[dtype] * 5, rtol=0,
                                   msg=lambda m: f"-1e30 vs -inf: {m}\n{z.tolist()}\n{u.tolist()}\n{alpha}")


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_the_extreme_cases_of_the_issue(dtype):
    """NaN at alpha close to 1 with a capped score of 1e3-1e6; a -1e30 entry ending the search early;
    at alpha = 10 a score of 1e4 left the sink (u = inf, the lowest score) 0 and the sum 0.935."""
    u = torch.tensor([[0.5, 1.0, 1.0, 1.0]], dtype=dtype)
    for alpha in (1.00001, 1.0001, 1.001, 1.01):
        for s in (1e3, 1e4, 1e6, 1e30):
            p = centmax(torch.tensor([[s, 0.0, -s, 1.0]], dtype=dtype), u, alpha)
            check_point(p, u, True, TOL[dtype])
            assert float(p[0, 0]) == pytest.approx(0.5)
    z = [-1e30, 1.0039615758421696, -0.6179070447076008, 1.8220113633283233]
    u = torch.tensor([[np.inf, 1.0, np.inf, 0.1]], dtype=dtype)
    # the KKT point (tests/ops/test_entmax.py's oracle, and -inf for -1e30 gives it too)
    want = torch.tensor([[0.0, 0.88337318, 0.01662682, 0.1]], dtype=torch.float64)
    torch.testing.assert_close(centmax(torch.tensor([z], dtype=dtype), u, 1.5).double(), want, atol=1e-6, rtol=0)
    z = [1.24, 1.17, 1.23, 1.23, 1.92, 1.37, 1.89, 1.04, 1e4, 0.72, 0.93, 0.72, 3.26, 0.81, -0.1, -0.07, -0.19, 0.83,
         1.47, 0.15]
    u = [0.05, 0.05, 0.1, 0.05, 0.03, 0.1, 0.1, 0.05, 0.1, 0.03, 0.03, 0.005, 0.05, 0.03, 0.05, 0.03, np.inf, 0.005,
         0.05, 0.03]
    want = torch.tensor([u], dtype=torch.float64)
    want[0, 16] = 1.0 - sum(u[:16]) - sum(u[17:])  # every other entry capped (far above it at alpha = 10): the rest
    u = torch.tensor([u], dtype=dtype)
    p = centmax(torch.tensor([z], dtype=dtype), u, 10.0)
    check_point(p, u, True, TOL[dtype])
    torch.testing.assert_close(p.double(), want, atol=1e-6, rtol=0)
