"""Input checks of the GPU kernels, deferred to one host read per block of work.

A check of a kernel's inputs on a GPU (NaN scores, infeasible bounds) reads a device value on the host:
the CPU waits there until the GPU has run every kernel queued before it.  The triton backend of
:func:`scanmt.ops.bounded_recurrence` checks once per call; the LSTM calls it once per target position,
so an update would wait on the GPU about thirty times.  Inside :func:`deferred_checks` the op queues its
check instead (a small device tensor and the function that raises for it), and the block's end runs
every queued check with a single host read::

    with scanmt.ops.deferred_checks():
        loss = model(batch)          # every bounded_recurrence call queues its check
        loss.backward()
    # here: one host read; a ValueError names the op and the problem, as the eager check would
    optimizer.step()

The training loop runs each update's forward and backward passes in such a block and steps the optimizer
after it, so invalid inputs never reach the weights.  Outside a block every check runs at once, as
before.  Only the triton backend queues its checks (on the CPU the torch backend's transforms check as they
go, where a read costs no synchronisation).  Blocks nest: the outermost one
checks.  A block left by an exception drops its queue, so the first error is the one raised.  At most
:data:`MAX_PENDING` checks wait; the next one runs the queue (a block of many thousand calls still
synchronises rarely, and its queued tensors stay small).
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass
from typing import Callable, Dict, Iterator, List

import torch
from torch import Tensor

#: the most queued checks; one more runs them all (one host read)
MAX_PENDING = 4096


@dataclass
class _Check:
    """One queued check: ``bad(torch.cat([value, ...]))`` is a 0-d bool device tensor, True where ``run()``
    (the eager check of this ``value``) would raise."""

    value: Tensor
    bad: Callable[[Tensor], Tensor]
    run: Callable[[], None]


class _Queue(threading.local):
    """This thread's open blocks and queued checks."""

    def __init__(self) -> None:
        self.depth = 0
        self.checks: List[_Check] = []


_QUEUE = _Queue()


def deferring() -> bool:
    """Whether checks are to be queued (inside :func:`deferred_checks`)."""
    return _QUEUE.depth > 0


def defer(value: Tensor, bad: Callable[[Tensor], Tensor], run: Callable[[], None]) -> None:
    """Queue a check of ``value`` (a device tensor): ``run()`` is the eager check, which reads the device and
    raises ``ValueError``; ``bad`` maps ``value``, or the concatenation (along dimension 0) of the values
    queued with the same ``bad``, to a 0-d bool tensor that is True where a ``run`` would raise, without a
    host read.  Call only where :func:`deferring`."""
    _QUEUE.checks.append(_Check(value, bad, run))
    if len(_QUEUE.checks) >= MAX_PENDING:
        run_pending()


def run_pending() -> None:
    """Run the queued checks now: one host read for all of them (their values concatenated per ``bad``),
    then, only if one is bad, the eager checks in the order they were queued (the first raises
    ``ValueError``, naming the op and the problem)."""
    checks, _QUEUE.checks = _QUEUE.checks, []
    if not checks:
        return
    groups: Dict[Callable[[Tensor], Tensor], List[Tensor]] = {}
    for c in checks:
        groups.setdefault(c.bad, []).append(c.value)
    flags = torch.stack([bad(torch.cat(values)).reshape(()) for bad, values in groups.items()])
    if not bool(flags.any()):
        return
    for c in checks:
        try:
            c.run()
        except ValueError as exc:
            raise ValueError(f"{exc} (found when the checks deferred by scanmt.ops.deferred_checks ran)") from None
    raise AssertionError("a deferred check's flag was set but its eager check passed")  # pragma: no cover


@contextlib.contextmanager
def deferred_checks() -> Iterator[None]:
    """Queue the GPU kernels' input checks in this block and run them at its end, with one host read
    (module docstring)."""
    _QUEUE.depth += 1
    ok = False
    try:
        yield
        ok = True
    finally:
        _QUEUE.depth -= 1
        if _QUEUE.depth == 0:
            if ok:
                run_pending()
            else:
                _QUEUE.checks = []
