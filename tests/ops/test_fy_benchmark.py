"""``benchmarks/ops.py --ops fy`` (issue 29, item 6): the check that the Fenchel-Young losses of the sparse
output layer agree with the ``entmax`` package's (``SparsemaxLoss``, ``Entmax15Loss``, ``EntmaxBisectLoss``)
before they are timed, run here at a tiny size so that CI exercises it; that it fails on a loss that differs;
and the command line in ``--quick`` mode on tiny inputs."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from scanmt.model.output import output_loss
from tests.conftest import load_module

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "ops.py"


@pytest.fixture(scope="module")
def bench():
    pytest.importorskip("entmax", reason="the entmax package is not installed (the 'test' or 'bench' extra)")
    return load_module(BENCH)


@pytest.mark.parametrize("V", [300, 1500])  # 1500: long enough rows for the partial sort of entmax15 / entmax_bisect
@pytest.mark.parametrize("alpha", [1.5, 1.3])
def test_fy_check_agrees_with_entmax_losses(bench, V, alpha):
    z, y = bench.fy_inputs(48, V, seed=3)
    assert (y == 0).any() and (y != 0).any()  # padding included: both losses must ignore it
    res = bench.fy_check(z, y, bench.fy_pairs(alpha))
    assert [r["name"] for r in res] == ["FY sparsemax", "FY entmax15", f"FY entmax a={alpha:g}"]
    for r in res:
        assert r["dgrad"] <= bench.FY_GRAD_ATOL
        assert r["dloss"] <= bench.FY_LOSS_RTOL * abs(r["ref_loss"])
        assert r["loss"] > 0  # a sum of non-negative losses, not trivially zero


def test_fy_check_fails_on_a_loss_that_differs(bench):
    z, y = bench.fy_inputs(16, 200, seed=4)
    name, fn, ref, ref_fn = bench.fy_pairs(1.5)[1]
    L = bench.entmax.losses
    wrong = [
        # label smoothing on our side: another target
        (name, lambda z, y: output_loss(z, y, "entmax15", 1.5, 0.1), ref, ref_fn),
        # the package's default reduction (the mean over non-ignored targets)
        (name, fn, ref, L.Entmax15Loss(ignore_index=0)),
        # padding not ignored by the package
        (name, fn, ref, L.Entmax15Loss(reduction="sum")),
        # another alpha
        (name, lambda z, y: output_loss(z, y, "entmax", 1.6), ref, ref_fn),
    ]
    for pair in wrong:
        with pytest.raises(AssertionError, match="FY entmax15 vs entmax.Entmax15Loss"):
            bench.fy_check(z, y, [pair])


def test_fy_command_line_quick(bench, capsys):
    threads = torch.get_num_threads()
    try:
        assert bench.main(["--ops", "fy", "--quick", "--rows", "16", "--vocab", "64", "1100", "--reps", "1"]) == 0
    finally:
        torch.set_num_threads(threads)
    out = capsys.readouterr().out
    assert "| 16 x 1100 | FY entmax15 |" in out
    for line in ("FY sparsemax loss fwd+bwd at V=64 = ", "FY entmax a=1.5 loss fwd+bwd at V=1100 = "):
        assert line in out
