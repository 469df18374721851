"""``scanmt.ops.deferred``: checks queued in a ``deferred_checks`` block run at its end, with one read.

The kernels' use of it is tested under Triton's interpreter (``interpreter_recurrence.py``) and on a GPU
(``test_recurrence_cuda.py``, which also asserts that no call in a block synchronises).
"""

from __future__ import annotations

import pytest
import torch

from scanmt.ops import deferred
from scanmt.ops.deferred import defer, deferred_checks, deferring


def _negative(values: torch.Tensor) -> torch.Tensor:
    _negative.calls += 1  # type: ignore[attr-defined]
    return torch.lt(values, 0).any()


def _queue_check(values: torch.Tensor, name: str) -> None:
    def run() -> None:
        if bool(torch.lt(values, 0).any()):
            raise ValueError(f"{name}: negative value {float(values.min()):g}")

    if deferring():
        defer(values, _negative, run)
    else:
        run()


def test_a_block_runs_its_checks_once_at_its_end_and_names_the_first_failure() -> None:
    _negative.calls = 0  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match=r"^second: negative value -2 \(found when the checks deferred"):
        with deferred_checks():
            _queue_check(torch.tensor([1.0, 2.0]), "first")
            _queue_check(torch.tensor([-2.0]), "second")
            _queue_check(torch.tensor([-3.0, 4.0, 5.0]), "third")
            assert _negative.calls == 0  # type: ignore[attr-defined]
    # the three values were concatenated and judged by one call of the flag function
    assert _negative.calls == 1  # type: ignore[attr-defined]
    assert not deferred._QUEUE.checks and deferred._QUEUE.depth == 0


def test_outside_a_block_checks_run_at_once() -> None:
    assert not deferring()
    with pytest.raises(ValueError, match="now: negative value -1"):
        _queue_check(torch.tensor([-1.0]), "now")


def test_an_exception_in_the_block_drops_the_queue() -> None:
    with pytest.raises(KeyError):
        with deferred_checks():
            _queue_check(torch.tensor([-1.0]), "dropped")
            raise KeyError("first error")
    assert not deferred._QUEUE.checks and deferred._QUEUE.depth == 0
    with deferred_checks():  # a later block does not see the dropped check
        _queue_check(torch.tensor([1.0]), "fine")


def test_nested_blocks_check_at_the_outermost_end() -> None:
    with pytest.raises(ValueError, match="inner"):
        with deferred_checks():
            with deferred_checks():
                _queue_check(torch.tensor([-1.0]), "inner")
            assert len(deferred._QUEUE.checks) == 1  # not yet run
    assert deferred._QUEUE.depth == 0


def test_a_full_queue_runs_before_the_block_ends(monkeypatch) -> None:
    monkeypatch.setattr(deferred, "MAX_PENDING", 3)
    _negative.calls = 0  # type: ignore[attr-defined]
    with deferred_checks():
        for _ in range(7):
            _queue_check(torch.tensor([1.0]), "fine")
        assert _negative.calls == 2 and len(deferred._QUEUE.checks) == 1  # type: ignore[attr-defined]
    assert _negative.calls == 3  # type: ignore[attr-defined]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")
@pytest.mark.parametrize("op", ["softmax", "sparsemax"])
def test_the_transforms_input_checks_wait_for_the_block_on_cuda(op: str) -> None:
    """On a GPU the transforms' input check (one host read per call) is queued in a block: no call
    synchronises (CUDA's sync debug mode raises on one), and a NaN score is reported at the block's end.
    (entmax15 and the constrained ops read more than their check: whether to guard masked rows, whether to
    recentre; those reads stay.)"""
    from scanmt import ops

    fn = getattr(ops, op)
    z = torch.randn(16, 30, device="cuda", requires_grad=True)
    fn(z).sum().backward()  # first-call set-up outside the checked region
    with deferred_checks():
        torch.cuda.set_sync_debug_mode("error")
        try:
            fn(z).sum().backward()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    bad = z.detach().clone()
    bad[3, 7] = float("nan")
    with pytest.raises(ValueError, match="z contains NaN .*deferred by scanmt.ops.deferred_checks"):
        with deferred_checks():
            fn(bad)
