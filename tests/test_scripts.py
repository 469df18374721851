"""The scripts in ``scripts/``: the long-running queues are read by bash step by step, so a syntax error in a
late step would only show hours into a grid; every shell script must parse and every Python one compile."""

from __future__ import annotations

import os
import py_compile
import subprocess
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


@pytest.mark.parametrize("script", sorted(SCRIPTS.glob("*.sh")), ids=lambda p: p.name)
def test_shell_script_parses(script: Path) -> None:
    done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("script", sorted(SCRIPTS.glob("*.py")), ids=lambda p: p.name)
def test_python_script_compiles(script: Path, tmp_path: Path) -> None:
    py_compile.compile(str(script), cfile=str(tmp_path / "out.pyc"), doraise=True)


def test_continue_kftt_refuses_an_unfinished_run(tmp_path: Path) -> None:
    """Continuing a grid run that has not finished names the run and stops before anything trains."""
    grid = tmp_path / "kftt"
    for system in ("softmax", "csparsemax"):
        (grid / "runs" / system / "seed1").mkdir(parents=True)
    env = dict(os.environ, GRID=str(grid), PYTHON="/bin/false")
    done = subprocess.run(["bash", str(SCRIPTS / "continue-kftt.sh")], capture_output=True, text=True, env=env)
    assert done.returncode == 1
    assert "softmax failed" in done.stderr and "csparsemax failed" in done.stderr
    for system in ("softmax", "csparsemax"):
        out = (tmp_path / "kftt-longer" / f"{system}.out").read_text()
        assert f"{grid}/runs/{system}/seed1 has not finished" in out
        assert not (tmp_path / "kftt-longer" / system).exists()


def test_sink_bias_moves_the_attention_the_bounds_allow_off_the_sink(monkeypatch) -> None:
    """scripts/sink_bias.py: csparsemax with the sink's score far above the words' puts all attention there;
    lowered by B = 50 the sink keeps only what the bounds force on it (the words' fertility left, 0.7, is less
    than 1)."""
    import importlib.util

    import torch

    from scanmt.model.bounds import BoundedTransform

    spec = importlib.util.spec_from_file_location("sink_bias", SCRIPTS / "sink_bias.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(BoundedTransform, "recurrence", BoundedTransform.recurrence)  # undone after the test
    attention = BoundedTransform("csparsemax")
    z = torch.tensor([[0.0, 0.5, 5.0]], dtype=torch.float64)  # two words, the sink last
    mask = torch.ones(1, 3, dtype=torch.bool)
    fertility = torch.tensor([[0.3, 0.4, float("inf")]], dtype=torch.float64)
    before = attention.step(z, mask, fertility, torch.zeros_like(z))
    assert torch.allclose(before, torch.tensor([[0.0, 0.0, 1.0]], dtype=torch.float64))
    module.lower_the_sink(50.0)
    after = attention.step(z, mask, fertility, torch.zeros_like(z))
    assert torch.allclose(after, torch.tensor([[0.3, 0.4, 0.3]], dtype=torch.float64))
    steps = attention.recurrence(z.expand(2, 3).unsqueeze(0), mask, fertility, torch.zeros_like(z))[0]
    assert torch.allclose(steps[0, 1], torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64))  # bounds spent: forced
