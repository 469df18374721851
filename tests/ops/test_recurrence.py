"""``scanmt.ops.bounded_recurrence`` with its torch backend (the reference, and what the models run on the
CPU): the recurrence's meaning, gradients (float64 gradcheck), incremental use, backend choice and errors.
The triton backend is compared with it in ``test_recurrence_triton.py`` (interpreter) and
``test_recurrence_cuda.py`` (GPU)."""

from __future__ import annotations

import pytest
import torch

from scanmt.ops import _triton, bounded_recurrence, csparsemax, recurrence

from .recurrence_cases import Case, inputs


def _double(x: dict) -> dict:
    return {k: v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v for k, v in x.items()}


@pytest.mark.parametrize("case", [Case("csoftmax"), Case("csparsemax", shared=True), Case("centmax", alpha="head"),
                                  Case("centmax", shared=True, alpha="head", exhaustion=0.0)], ids=str)
def test_gradcheck_in_float64(case: Case) -> None:
    x = _double(inputs(case, "cpu", seed=3))
    f = x["fertility"].clone()
    f[f == float("inf")] = 1e3  # gradcheck perturbs every entry: a finite stand-in for the sink
    leaves = [x["z"], f, x["attention_sum"]] + ([x["alpha"]] if isinstance(x["alpha"], torch.Tensor) else [])
    leaves = [t.clone().requires_grad_() for t in leaves]

    def fn(*args):
        alpha = args[3] if len(args) > 3 else None
        return bounded_recurrence(args[0], args[1], case.transform, mask=x["mask"], exhaustion=case.exhaustion,
                                  attention_sum=args[2], alpha=alpha, shared=case.shared, backend="torch")

    assert torch.autograd.gradcheck(fn, leaves, eps=1e-6, atol=1e-5)


def test_the_recurrence_holds_the_bounds() -> None:
    """``u = max(0, f - attention_sum)``: every position stays within what its column has left, the
    attention a real column receives over all positions stays within its fertility, and the returned sum is
    the initial one plus every position's attention."""
    case = Case("csparsemax", T=6, exhaustion=0.5)
    x = inputs(case, "cpu")
    p, s = bounded_recurrence(x["z"], x["fertility"], "csparsemax", mask=x["mask"], exhaustion=0.5,
                              attention_sum=x["attention_sum"])
    cum = x["attention_sum"].unsqueeze(-2) + p.cumsum(-2)  # after each position
    before = torch.cat([x["attention_sum"].unsqueeze(-2), cum[..., :-1, :]], -2)
    u = (x["fertility"].unsqueeze(-2) - before).clamp_min(0.0)
    assert bool((p <= u + 1e-6).all())
    torch.testing.assert_close(s, cum[..., -1, :])
    torch.testing.assert_close(p.sum(-1)[:2], torch.ones_like(p.sum(-1)[:2]))


def test_shared_heads_share_the_running_mean() -> None:
    x = inputs(Case("csoftmax", shared=True, H=3), "cpu")
    p, s = bounded_recurrence(x["z"], x["fertility"], "csoftmax", mask=x["mask"],
                              attention_sum=x["attention_sum"], shared=True)
    assert s.shape == x["attention_sum"].shape
    torch.testing.assert_close(s, x["attention_sum"] + p.mean(1).sum(1, keepdim=True))
    # position 1 is bounded by what position 0's mean over the heads left
    u1 = (x["fertility"] - x["attention_sum"] - p[:, :, 0].mean(1, keepdim=True)).clamp_min(0.0)
    assert bool((p[:, :, 1] <= u1 + 1e-6).all())


@pytest.mark.parametrize("shared", [False, True])
def test_positions_continue_from_the_returned_sum(shared: bool) -> None:
    """Incremental decoding: the first k positions, then the rest from the returned attention sum, give the
    same probabilities and sum, bit for bit, as all positions at once."""
    case = Case("centmax", shared=shared, T=5, alpha="head")
    x = inputs(case, "cpu")
    kw = dict(mask=x["mask"], exhaustion=0.2, alpha=x["alpha"], shared=shared)
    p, s = bounded_recurrence(x["z"], x["fertility"], "centmax", attention_sum=x["attention_sum"], **kw)
    p1, s1 = bounded_recurrence(x["z"][:, :, :2], x["fertility"], "centmax", attention_sum=x["attention_sum"], **kw)
    p2, s2 = bounded_recurrence(x["z"][:, :, 2:], x["fertility"], "centmax", attention_sum=s1, **kw)
    assert torch.equal(torch.cat([p1, p2], 2), p) and torch.equal(s2, s)


def test_each_position_is_the_transform_of_its_bounds() -> None:
    """One position is the transform itself, with ``u = max(0, f - attention_sum)`` and the bonus ``c u``."""
    x = inputs(Case("csparsemax"), "cpu")
    p, s = bounded_recurrence(x["z"][:, :, :1], x["fertility"], "csparsemax", mask=x["mask"], exhaustion=0.3,
                              attention_sum=x["attention_sum"])
    u = (x["fertility"] - x["attention_sum"]).clamp_min(0.0)
    bonus = torch.where(torch.isfinite(u), u, torch.zeros_like(u)) * 0.3
    ref = csparsemax(x["z"][:, :, 0] + bonus, u, mask=x["mask"])
    assert torch.equal(p[:, :, 0], ref) and torch.equal(s, x["attention_sum"] + ref)


def test_defaults_and_empty_inputs() -> None:
    x = inputs(Case("csoftmax", T=2), "cpu")
    p, s = bounded_recurrence(x["z"], x["fertility"], "csoftmax")
    assert p.shape == x["z"].shape and s.shape == (3, 2, 6)
    torch.testing.assert_close(s, p.sum(2))
    p0, s0 = bounded_recurrence(x["z"][:, :, :0], x["fertility"], "csoftmax", attention_sum=x["attention_sum"])
    assert p0.shape == (3, 2, 0, 6) and torch.equal(s0, x["attention_sum"])
    # centmax's alpha defaults to 1.5, as scanmt.ops.centmax's
    pa, _ = bounded_recurrence(x["z"], x["fertility"], "centmax")
    pb, _ = bounded_recurrence(x["z"], x["fertility"], "centmax", alpha=1.5)
    assert torch.equal(pa, pb)


def test_bfloat16_inputs_are_computed_in_float32() -> None:
    x = inputs(Case("csparsemax", dtype=torch.bfloat16), "cpu")
    p, s = bounded_recurrence(x["z"], x["fertility"], "csparsemax", mask=x["mask"])
    q, t = bounded_recurrence(x["z"].float(), x["fertility"], "csparsemax", mask=x["mask"])
    assert p.dtype == s.dtype == torch.float32 and torch.equal(p, q) and torch.equal(s, t)


def test_auto_runs_torch_on_the_cpu(monkeypatch) -> None:
    x = inputs(Case("csoftmax"), "cpu")
    monkeypatch.setattr(recurrence, "_torch_loop", lambda *a, **k: (_ for _ in ()).throw(AssertionError("torch")))
    with pytest.raises(AssertionError, match="torch"):
        bounded_recurrence(x["z"], x["fertility"], "csoftmax")
    with recurrence.use_backend("triton"), pytest.raises((RuntimeError, ValueError), match="backend='triton'"):
        bounded_recurrence(x["z"], x["fertility"], "csoftmax")


def test_triton_backend_refuses_what_it_cannot_run(monkeypatch) -> None:
    x = inputs(Case("csoftmax"), "cpu")
    monkeypatch.setattr(_triton, "available", lambda: False)
    with pytest.raises(RuntimeError, match=r"needs Triton \(pip install scanmt\[gpu\]\)"):
        bounded_recurrence(x["z"], x["fertility"], "csoftmax", backend="triton")
    monkeypatch.setattr(_triton, "available", lambda: True)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(ValueError, match="needs CUDA tensors"):
        bounded_recurrence(x["z"], x["fertility"], "csoftmax", backend="triton")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    with pytest.raises(ValueError, match="float64 inputs need backend='torch'"):
        bounded_recurrence(x["z"].double(), x["fertility"], "csoftmax", backend="triton")


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(transform="softmax"), ValueError, "transform must be one of csoftmax, csparsemax, centmax"),
    (dict(backend="cuda"), ValueError, "backend must be one of auto, torch, triton"),
    (dict(alpha=1.5), ValueError, "alpha is for centmax only"),
    (dict(fertility=None), TypeError, "fertility .* is required"),
    (dict(fertility=torch.ones(3, 1, 5)), ValueError, r"fertility of shape \(3, 1, 5\) cannot be broadcast"),
    (dict(mask=torch.ones(3, 1, 6)), TypeError, "mask must be a bool tensor"),
    (dict(attention_sum=torch.zeros(3, 2, 6), shared=True), ValueError, "attention_sum .*shared"),
    (dict(exhaustion="0.2"), TypeError, "exhaustion must be a real number"),
    (dict(transform="centmax", alpha=torch.ones(3, 2, 2)), ValueError, r"alpha \(one per row\)"),
])
def test_errors_name_the_argument(kwargs: dict, error: type, match: str) -> None:
    x = inputs(Case("csoftmax"), "cpu")
    args = dict(z=x["z"], fertility=x["fertility"], transform="csoftmax")
    for k in ("z", "fertility", "transform"):
        if k in kwargs:
            args[k] = kwargs.pop(k)
    with pytest.raises(error, match=match):
        bounded_recurrence(args["z"], args["fertility"], args["transform"], **kwargs)


def test_infeasible_bounds_raise() -> None:
    x = inputs(Case("csparsemax", sink=False, T=2), "cpu")
    with pytest.raises(ValueError, match="infeasible upper bounds"):
        bounded_recurrence(x["z"], torch.full_like(x["fertility"], 0.2), "csparsemax", mask=x["mask"])
