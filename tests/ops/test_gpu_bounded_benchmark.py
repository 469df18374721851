"""``benchmarks/gpu_bounded.py`` on the CPU (its torch backend, small sizes): every section runs and prints
its table, so the GPU run it is written for finds no error in the script itself."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.conftest import load_module

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_bounded.py"


def test_benchmark_runs_end_to_end_on_the_cpu(monkeypatch, capsys) -> None:
    bench = load_module(BENCH)
    real = bench.synthetic_batch
    # 4 sentences: the update sections' code at a fraction of their CPU time
    monkeypatch.setattr(bench, "synthetic_batch", lambda device, sentences=64, seed=0: real(device, 4, seed))
    monkeypatch.setattr(sys, "argv", ["gpu_bounded.py", "--device", "cpu", "--repeats", "1", "--budget", "0"])
    bench.main()
    out = capsys.readouterr().out
    assert "backends torch" in out
    for title in ("## 1. bounded_recurrence", "## 2. transformer-small", "## 3. cpu-small", "## 4. profile",
                  "### transformer-small, fp32", "### cpu-small, fp32"):
        assert title in out, out
    assert out.count("| csoftmax, ") == 2 and out.count("| csparsemax, ") == 2
    # on the CPU one update row per system (the torch backend alone), each timed against softmax
    assert out.count("| fp32 | ") == len(bench.TRANSFORMER_SYSTEMS) + len(bench.LSTM_SYSTEMS), out
    assert out.count("x |") >= len(bench.TRANSFORMER_SYSTEMS) + len(bench.LSTM_SYSTEMS), out
