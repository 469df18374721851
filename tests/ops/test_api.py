"""The public API: dims, leading dims, broadcasting, dtypes, autocast, modules, errors."""

from __future__ import annotations

import ast
import doctest
import pathlib
import sys

import numpy as np
import pytest
import torch

import scanmt.ops as ops
from scanmt.ops import CSoftmax, CSparsemax, Sparsemax, _checks, csoftmax, csparsemax, softmax, sparsemax

from .conftest import DEVICES, PATHS, on_path

ALL = ["softmax", "sparsemax", "csoftmax", "csparsemax"]
FNS = {"softmax": softmax, "sparsemax": sparsemax, "csoftmax": csoftmax, "csparsemax": csparsemax}
OPS_DIR = pathlib.Path(ops.__file__).parent


def call(op, z, u=None, **kw):
    if op in ("csoftmax", "csparsemax"):
        return FNS[op](z, u, **kw)
    return FNS[op](z, **kw)


def bounds_like(z: torch.Tensor, dim: int) -> torch.Tensor:
    """Binding but feasible bounds: 2.5 / J each, with a zero."""
    J = z.shape[dim]
    u = torch.full_like(z, 2.5 / J)
    if J > 2:
        u.select(dim, 1).zero_()
    return u


# ----------------------------------------------------------------------------
# any dim, any number of leading dimensions, batch independence
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("dim", [0, 1, 2, -1, -2])
@pytest.mark.parametrize("op", ALL)
def test_any_dim_matches_last_dim(op, dim, dtype, path):
    torch.manual_seed(0)
    z = torch.randn(5, 4, 7, dtype=dtype) * 2
    u = bounds_like(z, dim)
    with on_path(path):
        out = call(op, z, u, dim=dim)
        ref = call(op, z.movedim(dim, -1), u.movedim(dim, -1), dim=-1).movedim(-1, dim)
    assert out.shape == z.shape and out.dtype == dtype
    torch.testing.assert_close(out, ref, atol=1e-6 if dtype == torch.float32 else 1e-12, rtol=0)
    torch.testing.assert_close(out.sum(dim), torch.ones_like(out.sum(dim)), atol=1e-5, rtol=0)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("lead", [(), (3,), (2, 3), (2, 1, 3, 2)])
@pytest.mark.parametrize("op", ALL)
def test_leading_dims_and_batch_independence(op, lead, path):
    with on_path(path):
        _leading_dims_and_batch_independence(op, lead)


def _leading_dims_and_batch_independence(op, lead):
    torch.manual_seed(1)
    J = 9
    z = torch.randn(*lead, J, dtype=torch.float64)
    u = bounds_like(z, -1)
    out = call(op, z, u)
    assert out.shape == z.shape
    flat_z, flat_u, flat_out = z.reshape(-1, J), u.reshape(-1, J), out.reshape(-1, J)
    for i in range(flat_z.shape[0]):
        # a row's result does not depend on the other rows
        alone = call(op, flat_z[i : i + 1], flat_u[i : i + 1])
        torch.testing.assert_close(flat_out[i : i + 1], alone, atol=1e-12, rtol=0)
        # nor does it change when the other rows are replaced by junk
        junk_z, junk_u = torch.randn_like(flat_z) * 100, torch.full_like(flat_u, 7.0)
        junk_z[i], junk_u[i] = flat_z[i], flat_u[i]
        torch.testing.assert_close(call(op, junk_z, junk_u)[i], flat_out[i], atol=1e-12, rtol=0)


@pytest.mark.parametrize("method", ["native", "dense", "iter", "sort"])
@pytest.mark.parametrize("op", ["sparsemax", "csoftmax", "csparsemax"])
def test_methods_agree(op, method):
    torch.manual_seed(2)
    z = torch.randn(300, 30, dtype=torch.float64) * 3
    u = torch.rand(300, 30, dtype=torch.float64) * 0.15
    u[:, -1] = float("inf")
    ref = call(op, z, u)
    with _checks.use_method(method):
        torch.testing.assert_close(call(op, z, u), ref, atol=1e-12, rtol=0)


@pytest.mark.parametrize("method", ["native", "iter"])
def test_batch_independence_of_iteration_counts(method):
    """Rows needing many steps do not change the result of easy rows (iterative paths)."""
    torch.manual_seed(3)
    easy_z, easy_u = torch.randn(64, 40), torch.full((64, 40), 10.0)
    hard_z, hard_u = torch.randn(64, 40) * 0.01, torch.rand(64, 40) * 0.05 + 0.02
    for fn in (csoftmax, csparsemax):
        with _checks.use_method(method):
            both = fn(torch.cat([easy_z, hard_z]), torch.cat([easy_u, hard_u]))
            torch.testing.assert_close(both[:64], fn(easy_z, easy_u), atol=1e-6, rtol=0)
            torch.testing.assert_close(both[64:], fn(hard_z, hard_u), atol=1e-6, rtol=0)


@pytest.mark.parametrize("path", PATHS)
def test_empty_and_single_entry_dims(path):
    with on_path(path):
        _empty_and_single_entry_dims()


def _empty_and_single_entry_dims():
    for op in ALL:
        z = torch.randn(3, 0)
        assert call(op, z, torch.ones(3, 0)).shape == (3, 0)
        z = torch.randn(3, 1)
        torch.testing.assert_close(call(op, z, torch.ones(3, 1)), torch.ones(3, 1))
        assert call(op, torch.randn(0, 5), torch.ones(0, 5)).shape == (0, 5)


# ----------------------------------------------------------------------------
# broadcasting
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("op", ["csoftmax", "csparsemax"])
def test_broadcasting_and_reduced_gradients(op, path):
    with on_path(path):
        _broadcasting_and_reduced_gradients(op)


def _broadcasting_and_reduced_gradients(op):
    torch.manual_seed(4)
    z = torch.randn(4, 1, 6, dtype=torch.float64, requires_grad=True)  # broadcasts over dim 1
    u = torch.tensor([0.5, 0.1, 0.3, 0.2, 0.9, 0.4], dtype=torch.float64).expand(3, 6).clone()
    u.requires_grad_()
    out = FNS[op](z, u)
    assert out.shape == (4, 3, 6)
    ref = FNS[op](z.detach().expand(4, 3, 6), u.detach().expand(4, 3, 6))
    torch.testing.assert_close(out, ref)
    g = torch.randn(4, 3, 6, dtype=torch.float64)
    out.backward(g)
    z2, u2 = z.detach().expand(4, 3, 6).clone().requires_grad_(), u.detach().expand(4, 3, 6).clone().requires_grad_()
    FNS[op](z2, u2).backward(g)
    torch.testing.assert_close(z.grad, z2.grad.sum(1, keepdim=True))
    torch.testing.assert_close(u.grad, u2.grad.sum(0))
    # a python number and a mask broadcast too
    mask = torch.tensor([True, True, False, True, True, True])
    p = FNS[op](z.detach(), 0.5, mask=mask)
    assert p.shape == (4, 1, 6) and (p[..., 2] == 0).all()


def test_mask_must_broadcast_to_z():
    z = torch.randn(2, 3)
    with pytest.raises(ValueError, match="mask of shape"):
        sparsemax(z, mask=torch.ones(2, 3, 2, dtype=torch.bool))
    with pytest.raises(TypeError, match="bool tensor"):
        sparsemax(z, mask=torch.ones(2, 3))


# ----------------------------------------------------------------------------
# dtypes, autocast, devices
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("op", ALL)
def test_half_precision_is_computed_in_float32(op, dtype, path):
    with on_path(path):
        _half_precision_is_computed_in_float32(op, dtype)


def _half_precision_is_computed_in_float32(op, dtype):
    torch.manual_seed(5)
    z = (torch.randn(6, 11) * 3).to(dtype)
    u = bounds_like(z, -1).to(dtype)
    zz, uu = z.clone().requires_grad_(), u.clone().requires_grad_()
    out = call(op, zz, uu)
    assert out.dtype == dtype
    ref = call(op, z.float(), u.float()).to(dtype)
    torch.testing.assert_close(out, ref, atol=0, rtol=0)
    out.backward(torch.ones_like(out))
    assert zz.grad.dtype == dtype
    if op.startswith("c"):
        assert uu.grad.dtype == dtype


def test_mixed_dtypes_promote():
    z = torch.randn(3, 5, dtype=torch.float16)
    u = torch.full((3, 5), 0.5, dtype=torch.float64)
    assert csparsemax(z, u).dtype == torch.float64
    assert csparsemax(z, torch.ones(3, 5, dtype=torch.int64)).dtype == torch.float16
    assert csoftmax(z.float(), 1).dtype == torch.float32


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("op", ALL)
def test_autocast(op, path):
    with on_path(path):
        _autocast(op, "cpu")


@pytest.mark.parametrize("device", [d for d in DEVICES if d != "cpu"])
@pytest.mark.parametrize("op", ALL)
def test_autocast_off_the_cpu(op, device):
    _autocast(op, device)


def _autocast(op, device):
    torch.manual_seed(6)
    lin = torch.nn.Linear(8, 10).to(device)
    x = torch.randn(4, 8, device=device)
    u = bounds_like(torch.zeros(4, 10), -1).to(device)
    with torch.autocast(device, dtype=torch.bfloat16):
        z = lin(x)
        assert z.dtype == torch.bfloat16
        out = call(op, z, u)
    assert out.dtype in (torch.bfloat16, torch.float32)
    torch.testing.assert_close(out.float().sum(-1), torch.ones(4, device=device), atol=1e-2, rtol=0)
    out.float().sum().backward()
    assert lin.weight.grad is not None and torch.isfinite(lin.weight.grad).all()


def test_device_agnostic_source():
    """No host round trips in the ops' hot paths: no .cpu(), .item(), .numpy(), .tolist().

    (Validation, the iterative CPU paths and error messages synchronise by design.)
    """
    for path in OPS_DIR.glob("*.py"):
        src = path.read_text()
        for bad in (".item()", ".numpy()", ".tolist()"):
            assert bad not in src, f"{path.name} uses {bad}"
        if path.name != "_checks.py":
            assert ".cpu()" not in src, path.name


# ----------------------------------------------------------------------------
# modules, validation switch, no mutation, isolation, docs
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
def test_modules(path):
    with on_path(path):
        _modules()


def _modules():
    torch.manual_seed(7)
    z, u = torch.randn(3, 4, 6), torch.full((3, 4, 6), 0.3)
    mask = torch.rand(3, 4, 6) > 0.2
    mask[..., 0] = True
    u = u + (~mask).float()  # keep rows feasible over the unmasked positions
    u = torch.where(mask, u, 0.0) + 0.3
    torch.testing.assert_close(Sparsemax(dim=1)(z, mask), sparsemax(z, dim=1, mask=mask))
    torch.testing.assert_close(CSoftmax(dim=-1)(z, u, mask), csoftmax(z, u, mask=mask))
    torch.testing.assert_close(CSparsemax()(z, u, mask=mask), csparsemax(z, u, mask=mask))
    torch.testing.assert_close(ops.Softmax(dim=0)(z), softmax(z, dim=0))
    m = CSparsemax(dim=-1, validate=False)
    assert "validate=False" in repr(m) and "dim=-1" in repr(m)
    assert isinstance(m, torch.nn.Module) and list(m.parameters()) == []


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("op", ["sparsemax", "csoftmax", "csparsemax"])
def test_validate_false_skips_the_checks(op, path):
    with on_path(path):
        _validate_false_skips_the_checks(op)


def _validate_false_skips_the_checks(op):
    z, u = torch.randn(2, 4), torch.full((2, 4), 0.5)
    bad_u = torch.full((2, 4), 0.1)  # infeasible
    if op != "sparsemax":
        with pytest.raises(ValueError):
            FNS[op](z, bad_u)
        out = FNS[op](z, bad_u, validate=False)  # no error: unspecified but finite here
        assert out.shape == z.shape
    torch.testing.assert_close(call(op, z, u, validate=False), call(op, z, u))


@pytest.mark.parametrize("method", ["native", "dense", "iter", "sort"])
@pytest.mark.parametrize("op", ALL)
def test_inputs_are_not_mutated(op, method):
    torch.manual_seed(8)
    z = torch.randn(5, 9)
    z[0, 3] = float("-inf")
    u = bounds_like(z, -1)
    u[1, 2] = float("inf")
    mask = torch.rand(5, 9) > 0.1
    z0, u0, m0 = z.clone(), u.clone(), mask.clone()
    zz, uu = z.clone().requires_grad_(), u.clone().requires_grad_()
    with _checks.use_method(method):
        out = call(op, zz, uu, mask=mask)
        out.backward(torch.randn_like(out))
    assert torch.equal(zz.detach(), z0) and torch.equal(uu.detach(), u0) and torch.equal(mask, m0)


def test_ops_imports_nothing_else_from_scanmt():
    for path in OPS_DIR.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                if node.level == 0:
                    assert not (node.module or "").startswith("scanmt"), f"{path.name}: {node.module}"
                else:
                    assert node.level == 1, f"{path.name} imports from outside scanmt.ops"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    assert not alias.name.startswith("scanmt"), f"{path.name}: {alias.name}"


def test_module_docstring_example():
    failures, tests = doctest.testmod(sys.modules["scanmt.ops"], verbose=False)
    assert tests > 0 and failures == 0


def test_errors_for_bad_arguments():
    z = torch.randn(2, 3)
    with pytest.raises(TypeError, match="floating-point"):
        sparsemax(torch.ones(2, 3, dtype=torch.int64))
    with pytest.raises(TypeError, match="torch.Tensor"):
        sparsemax(np.zeros((2, 3)))
    with pytest.raises(IndexError, match="out of range"):
        sparsemax(z, dim=2)
    with pytest.raises(ValueError, match="at least one dimension"):
        sparsemax(torch.tensor(1.0))
    with pytest.raises(TypeError, match="real"):
        csparsemax(z, torch.ones(2, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="cannot be broadcast together"):
        csoftmax(z, torch.ones(4))


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("op", ["csoftmax", "csparsemax"])
def test_bad_bounds_raise_naming_the_argument(op, path):
    """Issue 27, item 19: a missing ``u`` was a bare AssertionError; every bad ``u`` names it."""
    z = torch.randn(2, 3)
    with on_path(path):
        with pytest.raises(TypeError, match=rf"^{op}: u \(the upper bounds\) is required"):
            call(op, z, None)
        with pytest.raises(TypeError, match=rf"^{op}: u must be a torch.Tensor or a real number, got list"):
            call(op, z, [1.0, 1.0, 1.0])
        with pytest.raises(TypeError, match=rf"^{op}: u must be a torch.Tensor or a real number, got bool"):
            call(op, z, True)
        with pytest.raises(ValueError, match=rf"^{op}: z of shape \(2, 3\) and u of shape \(2, 2\) cannot"):
            call(op, z, torch.ones(2, 2))
        with pytest.raises(ValueError, match=rf"^{op}: u contains NaN at an unmasked position in 1 of 2 rows"):
            call(op, z, torch.tensor([[1.0, float("nan"), 1.0], [1.0, 1.0, 1.0]]))
        with pytest.raises(ValueError, match=rf"^{op}: u contains NaN"):
            call(op, z, float("nan"))
        with pytest.raises(ValueError, match=rf"^{op}: u must be >= 0 .* the smallest is -0.5"):
            call(op, z, torch.tensor([[1.0, -0.5, 1.0], [1.0, 1.0, 1.0]]))
        with pytest.raises(ValueError, match=rf"^{op}: infeasible upper bounds in 2 of 2 rows"):
            call(op, z, 0.1)


@pytest.mark.parametrize("path", PATHS)
def test_non_contiguous_inputs(path):
    with on_path(path):
        _non_contiguous_inputs()


def _non_contiguous_inputs():
    torch.manual_seed(9)
    z = torch.randn(6, 8, dtype=torch.float64).t()  # non-contiguous
    u = torch.full((8, 6), 0.4, dtype=torch.float64)[:, ::1]
    for op in ALL:
        torch.testing.assert_close(call(op, z, u), call(op, z.contiguous(), u.contiguous()))


@pytest.mark.parametrize("path", PATHS)
def test_known_values(path):
    with on_path(path):
        _known_values()


def _known_values():
    z = torch.tensor([[1.2, 0.8, -0.2]])
    torch.testing.assert_close(sparsemax(z), torch.tensor([[0.7, 0.3, 0.0]]))
    torch.testing.assert_close(csparsemax(z, torch.tensor([[0.5, 1.0, 1.0]])), torch.tensor([[0.5, 0.5, 0.0]]))
    sm = torch.softmax(z, -1)
    q = csoftmax(z, torch.tensor([[0.3, 1.0, 1.0]]))
    rest = sm[0, 1:] / sm[0, 1:].sum() * 0.7
    torch.testing.assert_close(q, torch.cat([torch.tensor([[0.3]]), rest[None]], 1))
    # an entry that takes all the mass with a bound above 1: a unique threshold and
    # zero gradient for that bound
    z = torch.tensor([[5.0, 0.0, 0.0]], requires_grad=True)
    u = torch.tensor([[2.0, 2.0, 2.0]], requires_grad=True)
    p = csparsemax(z, u)
    torch.testing.assert_close(p, torch.tensor([[1.0, 0.0, 0.0]]))
    p.backward(torch.tensor([[1.0, 2.0, 3.0]]))
    assert torch.equal(u.grad, torch.zeros_like(u.grad)) and torch.equal(z.grad, torch.zeros_like(z.grad))


def test_a_transform_without_its_maths_is_refused_when_defined():
    """``TransformFunction`` subclasses must supply ``_solve`` and ``_free_set`` (or their own ``_vjp``)."""
    from scanmt.ops._function import TransformFunction

    with pytest.raises(TypeError, match=r"_solve, _free_set \(or its own _vjp\)"):
        type("Incomplete", (TransformFunction,), {"op_name": "incomplete"})
    with pytest.raises(TypeError, match=r"must define _free_set"):
        type("NoBackward", (TransformFunction,), {"op_name": "x", "_solve": classmethod(lambda cls, *a: None)})


def test_fertility_providers_must_implement_the_interface():
    from scanmt.fertility.providers import FertilityProvider

    with pytest.raises(TypeError, match="abstract"):
        type("Partial", (FertilityProvider,), {"apply": lambda self, src: []})()
