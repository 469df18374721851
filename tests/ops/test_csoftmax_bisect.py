"""csoftmax's bisection for rows whose threshold lies far below their maximum: testing the bracket after
every halving (the CPU) or after every few (off the CPU, where each test waits for the device) gives the
same ``log Z`` to rounding, and both agree with the sort."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from scanmt.ops.csoftmax import BISECT_CHECK_EVERY, _logz_bisect, _logz_sort

from .cases import PROPERTY_SETTINGS


def far_rows(seed: int, rows: int, J: int, spread: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Recentred rows as csoftmax's far path makes them: the maximum capped by a small bound, the mass
    spread ``spread`` below it (``x`` in ``[-B, B]``), bounds in ``[0, 1]`` whose sum exceeds 1."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, J, generator=g, dtype=torch.float64) * spread
    x[:, 0] = x.amax(-1) + spread * 2  # the maximum, far above the rest
    u = torch.rand(rows, J, generator=g, dtype=torch.float64) * 0.9 + 0.1
    u[:, 0] = 1e-3  # ... and capped
    B = x.abs().amax(-1, keepdim=True) * 2 + 64.0
    return x, B, u


@pytest.mark.parametrize("spread", [0.5, 4.0, 40.0])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_testing_every_few_halvings_gives_the_same_log_z(seed, spread):
    x, B, u = far_rows(seed, rows=64, J=17, spread=spread)
    t1 = _logz_bisect(x, B, u, check_every=1)
    t8 = _logz_bisect(x, B, u, check_every=BISECT_CHECK_EVERY)
    scale = torch.maximum(t1.abs(), torch.ones_like(t1))
    assert ((t8 - t1).abs() <= 8 * torch.finfo(x.dtype).eps * scale).all()
    # the distributions they give agree to rounding, and with the sort's
    p1, p8 = torch.minimum(torch.exp(x - t1), u), torch.minimum(torch.exp(x - t8), u)
    ps = torch.minimum(torch.exp(x - _logz_sort(x, u)), u)
    torch.testing.assert_close(p8, p1, atol=1e-12, rtol=0)
    torch.testing.assert_close(p8, ps, atol=1e-10, rtol=0)
    torch.testing.assert_close(p8.sum(-1), torch.ones(64, dtype=x.dtype), atol=1e-10, rtol=0)


@PROPERTY_SETTINGS
@given(seed=st.integers(0, 2**31 - 1), J=st.integers(2, 40), every=st.integers(1, 16),
       spread=st.floats(0.1, 100.0))
def test_any_test_interval_gives_the_same_log_z(seed, J, every, spread):
    x, B, u = far_rows(seed, rows=8, J=J, spread=spread)
    t1 = _logz_bisect(x, B, u, check_every=1)
    tk = _logz_bisect(x, B, u, check_every=every)
    scale = torch.maximum(t1.abs(), torch.ones_like(t1))
    assert ((tk - t1).abs() <= 8 * torch.finfo(x.dtype).eps * scale).all()


def test_the_cpu_tests_every_halving_and_the_spaced_interval_reads_less(monkeypatch):
    """By default a CPU tensor's bracket is tested after every halving (so CPU results are those of
    before), one host read each; the interval used off the CPU, BISECT_CHECK_EVERY, reads about that
    many times less often.  Counted by the host reads the loop makes."""
    x, B, u = far_rows(0, rows=4, J=9, spread=4.0)
    reads = []
    original = torch.Tensor.__bool__

    def counting(self):
        reads.append(1)
        return original(self)

    monkeypatch.setattr(torch.Tensor, "__bool__", counting)
    _logz_bisect(x, B, u)
    on_cpu = len(reads)
    reads.clear()
    _logz_bisect(x, B, u, check_every=BISECT_CHECK_EVERY)
    spaced = len(reads)
    assert on_cpu > 20  # one read per halving: a float64 bracket needs dozens
    assert spaced <= on_cpu // BISECT_CHECK_EVERY + 1
    assert BISECT_CHECK_EVERY > 1
