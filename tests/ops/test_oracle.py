"""The ops against the float64 NumPy oracle on thousands of random rows."""

from __future__ import annotations

import functools
import sys

import numpy as np
import pytest
import torch

from . import oracle
from .cases import KINDS, make_case
from .conftest import DEVICES
from scanmt.ops import FEASIBILITY_TOL, NEGATIVE_TOL, _checks, _native, csoftmax, csparsemax, sparsemax

SHAPES = ((250, 8), (250, 40), (24, 600))  # 524 rows per kind, 3144 per op
METHODS = ("native", "dense", "iter", "sort")
DTYPES = (torch.float32, torch.float64)
ATOL = {torch.float32: 3e-6, torch.float64: 1e-9}  # the oracle itself loses ~1e-10 at |z| = 1e4


@functools.lru_cache(maxsize=None)
def _case(kind: str, shape_i: int, dtype: torch.dtype):
    R, J = SHAPES[shape_i]
    z, u, mask = make_case(kind, R, J, seed=1000 * shape_i + KINDS.index(kind))
    # round to the tested dtype first, so that the oracle sees the same numbers
    z = torch.as_tensor(z).to(dtype).double().numpy()
    u = torch.as_tensor(u).to(dtype).double().numpy()
    return z, u, mask


@functools.lru_cache(maxsize=None)
def _expected(op: str, kind: str, shape_i: int, dtype: torch.dtype) -> np.ndarray:
    z, u, mask = _case(kind, shape_i, dtype)
    if op == "sparsemax":
        return oracle.rows(oracle.sparsemax, z, mask)
    return oracle.rows(getattr(oracle, op), z, u, mask)


def _run(op: str, z, u, mask, dtype, device: str = "cpu"):
    zt, ut = torch.as_tensor(z, dtype=dtype, device=device), torch.as_tensor(u, dtype=dtype, device=device)
    mt = torch.as_tensor(mask, device=device)
    if op == "sparsemax":
        return sparsemax(zt, mask=mt)
    return {"csparsemax": csparsemax, "csoftmax": csoftmax}[op](zt, ut, mask=mt)


# ----------------------------------------------------------------------------
# the oracle itself
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_oracle_csparsemax_satisfies_kkt(kind):
    z, u, mask = _case(kind, 0, torch.float64)
    p = _expected("csparsemax", kind, 0, torch.float64)
    worst = max(oracle.kkt_violation_csparsemax(z[i], u[i], p[i], mask[i]) for i in range(len(z)))
    assert worst < 1e-9


def test_oracle_special_cases():
    z = np.array([1.2, 0.8, -0.2])
    np.testing.assert_allclose(oracle.sparsemax(z), [0.7, 0.3, 0.0])
    np.testing.assert_allclose(oracle.csparsemax(z, np.full(3, np.inf)), [0.7, 0.3, 0.0])
    np.testing.assert_allclose(oracle.csparsemax(z, np.array([0.5, 1.0, 1.0])), [0.5, 0.5, 0.0])
    np.testing.assert_allclose(oracle.csparsemax(z, np.array([0.2, 0.3, 0.5])), [0.2, 0.3, 0.5])
    sm = np.exp(z) / np.exp(z).sum()
    np.testing.assert_allclose(oracle.csoftmax(z, np.ones(3)), sm)
    # capping the first entry at 0.3 hands its mass to the others in proportion
    q = oracle.csoftmax(z, np.array([0.3, 1.0, 1.0]))
    np.testing.assert_allclose(q, [0.3, 0.7 * sm[1] / (sm[1] + sm[2]), 0.7 * sm[2] / (sm[1] + sm[2])])
    # the breakpoint search agrees with a brute-force bisection
    rng = np.random.default_rng(0)
    for _ in range(50):
        zz = rng.standard_normal(9)
        uu = rng.uniform(0, 0.4, 9)
        lo, hi = zz.min() - 1, zz.max()
        for _ in range(200):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if np.clip(zz - mid, 0, uu).sum() > 1 else (lo, mid)
        np.testing.assert_allclose(oracle.csparsemax(zz, uu), np.clip(zz - lo, 0, uu), atol=1e-12)


# ----------------------------------------------------------------------------
# ops vs oracle
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("op", ("sparsemax", "csparsemax", "csoftmax"))
def test_matches_oracle(op, method, dtype, device):
    for kind in KINDS:
        for shape_i in range(len(SHAPES)):
            z, u, mask = _case(kind, shape_i, dtype)
            expected = _expected(op, kind, shape_i, dtype)
            with _checks.use_method(method):
                p = _run(op, z, u, mask, dtype, device)
            assert p.dtype == dtype and p.device.type == device
            got = p.double().cpu().numpy()
            err = np.abs(got - expected).max()
            assert err <= ATOL[dtype], f"{op}/{method}/{kind}/{SHAPES[shape_i]}: max error {err:.3g}"
            assert not (got[~mask] != 0).any(), "masked positions must be exactly 0"


@pytest.mark.parametrize("op", ("sparsemax", "csparsemax", "csoftmax"))
def test_iteration_fallbacks_are_exact(op, monkeypatch):
    """Rows an iteration has not settled within its step limit are finished by the sort (PyTorch path)."""
    module = sys.modules[f"scanmt.ops.{op}"]
    limit = {"sparsemax": "MAX_NEWTON_STEPS", "csparsemax": "MAX_STEPS", "csoftmax": "MAX_ROUNDS"}[op]
    monkeypatch.setattr(module, limit, 1)
    for kind in ("random", "tight", "nmt"):
        z, u, mask = _case(kind, 1, torch.float64)
        with _checks.use_method("iter"):
            p = _run(op, z, u, mask, torch.float64)
        err = np.abs(p.numpy() - _expected(op, kind, 1, torch.float64)).max()
        assert err <= ATOL[torch.float64], f"{op}/{kind}: {err:.3g}"


@pytest.mark.parametrize("max_iter", (0, 1, 2))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", ("sparsemax", "csparsemax", "csoftmax"))
@pytest.mark.parametrize("path", ("native",))
def test_native_sort_fallbacks_are_exact(path, op, dtype, max_iter):
    """The native kernels finish rows not settled within their iteration limit by
    sorting; a lowered limit sends (nearly) every row there."""
    kernels = _native.get()
    for kind in KINDS:
        for shape_i in range(len(SHAPES)):
            z, u, mask = _case(kind, shape_i, dtype)
            zt, ut, mt = torch.as_tensor(z, dtype=dtype), torch.as_tensor(u, dtype=dtype), torch.as_tensor(mask)
            if op == "sparsemax":
                p, _ = kernels.sparsemax_forward(zt, mt, max_iter=max_iter)
            else:
                fwd = getattr(kernels, op + "_forward")
                p, _, _ = fwd(zt, ut, mt, FEASIBILITY_TOL, NEGATIVE_TOL, max_iter=max_iter)
            err = np.abs(p.double().numpy() - _expected(op, kind, shape_i, dtype)).max()
            assert err <= ATOL[dtype], f"{op}/{kind}/{SHAPES[shape_i]}/max_iter={max_iter}: max error {err:.3g}"


def _deep_capping_cases():
    """Rows that need many capping rounds: bounds that sum to just above 1 on
    a couple of hundred entries, and scores so far apart (800) that every round
    of csoftmax's greedy capping sees only one entry above underflow."""
    for J, seed in ((200, 21), (200, 28), (400, 8)):
        yield f"tight-{J}-{seed}", make_case("tight", 30, J, seed=seed)
    rng = np.random.default_rng(7)
    R, J = 6, 24
    z = np.sort(rng.uniform(-9600, 9600, (R, J)), -1) + np.arange(J) * 800.0 - 9600
    z = np.clip(z, -1e4, 1e4)
    u = rng.uniform(1e-9, 1e-2, (R, J))
    u[:, 0] = np.inf  # the lowest score takes what is left
    yield "spread", (z, u, np.ones((R, J), dtype=bool))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", ("csparsemax", "csoftmax"))
@pytest.mark.parametrize("path", ("native", "pytorch"))
def test_deep_capping(path, op, dtype):
    from .conftest import on_path

    for name, (z, u, mask) in _deep_capping_cases():
        z = torch.as_tensor(z).to(dtype).double().numpy()
        u = torch.as_tensor(u).to(dtype).double().numpy()
        expected = oracle.rows(getattr(oracle, op), z, u, mask)
        with on_path(path):
            p = _run(op, z, u, mask, dtype)
        err = np.abs(p.double().numpy() - expected).max()
        assert err <= ATOL[dtype], f"{op}/{path}/{name}: max error {err:.3g}"
