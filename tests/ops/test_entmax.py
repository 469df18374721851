"""entmax15, entmax_bisect and centmax (issue 29, item 1).

* an independent oracle: the KKT conditions solved by enumerating the active sets (zero /
  free / capped) of small rows, each free set's threshold by a scalar root search in Python
  floats;
* float64 gradcheck for ``z``, ``u`` and ``alpha`` (per row, per head, one scalar), along
  another dim, through a mask; double backward;
* the special cases: alpha = 1 is csoftmax / softmax, alpha = 2 csparsemax / sparsemax, 1.5
  is entmax15, to 1e-6 (values and gradients);
* hypothesis properties (the bounded simplex, shift invariance, the oracle);
* extremes: fully masked and all ``-inf`` rows, ``+inf``/NaN scores, bad alpha, huge
  scores, half precision under autocast;
* the ``entmax`` package, where it is installed (the ``bench`` extra).
"""

from __future__ import annotations

import importlib
import itertools
import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from scanmt.ops import (
    CEntmax,
    Entmax15,
    EntmaxBisect,
    centmax,
    csoftmax,
    csparsemax,
    entmax15,
    entmax_bisect,
    softmax,
    sparsemax,
)

from scanmt.ops import _checks

from .cases import PROPERTY_SETTINGS
from .conftest import DEVICES

# ----------------------------------------------------------------------------
# the oracle: enumerate the active sets
# ----------------------------------------------------------------------------


def _threshold(zf, budget, b):
    """``t`` with ``sum_S (b (z - t))^(1/b) = budget`` (decreasing in ``t``), in Python floats."""
    hi = min(zf)
    lo = hi - 1.0 / b
    while sum((b * (z - lo)) ** (1.0 / b) for z in zf) < budget:
        lo -= 2.0 * (hi - lo)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if sum((b * (z - mid)) ** (1.0 / b) for z in zf) >= budget:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def oracle_centmax(z, u, alpha, mask=None):
    """float64 NumPy row: the KKT point of ``max p.z + H_alpha(p)`` s.t. simplex, ``p <= u``
    (``u = None``: no bounds), found by trying every zero/free/capped assignment."""
    z = np.asarray(z, dtype=np.float64)
    J = z.size
    ok = z > -np.inf if mask is None else (np.asarray(mask) & (z > -np.inf))
    p = np.zeros(J)
    idx = np.flatnonzero(ok)
    if idx.size == 0:
        return p
    uu = np.full(J, np.inf) if u is None else np.minimum(np.asarray(u, dtype=np.float64), 1.0)
    if u is not None and uu[idx].sum() <= 1.0:
        p[idx] = uu[idx]
        return p
    zz = z[idx] - z[idx].max()
    b = alpha - 1.0
    tol = 1e-9
    for assign in itertools.product((0, 1, 2) if u is not None else (0, 1), repeat=idx.size):
        S = [i for i, a in enumerate(assign) if a == 1]
        C = [i for i, a in enumerate(assign) if a == 2]
        budget = 1.0 - sum(uu[idx[i]] for i in C)
        if not S or budget <= 0:
            continue
        t = _threshold([zz[i] for i in S], budget, b)
        q = np.array([max(b * (zi - t), 0.0) ** (1.0 / b) for zi in zz])
        cand = np.where(np.array(assign) == 2, uu[idx], np.where(np.array(assign) == 1, q, 0.0))
        good = all(
            (a == 0 and q[i] <= tol)
            or (a == 1 and q[i] > 0 and q[i] <= uu[idx[i]] + tol)
            or (a == 2 and q[i] >= uu[idx[i]] - tol)
            for i, a in enumerate(assign)
        )
        if good:
            p[idx] = cand
            return p
    raise AssertionError("no KKT point found")


def _random_rows(R, J, seed, bounds=True):
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((R, J)) * rng.choice([0.5, 1.0, 3.0], size=(R, 1))
    u = rng.uniform(0.05, 0.7, (R, J))
    u[rng.random((R, J)) < 0.2] = np.inf
    small = np.minimum(u, 1).sum(-1) < 1.05
    u[small, 0] = np.inf
    return z, (u if bounds else None)


# ----------------------------------------------------------------------------
# long rows: the threshold among the largest entries (partial sort) against all of them
# ----------------------------------------------------------------------------


def _long_rows(dtype):
    """Rows of 3000 entries at three scales (supports of 1 to all entries), an all-``-inf`` row, rows
    with ``-inf`` and a mask."""
    g = torch.Generator().manual_seed(5)
    z = torch.randn(12, 3000, generator=g, dtype=torch.float64) * torch.tensor([0.01, 1.0, 30.0]).repeat(4)[:, None]
    z[0, 10:] = float("-inf")
    z[1] = float("-inf")
    mask = torch.rand(12, 3000, generator=g) > 0.3
    return z.to(dtype), mask


@pytest.mark.parametrize("top_k", [128, 32, 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_long_rows_partial_sort_equals_full_sort(top_k, dtype, monkeypatch):
    """entmax15's threshold from the largest entries (torch.topk, doubling where the support does not fit:
    ``top_k = 3`` doubles up to the full sort on the flat rows) is the full sort's, bit for bit (prefix sums
    add in order); entmax_bisect's Newton steps on them end within rounding of those on the whole row."""
    E = importlib.import_module("scanmt.ops.entmax")
    monkeypatch.setattr(E, "TOP_K", top_k)
    monkeypatch.setattr(E, "TOP_K_15", top_k)
    monkeypatch.setattr(E, "PARTIAL_MAX_REACH", 1.0)  # the flat rows too
    z, mask = _long_rows(dtype)
    assert z.shape[-1] >= E.PARTIAL_MIN_J
    for m in (None, mask):
        with _checks.use_method("sort"):
            full15, full_b = entmax15(z, mask=m), entmax_bisect(z, 1.3, mask=m)
        assert torch.equal(entmax15(z, mask=m), full15)
        tol = 0 if dtype == torch.float32 else 1e-15
        torch.testing.assert_close(entmax_bisect(z, 1.3, mask=m), full_b, rtol=0, atol=tol)
        assert (full15[1] == 0).all() and (full_b[1] == 0).all()


def test_partial_sort_only_where_few_entries_are_within_reach():
    """Rows of at least PARTIAL_MIN_J entries start the partial sort with the TOP_K largest unless they
    have more than PARTIAL_MAX_REACH of their entries within reach of the support (flat rows: the
    doublings would end at the whole row); those are sorted whole.  The results are the same either
    way (the tests above)."""
    E = importlib.import_module("scanmt.ops.entmax")
    g = torch.Generator().manual_seed(2)
    peaked = torch.randn(4, E.PARTIAL_MIN_J, generator=g, dtype=torch.float64) * 3
    z = torch.cat([peaked, peaked * 0.01])
    assert E._long(z) and not E._long(z[:, 1:])
    assert E._wide(z, z.amax(-1, keepdim=True) - 2.0).tolist() == [False] * 4 + [True] * 4
    with _checks.use_method("sort"):
        full15, full_b = entmax15(z), entmax_bisect(z, 1.3)
    assert torch.equal(entmax15(z), full15)
    torch.testing.assert_close(entmax_bisect(z, 1.3), full_b, rtol=0, atol=1e-15)


def test_long_rows_partial_sort_against_the_oracle(monkeypatch):
    """The partial sort with a tiny first ``TOP_K`` (so rows need several doublings) on long enough rows, against
    the active-set oracle; gradients as on the full sort."""
    E = importlib.import_module("scanmt.ops.entmax")
    monkeypatch.setattr(E, "TOP_K", 2)
    monkeypatch.setattr(E, "TOP_K_15", 2)
    monkeypatch.setattr(E, "PARTIAL_MIN_J", 8)
    monkeypatch.setattr(E, "PARTIAL_MAX_REACH", 1.0)
    z, _ = _random_rows(6, 9, seed=11, bounds=False)
    zt = torch.tensor(z, requires_grad=True)
    v = torch.randn(6, 9, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    for alpha, fn in ((1.5, entmax15), (1.5, lambda x: entmax_bisect(x, 1.5)), (1.25, lambda x: entmax_bisect(x, 1.25))):
        p = fn(zt)
        want = np.stack([oracle_centmax(row, None, alpha) for row in z])
        np.testing.assert_allclose(p.detach().numpy(), want, atol=1e-9)
        (grad,) = torch.autograd.grad((p * v).sum(), zt)
        with _checks.use_method("sort"):
            (grad_full,) = torch.autograd.grad((fn(zt) * v).sum(), zt)
        torch.testing.assert_close(grad, grad_full, rtol=0, atol=1e-12)


# ----------------------------------------------------------------------------
# Newton's method (entmax_bisect, centmax) and the float32 sort (entmax15) on larger rows
# ----------------------------------------------------------------------------


def _bisection_reference(z, u, alpha):
    """float64 ``p`` ``[R, J]`` by plain bisection, independent of scanmt.ops: 300 halvings of
    ``[min z - 1/b, max z]`` on ``phi(t) = sum_j min(u_j, [b (z_j - t)]_+^(1/b)) = 1`` (``u = None``: no
    bounds; ``-inf`` = unusable), then the free entries rescaled to their budget.  ``alpha`` ``[R, 1]``."""
    b = alpha - 1.0
    ok = z > -np.inf
    with np.errstate(invalid="ignore"):  # rows without a usable entry: NaN (the caller's business)
        x = z - np.where(ok, z, -np.inf).max(-1, keepdims=True)
    uu = np.full_like(x, np.inf) if u is None else np.where(ok, np.minimum(u, 1.0), 0.0)
    lo = np.where(ok, x, np.inf).min(-1, keepdims=True) - 1.0 / b
    hi = np.zeros_like(lo)

    def q_at(t):
        y = np.maximum(b * (x - t), 0.0)
        return np.where(y > 0, y ** (1.0 / b), 0.0)

    for _ in range(300):
        mid = 0.5 * (lo + hi)
        above = np.minimum(q_at(mid), uu).sum(-1, keepdims=True) >= 1.0
        lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
    q = q_at(lo)
    capped = q >= uu
    free = ~capped & (q > 0)
    budget = 1.0 - np.where(capped, uu, 0.0).sum(-1, keepdims=True)
    mass = np.where(free, q, 0.0).sum(-1, keepdims=True)
    return np.where(capped, uu, np.where(free, q * budget / np.maximum(mass, 1e-300), 0.0))


def _bounds(kind, z, rng):
    """``None`` or bounds feasible over the usable entries of ``z`` ``[R, J]``: ``nmt`` (a decoder step:
    ``f - beta``, some exhausted, an unbounded sink in the first column) or ``tight`` (``U(0, 3 / J)``,
    binding on most of the support)."""
    R, J = z.shape
    if kind is None:
        return None
    if kind == "nmt":
        f = rng.integers(1, 4, (R, J)).astype(np.float64)
        u = np.maximum(f - f * rng.uniform(0, 1.05, (R, J)), 0.0)
        u[:, 0] = np.inf
        return u
    u = rng.uniform(0, 3.0 / J, (R, J))
    s = np.where(z > -np.inf, u, 0.0).sum(-1, keepdims=True)
    return np.where(s < 1.05, u * 1.05 / s, u)


@pytest.mark.parametrize("bounds", [None, "nmt", "tight"])
@pytest.mark.parametrize("J", [7, 60, 400])
def test_newton_matches_plain_bisection(J, bounds):
    """entmax_bisect and centmax (Newton: monotone without bounds for alpha <= 2, safeguarded otherwise)
    against 300 halvings in float64, on rows at four scales with a per-row alpha from 1.05 to 3, some
    masked entries; alpha > 2 is ill-conditioned near the threshold (p = y^(1/b), 1/b < 1), so looser."""
    rng = np.random.default_rng(J + (0 if bounds is None else len(bounds)))
    R = 48
    z = rng.standard_normal((R, J)) * rng.choice([0.3, 1.0, 3.0, 10.0], size=(R, 1))
    z[:, 1:][rng.random((R, J - 1)) < 0.1] = -np.inf
    alpha = rng.choice([1.05, 1.2, 1.3, 1.5, 1.8, 2.0, 2.4, 3.0], size=(R, 1))
    u = _bounds(bounds, z, rng)
    want = _bisection_reference(z, u, alpha)
    a = torch.tensor(alpha)
    p = entmax_bisect(torch.tensor(z), a) if u is None else centmax(torch.tensor(z), torch.tensor(u), a)
    err = np.abs(p.numpy() - want).max(-1)
    assert err[alpha[:, 0] <= 2].max() < 1e-13
    assert err.max() < 1e-11
    # one alpha for all rows: the monotone path without bounds
    for a1 in (1.3, 1.5):
        want = _bisection_reference(z, u, np.full((R, 1), a1))
        got = entmax_bisect(torch.tensor(z), a1) if u is None else centmax(torch.tensor(z), torch.tensor(u), a1)
        np.testing.assert_allclose(got.numpy(), want, rtol=0, atol=1e-13)


def test_newton_takes_few_steps(monkeypatch):
    """The steps are Newton's: a handful of evaluations of the sums per row, not the 60 halvings of a
    bisection (a wrong step formula still converges, slowly: this catches it)."""
    E = importlib.import_module("scanmt.ops.entmax")
    rows = []

    def counting(x, *args):
        rows.append(x.shape[0])
        return sums(x, *args)

    sums = E._sums
    monkeypatch.setattr(E, "_sums", counting)
    rng = np.random.default_rng(3)
    R, J = 256, 50
    z = torch.tensor(rng.standard_normal((R, J)))
    for call, most in (
        (lambda: entmax_bisect(z, 1.3), 6),
        (lambda: entmax_bisect(z, torch.full((R, 1), 1.5, dtype=torch.float64)), 6),
        (lambda: centmax(z, torch.tensor(_bounds("nmt", z.numpy(), rng)), 1.3), 8),
    ):
        rows.clear()
        call()
        assert sum(rows) / R <= most, rows  # evaluations per row (done rows leave the working set)


@pytest.mark.parametrize("partial", [False, True])
def test_entmax15_float32_masked_and_unvalidated(partial, monkeypatch):
    """entmax15 in float32 (its compute dtype) within 1e-6 of the float64 reference, with masked
    entries, ``-inf`` and fully masked rows, validated or not (the row maxima's finite sum decides
    whether masked rows need guarding), on the sort and on the partial sort."""
    E = importlib.import_module("scanmt.ops.entmax")
    if partial:
        monkeypatch.setattr(E, "PARTIAL_MIN_J", 8)
        monkeypatch.setattr(E, "TOP_K_15", 4)
        monkeypatch.setattr(E, "PARTIAL_MAX_REACH", 1.0)
    rng = np.random.default_rng(4)
    R, J = 24, 40
    z = rng.standard_normal((R, J)) * rng.choice([0.1, 1.0, 5.0], size=(R, 1))
    z[rng.random((R, J)) < 0.2] = -np.inf
    z[:, 0] = 1.0
    z[3] = -np.inf
    mask = rng.random((R, J)) < 0.9
    mask[:, 0] = True
    mask[5] = False
    want = _bisection_reference(np.where(mask, z, -np.inf), None, np.full((R, 1), 1.5))
    want[[3, 5]] = 0.0
    for validate in (True, False):
        p = entmax15(torch.tensor(z, dtype=torch.float32), mask=torch.tensor(mask), validate=validate)
        assert p.dtype == torch.float32
        np.testing.assert_allclose(p.double().numpy(), want, rtol=0, atol=1e-6)
    # no mask, no -inf: the fast path (no guarding)
    zf = rng.standard_normal((R, J))
    want = _bisection_reference(zf, None, np.full((R, 1), 1.5))
    np.testing.assert_allclose(entmax15(torch.tensor(zf, dtype=torch.float32)).double().numpy(), want, atol=1e-6)
    np.testing.assert_allclose(entmax15(torch.tensor(zf)).numpy(), want, atol=1e-12)


# ----------------------------------------------------------------------------
# the oracle
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("alpha", [1.2, 1.5, 2.0, 2.7])
def test_centmax_matches_oracle(alpha, device):
    z, u = _random_rows(12, 5, seed=int(alpha * 10))
    a = torch.tensor(alpha, dtype=torch.float64, device=device)  # a tensor: the bisection, also at 2
    p = centmax(torch.tensor(z, device=device), torch.tensor(u, device=device), a).cpu().numpy()
    for r in range(z.shape[0]):
        np.testing.assert_allclose(p[r], oracle_centmax(z[r], u[r], alpha), atol=1e-7)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("alpha", [1.1, 1.5, 3.0])
def test_entmax_matches_oracle(alpha, device):
    z, _ = _random_rows(12, 5, seed=7, bounds=False)
    zt = torch.tensor(z, device=device)
    p = entmax_bisect(zt, alpha).cpu().numpy()
    for r in range(z.shape[0]):
        np.testing.assert_allclose(p[r], oracle_centmax(z[r], None, alpha), atol=1e-7)
    if alpha == 1.5:
        np.testing.assert_allclose(entmax15(zt).cpu().numpy(), p, atol=1e-12)


def test_oracle_with_mask_and_per_row_alpha():
    z, u = _random_rows(6, 5, seed=3)
    mask = np.random.default_rng(3).random((6, 5)) < 0.8
    mask[:, 0] = True
    u[:, 0] = np.inf
    alphas = np.array([1.3, 1.5, 1.8, 2.0, 2.5, 4.0])
    p = centmax(torch.tensor(z), torch.tensor(u), torch.tensor(alphas)[:, None], mask=torch.tensor(mask)).numpy()
    for r in range(6):
        np.testing.assert_allclose(p[r], oracle_centmax(z[r], u[r], alphas[r], mask[r]), atol=1e-7)


# ----------------------------------------------------------------------------
# gradients
# ----------------------------------------------------------------------------


def _away_rows(R, J, seed, margin=1e-3):
    """float64 rows whose solution is at least ``margin`` away from every kink (gradcheck)."""
    rng = np.random.default_rng(seed)
    zs, us = [], []
    while len(zs) < R:
        z, u = _random_rows(1, J, int(rng.integers(1 << 30)))
        q = oracle_centmax(z[0], u[0], 1.6)
        uu = np.minimum(u[0], 1.0)
        far = np.all((q < margin) | ((q > margin) & (q < uu - margin)) | (np.abs(q - uu) < 1e-12))
        # zero entries must be clearly below the threshold: perturbing alpha must not wake them
        if far and ((q > 0) & (q < uu)).sum() >= 2:
            zs.append(z[0])
            us.append(np.minimum(u[0], 5.0))
    return torch.tensor(np.stack(zs)), torch.tensor(np.stack(us))


@pytest.mark.parametrize("device", DEVICES)
def test_gradcheck_centmax_z_u_alpha(device):
    z, u = _away_rows(5, 6, seed=1)
    z, u = z.to(device).requires_grad_(), u.to(device).requires_grad_()
    a = torch.full((5, 1), 1.6, dtype=torch.float64, device=device, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, y, c: centmax(x, y, c), (z, u, a), eps=1e-7, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("alpha0", [1.25, 1.6, 2.0, 3.0])
def test_gradcheck_entmax_bisect_z_alpha(alpha0, device):
    z = torch.randn(4, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(5)).to(device)
    z.requires_grad_()
    a = torch.full((4, 1), alpha0, dtype=torch.float64, device=device, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, c: entmax_bisect(x, c), (z, a), eps=1e-7, atol=1e-5)


def test_gradcheck_entmax15_and_double_backward():
    z = torch.randn(4, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(6)).requires_grad_()
    a = torch.full((4, 1), 1.4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: entmax15(x), (z,))
    assert torch.autograd.gradgradcheck(lambda x: entmax15(x), (z,))
    assert torch.autograd.gradgradcheck(lambda x, c: entmax_bisect(x, c), (z, a), atol=1e-5)


def test_gradcheck_per_head_alpha_other_dim_masked():
    """alpha per head ``[H, 1]`` of scores ``[B, H, J]``; along dim 1 with a mask."""
    g = torch.Generator().manual_seed(8)
    z = torch.randn(2, 3, 5, dtype=torch.float64, generator=g).requires_grad_()
    a = torch.tensor([[1.3], [1.7], [2.4]], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, c: entmax_bisect(x, c), (z, a), eps=1e-7, atol=1e-5)
    mask = torch.ones(2, 3, 5, dtype=torch.bool)
    mask[0, 1, 2] = False
    zt = z.detach().transpose(1, 2).contiguous().requires_grad_()  # [B, J, H]: normalise along dim 1
    mt = mask.transpose(1, 2)
    at = torch.tensor([[[1.5, 1.8, 2.2]]], dtype=torch.float64, requires_grad=True)
    ut = torch.full_like(zt, 0.45).requires_grad_()
    assert torch.autograd.gradcheck(lambda x, y, c: centmax(x, y, c, dim=1, mask=mt), (zt, ut, at), eps=1e-7,
                                    atol=1e-5)
    p = centmax(zt, ut, at, dim=1, mask=mt)
    assert p[0, 2, 1] == 0
    torch.testing.assert_close(p.sum(1), torch.ones(2, 3, dtype=torch.float64))


def test_alpha_gradient_continuous_at_one():
    """The alpha = 1 rows use the limit of dp/dalpha; it agrees with alpha slightly above 1."""
    z, u = _random_rows(4, 6, seed=9)
    z, u = torch.tensor(z), torch.tensor(u)
    v = torch.randn(4, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(9))
    grads = []
    for a0 in (1.0, 1.0 + 1e-5):
        a = torch.full((4, 1), a0, dtype=torch.float64, requires_grad=True)
        (centmax(z, u, a) * v).sum().backward()
        grads.append(a.grad)
    torch.testing.assert_close(grads[0], grads[1], atol=1e-4, rtol=1e-4)


# ----------------------------------------------------------------------------
# the special cases
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
def test_special_cases_equal_existing_ops(device):
    z, u = _random_rows(16, 9, seed=11)
    z, u = torch.tensor(z, device=device), torch.tensor(u, device=device)
    one = torch.ones((), dtype=torch.float64, device=device)
    # alpha as a number: delegated; as a tensor: solved here (alpha = 1 as csoftmax, 2 by bisection)
    for a in (1.0, one):
        torch.testing.assert_close(centmax(z, u, a), csoftmax(z, u), atol=1e-6, rtol=0)
        torch.testing.assert_close(entmax_bisect(z, a), softmax(z), atol=1e-6, rtol=0)
    for a in (2.0, 2 * one):
        torch.testing.assert_close(centmax(z, u, a), csparsemax(z, u), atol=1e-6, rtol=0)
        torch.testing.assert_close(entmax_bisect(z, a), sparsemax(z), atol=1e-6, rtol=0)
    torch.testing.assert_close(entmax_bisect(z, 1.5), entmax15(z), atol=1e-6, rtol=0)
    torch.testing.assert_close(centmax(z, torch.full_like(u, float("inf")), 1.5), entmax15(z), atol=1e-6, rtol=0)


def test_special_case_gradients_equal_existing_ops():
    z, u = _away_rows(6, 7, seed=12)
    v = torch.randn(6, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(12))
    for a, ref in ((torch.tensor(1.0, dtype=torch.float64), csoftmax), (torch.tensor(2.0, dtype=torch.float64),
                                                                          csparsemax)):
        zz, uu = z.clone().requires_grad_(), u.clone().requires_grad_()
        gz, gu = torch.autograd.grad((centmax(zz, uu, a) * v).sum(), (zz, uu))
        rz, ru = torch.autograd.grad((ref(zz, uu) * v).sum(), (zz, uu))
        torch.testing.assert_close(gz, rz, atol=1e-6, rtol=0)
        torch.testing.assert_close(gu, ru, atol=1e-6, rtol=0)


# ----------------------------------------------------------------------------
# properties
# ----------------------------------------------------------------------------


@st.composite
def rows(draw):
    R, J = draw(st.integers(1, 3)), draw(st.integers(1, 5))
    z = np.array(draw(st.lists(st.floats(-5, 5), min_size=R * J, max_size=R * J))).reshape(R, J)
    u = np.array(draw(st.lists(st.sampled_from([0.0, 0.1, 0.3, 0.5, 0.9, np.inf]), min_size=R * J,
                               max_size=R * J))).reshape(R, J)
    u[:, draw(st.integers(0, J - 1))] = np.inf  # feasible
    alpha = draw(st.sampled_from([1.05, 1.3, 1.5, 2.0, 2.5, 5.0]))
    return z, u, alpha


@PROPERTY_SETTINGS
@given(rows(), st.floats(-100, 100))
def test_property_bounded_simplex_shift_invariant_oracle(case, c):
    z, u, alpha = case
    zt, ut = torch.tensor(z), torch.tensor(u)
    a = torch.tensor(alpha, dtype=torch.float64)
    p = centmax(zt, ut, a)
    assert torch.isfinite(p).all()
    assert (p >= 0).all() and (p <= ut + 1e-12).all()
    torch.testing.assert_close(p.sum(-1), torch.ones(z.shape[0], dtype=torch.float64))
    torch.testing.assert_close(centmax(zt + c, ut, a), p, atol=1e-8, rtol=0)
    for r in range(z.shape[0]):
        np.testing.assert_allclose(p[r].numpy(), oracle_centmax(z[r], u[r], alpha), atol=1e-7)
    q = entmax_bisect(zt, a)
    torch.testing.assert_close(q.sum(-1), torch.ones(z.shape[0], dtype=torch.float64))
    if alpha == 1.5:
        torch.testing.assert_close(entmax15(zt), q, atol=1e-9, rtol=0)


# ----------------------------------------------------------------------------
# extremes and errors
# ----------------------------------------------------------------------------


OPS = {
    "entmax15": lambda z, u, m: entmax15(z, mask=m),
    "entmax_bisect": lambda z, u, m: entmax_bisect(z, torch.full(z.shape[:-1] + (1,), 1.7, dtype=z.dtype), mask=m),
    "centmax": lambda z, u, m: centmax(z, u, torch.full(z.shape[:-1] + (1,), 1.7, dtype=z.dtype), mask=m),
}


@pytest.mark.parametrize("op", sorted(OPS))
def test_fully_masked_and_all_minus_inf_rows_give_zeros(op):
    z = torch.tensor([[1.0, 2.0, 3.0], [-np.inf] * 3, [0.5, np.nan, 1.0]], dtype=torch.float64, requires_grad=True)
    u = torch.tensor([[0.5, 0.5, 0.5], [0.2, 0.2, 0.2], [np.nan, 0.3, 1.0]], dtype=torch.float64,
                     requires_grad=True)
    mask = torch.tensor([[True, True, True], [True, True, True], [False, False, False]])
    p = OPS[op](z, u, mask)
    assert torch.isfinite(p).all()
    assert (p[1:] == 0).all()
    torch.testing.assert_close(p[0].sum(), torch.tensor(1.0, dtype=torch.float64))
    p.sum().backward()
    assert torch.isfinite(z.grad).all() and (z.grad[1:] == 0).all()
    if op == "centmax":
        assert torch.isfinite(u.grad).all() and (u.grad[1:] == 0).all()


@pytest.mark.parametrize("op", sorted(OPS))
def test_plus_inf_and_nan_raise(op):
    u = torch.ones(1, 3)
    for bad in (float("inf"), float("nan")):
        with pytest.raises(ValueError, match="z contains"):
            OPS[op](torch.tensor([[0.0, bad, 1.0]]), u, None)


def test_bad_alpha_raises():
    z, u = torch.randn(2, 4), torch.ones(2, 4)
    for bad in (0.5, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="alpha must be finite and >= 1"):
            entmax_bisect(z, torch.tensor([[1.5], [bad]]))
        with pytest.raises(ValueError, match="alpha must be finite and >= 1"):
            centmax(z, u, bad)
    with pytest.raises(ValueError, match="alpha of shape"):
        entmax_bisect(z, torch.full((2, 4), 1.5))
    with pytest.raises(TypeError, match="alpha must be"):
        entmax_bisect(z, "1.5")
    with pytest.raises(TypeError, match="u .the upper bounds. is required"):
        centmax(z, None)
    with pytest.raises(ValueError, match="infeasible"):
        centmax(z, torch.full((2, 4), 0.1), 1.5)


def test_tight_bounds_give_u():
    u = torch.tensor([[0.25, 0.25, 0.5, 0.0]], dtype=torch.float64)
    z = torch.tensor([[3.0, -1.0, 0.0, 2.0]], dtype=torch.float64)
    torch.testing.assert_close(centmax(z, u, 1.5), u)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("op", sorted(OPS))
def test_huge_scores_give_points_of_the_simplex(op, dtype):
    z = torch.tensor([[1e30, 0.3, 0.0, -1e30], [1e8 + 1.2, 1e8 + 0.8, 1e8 - 0.2, 1e8], [-1e30, -1e30, 5.0, 0.0]],
                     dtype=dtype)
    u = torch.tensor([[0.5, 1.0, 1.0, 1.0], [0.3, 0.3, 0.3, 0.3], [1.0, 1.0, 0.6, 1.0]], dtype=dtype)
    p = OPS[op](z, u, None).double()
    assert torch.isfinite(p).all() and (p >= 0).all()
    torch.testing.assert_close(p.sum(-1), torch.ones(3, dtype=torch.float64), atol=1e-5, rtol=0)
    if op == "centmax":
        assert (p <= u.double() + 1e-6).all()
        assert float(p[0, 0]) == pytest.approx(0.5)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("op", sorted(OPS))
def test_half_precision_under_autocast(op, dtype):
    z = torch.randn(3, 6).to(dtype).requires_grad_()
    u = torch.full((3, 6), 0.4, dtype=dtype)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        p = OPS[op](z, u, None)
    assert p.dtype == dtype and torch.isfinite(p).all()
    ref = OPS[op](z.detach().float(), u.float(), None)
    torch.testing.assert_close(p.float(), ref, atol=1e-2, rtol=0)
    p.float().pow(2).sum().backward()
    assert z.grad.dtype == dtype and torch.isfinite(z.grad.float()).all()


def test_modules_and_empty_input():
    z = torch.randn(2, 5)
    torch.testing.assert_close(Entmax15()(z), entmax15(z))
    torch.testing.assert_close(EntmaxBisect(1.3)(z), entmax_bisect(z, 1.3))
    a = torch.tensor([[1.2], [2.2]], requires_grad=True)
    torch.testing.assert_close(CEntmax()(z, torch.ones(2, 5), alpha=a), centmax(z, 1.0, a))
    e = torch.zeros(0, 3, requires_grad=True)
    assert entmax_bisect(e, torch.tensor(1.5, requires_grad=True)).shape == (0, 3)
    assert centmax(e, 1.0, 1.5).shape == (0, 3)


# ----------------------------------------------------------------------------
# the entmax package (optional)
# ----------------------------------------------------------------------------


def _entmax_package():
    try:
        import entmax  # noqa: F401
    except ImportError:
        pytest.skip("the entmax package is not installed (pip install entmax, or the 'bench' extra): "
                    "comparison with it skipped")
    return entmax


def test_agrees_with_entmax_package():
    ent = _entmax_package()
    g = torch.Generator().manual_seed(13)
    z = torch.randn(32, 17, dtype=torch.float64, generator=g) * 3
    torch.testing.assert_close(entmax15(z), ent.entmax15(z, dim=-1), atol=1e-10, rtol=0)
    for alpha in (1.25, 1.5, 2.5):
        torch.testing.assert_close(entmax_bisect(z, alpha), ent.entmax_bisect(z, alpha, dim=-1, n_iter=80),
                                   atol=1e-8, rtol=0)
    a = torch.full((32, 1), 1.4, dtype=torch.float64, requires_grad=True)
    a2 = a.detach().clone().requires_grad_()
    v = torch.randn(32, 17, dtype=torch.float64, generator=g)
    (entmax_bisect(z, a) * v).sum().backward()
    (ent.entmax_bisect(z, a2, dim=-1, n_iter=80) * v).sum().backward()
    torch.testing.assert_close(a.grad, a2.grad, atol=1e-6, rtol=1e-6)
