"""The ops at extreme scores (issue 27, item 9): every finite input up to 1e30 in magnitude
gives a finite point of the (bounded) simplex, in float32 and float64, on the native and the
PyTorch paths, and the paths agree."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from scanmt.ops import _checks, csoftmax, csparsemax, softmax, sparsemax

from .cases import PROPERTY_SETTINGS
from .conftest import on_path

OPS = {"softmax": softmax, "sparsemax": sparsemax, "csoftmax": csoftmax, "csparsemax": csparsemax}
#: the native kernels, and each PyTorch algorithm (softmax has one)
SOLVERS = ("native", "dense", "iter", "sort")
DTYPES = {"float32": torch.float32, "float64": torch.float64}
#: sum(p) = 1 and p <= u within this
TOL = {torch.float32: 2e-5, torch.float64: 1e-9}


def run(op: str, solver: str, z: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    ctx = on_path("native") if solver == "native" else _checks.use_method(solver)
    with ctx:
        return OPS[op](z, u) if op.startswith("c") else OPS[op](z)


def check_point(p: torch.Tensor, u: torch.Tensor, constrained: bool, tol: float) -> None:
    p64, u64 = p.double(), u.double()
    assert torch.isfinite(p64).all(), p
    assert (p64 >= 0).all(), p
    if constrained:
        assert (p64 <= u64 + tol).all(), (p, u)
    err = float((p64.sum(-1) - 1).abs().max())
    assert err <= tol, (err, p)


@st.composite
def extreme_rows(draw, dtype: torch.dtype):
    """[R, J] scores up to 1e30 in magnitude: a cluster of small or huge values (ties included)
    around a shift up to 1e30, and spikes of +-1e30 (or anything between) among them."""
    R, J = draw(st.integers(1, 3)), draw(st.integers(1, 8))
    scale = 10.0 ** draw(st.integers(-3, 30))
    shift = draw(st.sampled_from([0.0, 1e8, -1e8, 1e15, 1e18, -1e18, 1e30, -1e30]))
    base = draw(st.lists(st.sampled_from([-1.0, -0.5, 0.0, 0.3, 1.0]) | st.floats(-1, 1), min_size=R * J,
                         max_size=R * J))
    z = np.array(base).reshape(R, J) * scale + shift
    spikes = draw(st.lists(st.sampled_from([None, 1e30, -1e30, 1e18, 0.0, 5.0]), min_size=R * J, max_size=R * J))
    for n, s in enumerate(spikes):
        if s is not None and draw(st.integers(0, 3)) == 0:
            z.flat[n] = s
    return torch.tensor(np.clip(z, -1e30, 1e30), dtype=dtype)


@st.composite
def bounds(draw, z: torch.Tensor):
    """Feasible bounds (sum of min(u, 1) >= 1 in every row): zeros, binding, loose, +inf."""
    R, J = z.shape
    u = np.array(draw(st.lists(st.sampled_from([0.0, 0.1, 0.3, 0.5, 1.0, 2.0, math.inf]), min_size=R * J,
                               max_size=R * J))).reshape(R, J)
    for i in range(R):
        s = np.minimum(u[i], 1).sum()
        if s < 1:
            u[i, draw(st.integers(0, J - 1))] += 1.0 - s + draw(st.sampled_from([0.0, 0.2]))
    return torch.tensor(u, dtype=z.dtype)


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
@pytest.mark.parametrize("op", OPS)
@PROPERTY_SETTINGS
@given(data=st.data())
def test_extreme_scores_give_a_simplex_point_on_every_path_and_the_paths_agree(op, dtype, data):
    z = data.draw(extreme_rows(dtype))
    u = data.draw(bounds(z))
    constrained = op.startswith("c")
    results = {s: run(op, s, z, u) for s in (SOLVERS if op != "softmax" else ("sort",))}
    for s, p in results.items():
        assert p.dtype == dtype
        check_point(p, u, constrained, TOL[dtype])
    ref = results.get("native", results["sort"])
    for s, p in results.items():
        torch.testing.assert_close(
            p, ref, atol=TOL[dtype] * 5, rtol=0, msg=lambda m: f"{s} vs native: {m}\n{z.tolist()}\n{u.tolist()}"
        )


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_the_extreme_cases_of_the_issue(solver, dtype):
    """Each of these gave no simplex point on some path before the fix: sparsemax of three
    1e18 was [inf, inf, inf] (native), of three 1e15 0.375 each (native); csparsemax at 1e18
    all zeros (native); csparsemax of [1.2, 0.8, -0.2] + 1e8 was [0.5, 1, 1] (PyTorch)."""
    third = torch.full((1, 3), 1 / 3, dtype=torch.float64)
    u = torch.tensor([[0.5, 1.0, 1.0]], dtype=dtype)
    for s in (1e15, 1e18, 1e30, -1e30):
        z = torch.full((1, 3), s, dtype=dtype)
        for op in OPS:
            torch.testing.assert_close(run(op, solver, z, u).double(), third, atol=1e-6, rtol=0)
    z = torch.tensor([[1.2, 0.8, -0.2]], dtype=torch.float64) + 1e8
    want = torch.tensor([[0.5, 0.5, 0.0]], dtype=torch.float64)
    if dtype == torch.float32:  # 1e8 + [1.2, 0.8, -0.2] rounds to three equal float32 numbers
        want = third
    torch.testing.assert_close(run("csparsemax", solver, z.to(dtype), u).double(), want, atol=1e-6, rtol=0)
    # a capped score at 1e30 and the rest of the mass far below it, at 0 and -1e30
    z = torch.tensor([[1e30, 0.3, 0.0, -1e30, -0.3]], dtype=dtype)
    u = torch.tensor([[0.5, 1.0, 1.0, 1.0, 1.0]], dtype=dtype)
    e = math.exp(0.3)
    cases = {
        "sparsemax": [1.0, 0, 0, 0, 0],
        "csparsemax": [0.5, 0.4, 0.1, 0, 0],
        "csoftmax": [0.5, 0.5 * e / (e + 1 + 1 / e), 0.5 / (e + 1 + 1 / e), 0, 0.5 / e / (e + 1 + 1 / e)],
    }
    for op, want in cases.items():
        torch.testing.assert_close(run(op, solver, z, u).double(), torch.tensor([want], dtype=torch.float64),
                                   atol=1e-6, rtol=0)
