"""Gradients: gradcheck in float64, finite differences for u, the oracle's closed forms."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from . import oracle
from .cases import KINDS, make_case, margin_csoftmax, margin_csparsemax
from .conftest import DEVICES, PATHS, on_path
from scanmt.ops import _checks, csoftmax, csparsemax, softmax, sparsemax

METHODS = ("native", "dense", "iter", "sort")


def _rows_away_from_breakpoints(op: str, n: int, J: int, seed: int, margin: float = 1e-3):
    """float64 rows whose solution is at least ``margin`` away from every kink."""
    rng = np.random.default_rng(seed)
    zs, us = [], []
    while len(zs) < n:
        z = rng.standard_normal(J) * rng.choice([0.5, 1.0, 3.0])
        u = rng.uniform(0.05, 0.6, J)
        u[rng.random(J) < 0.2] = np.inf
        if np.minimum(u, 1).sum() <= 1.05:
            continue
        if op == "csparsemax":
            p = oracle.csparsemax(z, u)
            ok = margin_csparsemax(z, u, p) > margin and ((p > 0) & (p < u)).any()
        elif op == "csoftmax":
            p = oracle.csoftmax(z, u)
            ok = margin_csoftmax(z, u, p) > margin and (p < u).any()
        else:
            p = oracle.sparsemax(z)
            s = np.sort(z)[::-1]
            tau = (np.cumsum(s) - 1) / np.arange(1, J + 1)
            tau = tau[(p > 0).sum() - 1]
            ok = np.abs(z - tau).min() > margin
        if ok:
            zs.append(z)
            us.append(u)
    return torch.tensor(np.stack(zs)), torch.tensor(np.stack(us))


# ----------------------------------------------------------------------------
# gradcheck (float64, away from breakpoints)
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("op", ["csparsemax", "csoftmax"])
def test_gradcheck_constrained(op, method, device):
    fn = {"csparsemax": csparsemax, "csoftmax": csoftmax}[op]
    z, u = _rows_away_from_breakpoints(op, 6, 7, seed=1)
    z = z.to(device).requires_grad_()
    u = u.clamp(max=5.0).to(device).requires_grad_()  # gradcheck perturbs u: keep it finite
    with _checks.use_method(method):
        assert torch.autograd.gradcheck(lambda a, b: fn(a, b), (z, u), eps=1e-6, atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("method", ["native", "iter", "sort"])
def test_gradcheck_sparsemax_and_softmax(method, device):
    z, _ = _rows_away_from_breakpoints("sparsemax", 6, 7, seed=2)
    z = z.to(device).requires_grad_()
    with _checks.use_method(method):
        assert torch.autograd.gradcheck(lambda a: sparsemax(a), (z,), eps=1e-6, atol=1e-6)
    assert torch.autograd.gradcheck(lambda a: softmax(a), (z,), eps=1e-6, atol=1e-6)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("op", ["csparsemax", "csoftmax", "sparsemax", "softmax"])
def test_gradcheck_masked_other_dim(op, path):
    """gradcheck through a mask, along dim 0, with broadcast u."""
    z, u = _rows_away_from_breakpoints("csparsemax" if op.startswith("c") else "sparsemax", 5, 6, seed=3)
    z = z.t().contiguous().requires_grad_()  # [J, rows], normalise along dim 0
    mask = torch.ones_like(z, dtype=torch.bool)
    mask[0, 1] = False
    if op == "sparsemax":
        f = lambda a: sparsemax(a, dim=0, mask=mask)  # noqa: E731
    elif op == "softmax":
        f = lambda a: softmax(a, dim=0, mask=mask)  # noqa: E731
    else:
        fn = {"csparsemax": csparsemax, "csoftmax": csoftmax}[op]
        ub = torch.full((z.shape[0], 1), 0.45, dtype=torch.float64)  # broadcast over rows
        f = lambda a: fn(a, ub, dim=0, mask=mask)  # noqa: E731
    with on_path(path):
        assert torch.autograd.gradcheck(f, (z,), eps=1e-6, atol=1e-6)


# ----------------------------------------------------------------------------
# the u-gradient against finite differences of the oracle
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("op", ["csparsemax", "csoftmax"])
def test_u_gradient_matches_oracle_finite_differences(op, path):
    """dL/du from the closed form == central differences of the float64 oracle."""
    fn = {"csparsemax": csparsemax, "csoftmax": csoftmax}[op]
    ofn = getattr(oracle, op)
    z, u = _rows_away_from_breakpoints(op, 20, 8, seed=4, margin=1e-2)
    u = u.clamp(max=3.0)
    g = torch.randn_like(z)
    uu = u.clone().requires_grad_()
    with on_path(path):
        (fn(z, uu) * g).sum().backward()
    h = 1e-6
    zn, un, gn = z.numpy(), u.numpy(), g.numpy()
    fd = np.zeros_like(un)
    for i in range(un.shape[0]):
        for j in range(un.shape[1]):
            up, dn = un[i].copy(), un[i].copy()
            up[j] += h
            dn[j] -= h
            fd[i, j] = gn[i] @ (ofn(zn[i], up) - ofn(zn[i], dn)) / (2 * h)
    np.testing.assert_allclose(uu.grad.numpy(), fd, atol=1e-6)
    assert np.abs(fd).max() > 0.1  # the test exercises binding bounds


# ----------------------------------------------------------------------------
# vector-Jacobian products against the oracle's closed forms, many rows
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("op", ["csparsemax", "csoftmax", "sparsemax"])
def test_vjp_matches_oracle(op, method, device):
    for kind in KINDS:
        z, u, mask = make_case(kind, 200, 12, seed=50 + KINDS.index(kind))
        g = np.random.default_rng(7).standard_normal(z.shape)
        zt = torch.tensor(z, device=device, requires_grad=True)
        ut = torch.tensor(u, device=device, requires_grad=True)
        mt = torch.tensor(mask, device=device)
        with _checks.use_method(method):
            if op == "sparsemax":
                p = sparsemax(zt, mask=mt)
            else:
                p = {"csparsemax": csparsemax, "csoftmax": csoftmax}[op](zt, ut, mask=mt)
        p.backward(torch.tensor(g, device=device))
        pn = p.detach().cpu().numpy()
        zgrad, ugrad = zt.grad.cpu(), ut.grad.cpu() if ut.grad is not None else None
        for i in range(z.shape[0]):
            ok = mask[i] & (z[i] > -np.inf)
            if op == "sparsemax":
                dz = oracle.sparsemax_vjp(pn[i], g[i])
                du = np.zeros_like(dz)
            else:
                if op == "csparsemax":
                    # only rows with a unique threshold (a free entry away from its kinks)
                    free = ok & (pn[i] > 1e-9) & (pn[i] < np.where(ok, u[i], 0) - 1e-9)
                    if not free.any() or margin_csparsemax(z[i][ok], u[i][ok], pn[i][ok]) < 1e-7:
                        continue
                elif margin_csoftmax(z[i][ok], np.maximum(u[i][ok], 0), pn[i][ok]) < 1e-7:
                    continue
                dz, du = getattr(oracle, op + "_vjp")(z[i], u[i], pn[i], g[i], mask[i])
            msg = f"{op}/{method}/{kind} row {i}"
            np.testing.assert_allclose(zgrad[i].numpy(), dz, atol=1e-9, err_msg=msg)
            if op != "sparsemax":
                np.testing.assert_allclose(np.where(ok, ugrad[i].numpy(), 0), du, atol=1e-9, err_msg=msg)
                assert not ugrad[i][~torch.tensor(ok)].any(), msg


# ----------------------------------------------------------------------------
# masks and degenerate rows
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("op", ["softmax", "sparsemax", "csoftmax", "csparsemax"])
def test_masked_and_fully_masked_rows_have_zero_gradient(op, method):
    z = torch.randn(4, 6, dtype=torch.float64, requires_grad=True)
    u = torch.full((4, 6), 0.4, dtype=torch.float64, requires_grad=True)
    mask = torch.ones(4, 6, dtype=torch.bool)
    mask[0, :3] = False
    mask[1] = False  # fully masked
    with _checks.use_method(method):
        if op in ("softmax", "sparsemax"):
            p = {"softmax": softmax, "sparsemax": sparsemax}[op](z, mask=mask)
        else:
            p = {"csoftmax": csoftmax, "csparsemax": csparsemax}[op](z, u, mask=mask)
    assert torch.equal(p[~mask], torch.zeros_like(p[~mask]))
    assert torch.isfinite(p).all()
    p.backward(torch.randn_like(p))
    assert torch.equal(z.grad[~mask], torch.zeros_like(z.grad[~mask]))
    assert torch.isfinite(z.grad).all()
    if op.startswith("c"):
        assert torch.equal(u.grad[~mask], torch.zeros_like(u.grad[~mask]))
        assert torch.isfinite(u.grad).all()


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("op", ["csoftmax", "csparsemax"])
def test_tight_bounds_give_identity_gradient_in_u(op, path):
    """sum(u) == 1: p == u, dz == 0 and du == dp (m = 0 by convention)."""
    fn = {"csoftmax": csoftmax, "csparsemax": csparsemax}[op]
    z = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    # dyadic bounds sum to exactly 1 (a rounding error above 1 would make the row a
    # regular one with an almost empty free set, and a different gradient)
    u = torch.tensor([[0.5, 0.25, 0.125, 0.125, 0.0], [0.0625] * 4 + [0.75], [0.2] * 5], dtype=torch.float64)
    u[2] = torch.tensor([0.25, 0.25, 0.25, 0.125, 0.125], dtype=torch.float64)
    u.requires_grad_()
    with on_path(path):
        p = fn(z, u)
        torch.testing.assert_close(p, u.detach(), atol=1e-12, rtol=0)
        g = torch.randn_like(p)
        p.backward(g)
    assert torch.equal(z.grad, torch.zeros_like(z.grad))
    torch.testing.assert_close(u.grad, g)


@pytest.mark.parametrize("path", PATHS)
def test_no_gradient_through_unbounded_entries(path):
    """u = +inf (a <sink>) never binds: its gradient is 0 and finite."""
    z = torch.randn(8, 10, dtype=torch.float64, requires_grad=True)
    u = torch.rand(8, 10, dtype=torch.float64) * 0.2
    u[:, -1] = float("inf")
    u.requires_grad_()
    for fn in (csoftmax, csparsemax):
        z.grad = u.grad = None
        with on_path(path):
            fn(z, u).backward(torch.randn(8, 10, dtype=torch.float64))
        assert torch.isfinite(u.grad).all() and torch.isfinite(z.grad).all()
        assert torch.equal(u.grad[:, -1], torch.zeros(8, dtype=torch.float64))


# ----------------------------------------------------------------------------
# double backward (issue 27, item 10): correct, never silently first-order
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("op", ["softmax", "sparsemax", "csoftmax", "csparsemax"])
def test_double_backward_is_correct(op, path):
    """gradgradcheck in float64 (z and u), and a gradient penalty has its second-order term:
    before the fix the gradient had no graph (``create_graph=True`` was ignored)."""
    z, u = _rows_away_from_breakpoints("csparsemax" if op == "sparsemax" else op, 2, 5, seed=3)
    fns = {"softmax": softmax, "sparsemax": sparsemax}

    def transform(x: torch.Tensor, b: torch.Tensor = u) -> torch.Tensor:
        return fns[op](x) if op in fns else {"csoftmax": csoftmax, "csparsemax": csparsemax}[op](x, b)

    z.requires_grad_(True)
    u = u.clamp(max=5.0).requires_grad_(op in ("csoftmax", "csparsemax"))
    weights = torch.arange(5.0, dtype=z.dtype)
    with on_path(path):
        inputs = (z, u) if u.requires_grad else (z,)
        assert torch.autograd.gradgradcheck(transform, inputs)
        (g,) = torch.autograd.grad((transform(z, u) * weights).sum(), z, create_graph=True)
        assert g.requires_grad
        (h,) = torch.autograd.grad(g.pow(2).sum(), z)
    # the penalty's gradient against finite differences of the first-order gradient
    eps, dz = 1e-6, torch.randn_like(z)
    with on_path(path):
        def penalty(x: torch.Tensor) -> float:
            x = x.detach().requires_grad_(True)
            (gx,) = torch.autograd.grad((transform(x, u.detach()) * weights).sum(), x)
            return float(gx.pow(2).sum())

        fd = (penalty(z + eps * dz) - penalty(z - eps * dz)) / (2 * eps)
    assert abs(float((h * dz).sum()) - fd) < 1e-5 * max(1.0, abs(fd))
