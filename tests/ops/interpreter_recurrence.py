"""``bounded_recurrence``'s Triton kernels on the CPU, through Triton's interpreter.

Not collected by the suite (no ``test_`` prefix): ``test_recurrence_triton.py`` runs this file in a child
process with ``TRITON_INTERPRET=1`` set before Triton is imported.  The interpreter patches
``triton.language`` while a kernel runs and leaves some of it patched (nested ``@triton.jit`` calls), which
would break compiled Triton (CUDA tests, ``torch.compile``) in the same process; the child keeps it apart.
"""

from __future__ import annotations

import os

import pytest
import torch

from .recurrence_cases import CASES, Case, compare, inputs
from scanmt.ops import bounded_recurrence

if os.environ.get("TRITON_INTERPRET") != "1":  # pragma: no cover - only reached when run by hand
    raise RuntimeError("run this file with TRITON_INTERPRET=1 (tests/ops/test_recurrence_triton.py does)")


@pytest.mark.parametrize("case", CASES, ids=str)
def test_triton_matches_torch(case: Case) -> None:
    compare(case, "cpu")


def test_infeasible_bounds_raise() -> None:
    """Without a sink, a row whose bounds run out raises, as the torch backend's transforms do."""
    x = inputs(Case("csparsemax", sink=False, T=2), "cpu")
    f = torch.full_like(x["fertility"], 0.2)  # 6 columns x 0.2 = 1.2: the second position is infeasible
    with pytest.raises(ValueError, match="infeasible upper bounds"):
        bounded_recurrence(x["z"], f, "csparsemax", mask=x["mask"], backend="triton")


def test_nan_scores_raise_unless_masked() -> None:
    x = inputs(Case("csoftmax"), "cpu")
    z = x["z"].clone()
    z[0, :, :, Case("csoftmax").S // 2] = float("nan")  # masked: ignored
    p, _ = bounded_recurrence(z, x["fertility"], "csoftmax", mask=x["mask"], backend="triton")
    assert bool(torch.isfinite(p).all())
    z[1, 0, 1, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        bounded_recurrence(z, x["fertility"], "csoftmax", mask=x["mask"], backend="triton")


def test_inputs_broadcast_to_the_rows() -> None:
    """One fertility, mask and initial sum for every row, alpha a number: as the torch backend."""
    x = inputs(Case("centmax", T=2), "cpu")
    kw = dict(mask=x["mask"][:1, 0], attention_sum=x["attention_sum"][0, 0], alpha=1.3, exhaustion=0.1)
    ref = bounded_recurrence(x["z"], x["fertility"][0, 0], "centmax", backend="torch", **kw)
    got = bounded_recurrence(x["z"], x["fertility"][0, 0], "centmax", backend="triton", **kw)
    for a, b in zip(ref, got):
        assert a.shape == b.shape
        torch.testing.assert_close(b, a, atol=1e-5, rtol=0)


def test_deferred_checks_raise_at_the_end_of_the_block() -> None:
    """Inside ``deferred_checks`` the kernels' checks wait for the block's end: the infeasible call returns,
    valid calls in the same block give what they give outside it, and the block's end raises the eager
    check's error, saying it was deferred.  A second, valid block raises nothing (the queue was emptied)."""
    from scanmt.ops import deferred, deferred_checks

    x = inputs(Case("csparsemax", sink=False, T=2), "cpu")
    f = torch.full_like(x["fertility"], 0.2)  # infeasible at the second position
    ok = inputs(Case("centmax", alpha="head"), "cpu")
    eager = bounded_recurrence(ok["z"], ok["fertility"], "centmax", mask=ok["mask"], alpha=ok["alpha"],
                               backend="triton")
    with pytest.raises(ValueError, match=r"infeasible upper bounds.*deferred by scanmt\.ops\.deferred_checks"):
        with deferred_checks():
            got = bounded_recurrence(ok["z"], ok["fertility"], "centmax", mask=ok["mask"], alpha=ok["alpha"],
                                     backend="triton")
            bounded_recurrence(x["z"], f, "csparsemax", mask=x["mask"], backend="triton")  # returns
            with deferred_checks():  # nested: the outer block checks
                bounded_recurrence(x["z"], f, "csparsemax", mask=x["mask"], backend="triton")
            assert len(deferred._QUEUE.checks) == 4  # alpha, and one per call
    for a, b in zip(eager, got):
        assert torch.equal(a, b)
    assert not deferred._QUEUE.checks
    with deferred_checks():
        bounded_recurrence(ok["z"], ok["fertility"], "centmax", mask=ok["mask"], alpha=ok["alpha"], backend="triton")
    bad_alpha = ok["alpha"].clone()
    bad_alpha[0, 1, 0] = 0.5
    with pytest.raises(ValueError, match=r"alpha must be finite and >= 1, got 0\.5 \(found when"):
        with deferred_checks():
            bounded_recurrence(ok["z"], ok["fertility"], "centmax", mask=ok["mask"], alpha=bad_alpha,
                               backend="triton")
