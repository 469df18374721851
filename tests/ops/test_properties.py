"""Hypothesis property tests, one per item of the ops' documented semantics."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

from . import oracle
from .cases import PROPERTY_SETTINGS
from scanmt.ops import FEASIBILITY_TOL, _checks, csoftmax, csparsemax, softmax, sparsemax

from .conftest import PATHS, on_path

CONSTRAINED = {"csoftmax": csoftmax, "csparsemax": csparsemax}
#: the PyTorch algorithms; with path="native" the native kernels run instead
METHOD = st.sampled_from(["dense", "iter", "sort"])


def solver(path: str, method: str):
    """The native kernels (path "native") or the PyTorch algorithm ``method``."""
    return on_path("native") if path == "native" else _checks.use_method(method)


@st.composite
def rows(draw, max_rows: int = 4, max_j: int = 10, scale=(1e-3, 1e4), ties: bool = True):
    """A float32-representable score matrix [R, J], possibly with ties and big magnitudes."""
    R = draw(st.integers(1, max_rows))
    J = draw(st.integers(1, max_j))
    s = draw(st.floats(*scale))
    if ties and draw(st.booleans()):
        vals = draw(st.lists(st.sampled_from([-1.0, -0.5, 0.0, 0.5, 1.0]), min_size=R * J, max_size=R * J))
    else:
        vals = draw(st.lists(st.floats(-1.0, 1.0), min_size=R * J, max_size=R * J))
    shift = draw(st.floats(-1e4, 1e4)) if draw(st.booleans()) else 0.0
    z = np.clip(np.array(vals).reshape(R, J) * s + shift, -1e4, 1e4)
    return torch.tensor(z, dtype=torch.float32)


@st.composite
def feasible_bounds(draw, z: torch.Tensor, allow_inf: bool = True):
    """Bounds for ``z`` with sum(u) >= 1 in every row: zeros, tiny, tight, loose, +inf."""
    R, J = z.shape
    choice = st.sampled_from([0.0, 1e-7, 0.05, 0.2, 0.5, 1.0, 3.0] + ([math.inf] if allow_inf else []))
    u = np.array(draw(st.lists(choice, min_size=R * J, max_size=R * J)), dtype=np.float64).reshape(R, J)
    for i in range(R):
        s = np.minimum(u[i], 1).sum()
        if s < 1:
            j = draw(st.integers(0, J - 1))
            u[i, j] += 1.0 - s + draw(st.sampled_from([0.0, 1e-3, 0.5]))
    return torch.tensor(u, dtype=torch.float32)


def _check_simplex(p: torch.Tensor, u: torch.Tensor, atol: float = 1e-6) -> None:
    p64, u64 = p.double(), u.double()
    assert torch.isfinite(p64).all()
    assert (p64 >= 0).all()
    assert (p64 <= u64 + atol).all(), float((p64 - u64).max())
    err = (p64.sum(-1) - 1).abs().max()
    assert err <= atol, float(err)


# ----------------------------------------------------------------------------
# 0 <= p <= u and sum(p) == 1 to 1e-6 in float32 (ties, |z| up to 1e4, u = 0, u = inf)
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
@PROPERTY_SETTINGS
@given(data=st.data(), method=METHOD, op=st.sampled_from(sorted(CONSTRAINED)))
def test_feasible_simplex_point_float32(path, data, method, op):
    z = data.draw(rows())
    u = data.draw(feasible_bounds(z))
    with solver(path, method):
        p = CONSTRAINED[op](z, u)
    assert p.dtype == torch.float32
    _check_simplex(p, u)
    # and it is the solution (float64 oracle on the same float32 numbers)
    ofn = getattr(oracle, op)
    ref = np.stack([ofn(z[i].double().numpy(), u[i].double().numpy()) for i in range(z.shape[0])])
    np.testing.assert_allclose(p.double().numpy(), ref, atol=2e-5)


@pytest.mark.parametrize("path", PATHS)
@PROPERTY_SETTINGS
@given(data=st.data(), method=st.sampled_from(["iter", "sort"]))
def test_sparsemax_simplex_point_float32(path, data, method):
    z = data.draw(rows())
    with solver(path, method):
        p = sparsemax(z)
    _check_simplex(p, torch.ones_like(p))
    ref = np.stack([oracle.sparsemax(r) for r in z.double().numpy()])
    np.testing.assert_allclose(p.double().numpy(), ref, atol=2e-5)


# ----------------------------------------------------------------------------
# u >= 1 gives softmax and sparsemax back
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
@PROPERTY_SETTINGS
@given(data=st.data(), method=METHOD)
def test_loose_bounds_give_back_softmax_and_sparsemax(path, data, method):
    z = data.draw(rows(scale=(1e-3, 30.0))).double()
    big = data.draw(st.sampled_from([1.0, 1.5, 1e3, math.inf]))
    u = torch.full_like(z, big)
    with solver(path, method):
        torch.testing.assert_close(csoftmax(z, u), softmax(z), atol=1e-12, rtol=1e-9)
        torch.testing.assert_close(csparsemax(z, u), sparsemax(z), atol=1e-12, rtol=1e-9)
    torch.testing.assert_close(softmax(z), torch.softmax(z, -1), atol=1e-12, rtol=1e-9)


# ----------------------------------------------------------------------------
# sum(u) == 1 gives p == u
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
@PROPERTY_SETTINGS
@given(data=st.data(), method=METHOD, op=st.sampled_from(sorted(CONSTRAINED)))
def test_bounds_summing_to_one_give_p_equal_u(path, data, method, op):
    z = data.draw(rows())
    R, J = z.shape
    # dyadic weights: sum exactly 1 in float32
    k = data.draw(st.lists(st.integers(0, 8), min_size=R * J, max_size=R * J))
    w = torch.tensor(k, dtype=torch.float64).reshape(R, J)
    w[:, 0] += 1
    u = (w / w.sum(-1, keepdim=True)).float()
    assume(bool(((u.double().sum(-1) - 1).abs() < 1e-7).all()))
    with solver(path, method):
        p = CONSTRAINED[op](z, u)
    torch.testing.assert_close(p, u, atol=1e-6, rtol=0)


# ----------------------------------------------------------------------------
# u slightly negative (>= -1e-6) is read as 0
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
@PROPERTY_SETTINGS
@given(data=st.data(), method=METHOD, op=st.sampled_from(sorted(CONSTRAINED)))
def test_slightly_negative_bounds_read_as_zero(path, data, method, op):
    z = data.draw(rows(scale=(0.1, 10.0))).double()
    u = data.draw(feasible_bounds(z)).double()
    neg = torch.tensor(data.draw(st.lists(st.booleans(), min_size=u.numel(), max_size=u.numel()))).reshape(u.shape)
    noise = -data.draw(st.floats(1e-9, 1e-6))
    u_noisy = torch.where(neg & (u == 0), torch.full_like(u, noise), u)
    with solver(path, method):
        p = CONSTRAINED[op](z, u_noisy)
        q = CONSTRAINED[op](z, u)
    torch.testing.assert_close(p, q, atol=1e-12, rtol=0)
    assert (p[u == 0] == 0).all()


# ----------------------------------------------------------------------------
# masks: masked -> exactly 0; fully masked rows -> zeros, no NaN
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
@PROPERTY_SETTINGS
@given(data=st.data(), method=METHOD, op=st.sampled_from(["softmax", "sparsemax", "csoftmax", "csparsemax"]))
def test_masked_positions_get_exactly_zero(path, data, method, op):
    z = data.draw(rows(scale=(0.1, 100.0)))
    R, J = z.shape
    mask = torch.tensor(data.draw(st.lists(st.booleans(), min_size=R * J, max_size=R * J))).reshape(R, J)
    junk = data.draw(st.sampled_from([math.nan, math.inf, -math.inf, 1e30]))
    zj = torch.where(mask, z, torch.full_like(z, junk))
    with solver(path, method):
        if op in ("softmax", "sparsemax"):
            p = {"softmax": softmax, "sparsemax": sparsemax}[op](zj, mask=mask)
            u = torch.ones_like(z)
        else:
            u = data.draw(feasible_bounds(z))
            # make the rows feasible over the unmasked positions; junk where masked
            u = torch.where(mask, u + 1.0 / mask.sum(-1, keepdim=True).clamp(min=1), torch.full_like(u, junk))
            p = CONSTRAINED[op](zj, u, mask=mask)
    assert torch.isfinite(p).all()
    assert (p[~mask] == 0).all()
    live = mask.any(-1)
    if live.any():
        _check_simplex(p[live], torch.where(mask, u, 0.0)[live].nan_to_num(posinf=math.inf))
    assert (p[~live] == 0).all()


# ----------------------------------------------------------------------------
# errors: infeasible rows, NaN, shapes
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
@PROPERTY_SETTINGS
@given(data=st.data(), op=st.sampled_from(sorted(CONSTRAINED)))
def test_infeasible_rows_raise_with_count_and_shortfall(path, data, op):
    z = data.draw(rows(max_j=6))
    R, J = z.shape
    u = torch.tensor(data.draw(st.lists(st.floats(0.0, 1.0 / J), min_size=R * J, max_size=R * J))).reshape(R, J)
    bad = data.draw(st.lists(st.booleans(), min_size=R, max_size=R))
    assume(any(bad))
    short = data.draw(st.floats(1e-3, 0.9))
    for i in range(R):
        u[i] = u[i] * (1 - short) / u[i].sum().clamp(min=1e-9) if bad[i] else u[i] + 1.0
    u = u.float()
    with pytest.raises(ValueError) as e, on_path(path):
        CONSTRAINED[op](z, u)
    msg = str(e.value)
    assert f"in {sum(bad)} of {R} rows" in msg
    worst = float(re.search(r"short by up to ([0-9.e+-]+)", msg).group(1))
    expected = 1.0 - min(float(u[i].double().sum()) for i in range(R) if bad[i])
    assert abs(worst - expected) <= 1e-5 * max(1.0, expected)


@pytest.mark.parametrize("path", PATHS)
def test_feasibility_tolerance(path):
    z = torch.zeros(1, 4)
    u = torch.full((1, 4), (1 - FEASIBILITY_TOL / 2) / 4)
    with on_path(path):
        _feasibility_tolerance(z, u)


def _feasibility_tolerance(z, u):
    for fn in CONSTRAINED.values():
        torch.testing.assert_close(fn(z, u), u)  # within the tolerance: p = u
        with pytest.raises(ValueError, match="infeasible"):
            fn(z, u * 0.999)


@pytest.mark.parametrize("path", PATHS)
@PROPERTY_SETTINGS
@given(
    data=st.data(),
    op=st.sampled_from(["softmax", "sparsemax", "csoftmax", "csparsemax"]),
    where=st.sampled_from(["z", "u"]),
)
def test_nan_raises(path, data, op, where):
    z = data.draw(rows(max_j=6))
    u = torch.ones_like(z)
    i = data.draw(st.integers(0, z.shape[0] - 1))
    j = data.draw(st.integers(0, z.shape[1] - 1))
    if where == "z" or op in ("softmax", "sparsemax"):
        z[i, j] = math.nan
        pattern = "z contains NaN"
    else:
        u[i, j] = math.nan
        pattern = "u contains NaN"
    with pytest.raises(ValueError, match=pattern), on_path(path):
        if op in ("softmax", "sparsemax"):
            {"softmax": softmax, "sparsemax": sparsemax}[op](z)
        else:
            CONSTRAINED[op](z, u)


@PROPERTY_SETTINGS
@given(
    zs=st.lists(st.integers(1, 4), min_size=1, max_size=3),
    us=st.lists(st.integers(1, 4), min_size=1, max_size=3),
    op=st.sampled_from(sorted(CONSTRAINED)),
)
def test_shapes_that_do_not_broadcast_raise(zs, us, op):
    z, u = torch.zeros(zs), torch.ones(us)
    try:
        torch.broadcast_shapes(z.shape, u.shape)
    except RuntimeError:
        with pytest.raises(ValueError, match="cannot be broadcast together"):
            CONSTRAINED[op](z, u)
    else:
        out = CONSTRAINED[op](z, u)
        assert out.shape == torch.broadcast_shapes(z.shape, u.shape)


@pytest.mark.parametrize("path", PATHS)
def test_negative_bounds_and_plus_inf_scores_raise(path):
    with on_path(path):
        _negative_bounds_and_plus_inf_scores_raise()


def _negative_bounds_and_plus_inf_scores_raise():
    z = torch.randn(2, 3)
    for fn in CONSTRAINED.values():
        with pytest.raises(ValueError, match="u must be >= 0"):
            fn(z, torch.tensor([[1.0, -0.1, 1.0], [1.0, 1.0, 1.0]]))
        with pytest.raises(ValueError, match=r"z contains \+inf"):
            fn(z.index_fill(1, torch.tensor([0]), math.inf), torch.ones(2, 3))
    with pytest.raises(ValueError, match="cannot be broadcast"):
        sparsemax(z, mask=torch.ones(3, 2, dtype=torch.bool))


# ----------------------------------------------------------------------------
# u = +inf and u = 0
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
@PROPERTY_SETTINGS
@given(data=st.data(), method=METHOD, op=st.sampled_from(sorted(CONSTRAINED)))
def test_infinite_bound_is_unbounded_and_zero_bound_is_zero(path, data, method, op):
    z = data.draw(rows(scale=(0.1, 20.0))).double()
    u = data.draw(feasible_bounds(z)).double()
    big = u.clone()
    big[torch.isinf(big)] = 10.0  # any bound >= 1 is equivalent to +inf
    with solver(path, method):
        p, q = CONSTRAINED[op](z, u), CONSTRAINED[op](z, big)
    torch.testing.assert_close(p, q, atol=1e-12, rtol=0)
    assert (p[u == 0] == 0).all()
