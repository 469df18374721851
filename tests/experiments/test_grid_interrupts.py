"""``scanmt experiment run`` stopped by a terminal's Ctrl-C saves the training it stops (issue 52); SIGTERM
and ``kill -9`` of the grid still stop its worker, which saves.

A terminal sends Ctrl-C to its whole foreground process group.  The grid's workers shared the grid's
group, so each got SIGINT directly and then the grid's SIGTERM (``_Pool.stop_all``), which the training
loop took as a second interrupt: it quit at once, losing the updates since the last checkpoint.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import torch

from tests.conftest import REPO
from tests.process_helpers import TERMINAL_JOB, alive, children, stop, wait_for

#: a one-system grid that trains (on and on) right after the shared steps
GRID = """
name: endless
systems:
  - name: softmax
    set: [model.attention.transform=softmax]
align: {samplers: 1, rel_iterations: 0.2, eflomal_model: 1}
"""
SETS = ["train.threads=1", "model.emb_size=32", "model.hidden_size=32", "data.batch_tokens=600",
        "data.valid_limit=30", "train.max_steps=100000", "train.epochs=1000", "train.log_every=1",
        "train.checkpoint_every=100000", "train.valid_every=100000", "train.logger=csv"]


def _logged_steps(run) -> list[int]:
    """The steps the run's training has logged in ``metrics.csv`` (its first column)."""
    try:
        lines = (run / "metrics.csv").read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    return [int(ln.split(",")[0]) for ln in lines[1:] if ln.split(",")[0].isdigit()]


def _start_grid(data, tmp_path) -> tuple[subprocess.Popen, list[int], Path]:
    """``experiment run`` of :data:`GRID` in a process group of its own (a terminal's foreground job), once
    its worker has logged an update; the process, its worker's PIDs, and the run's folder."""
    grid, out = tmp_path / "endless.yaml", tmp_path / "grid"
    grid.write_text(GRID, encoding="utf-8")
    run = out / "runs" / "softmax" / "seed1"
    argv = [sys.executable, "-m", "scanmt", "experiment", "run", str(grid), "--data", str(data),
            "--out", str(out), "--preset", "cpu-small", "--extra-splits"]
    for s in SETS:
        argv += ["--set", s]
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            **TERMINAL_JOB)
    try:
        # a logged update (log_every=1): the training loop's handlers are installed, there is a step to save
        wait_for(lambda: _logged_steps(run) or proc.poll() is not None, 300, "the grid's worker to train")
        assert proc.poll() is None, proc.communicate()[0]
        workers = children(proc.pid, "scanmt.experiments.runner")
        assert len(workers) == 1, workers
    except BaseException:
        stop(proc)
        raise
    return proc, workers, run


def _saved_every_update(run: Path) -> int:
    """The step of the run's ``last.pt``, checked to be the last one it logged (no update lost)."""
    log = (run / "log.txt").read_text(encoding="utf-8")
    assert "no update lost" in log and "are lost" not in log, log[-2000:]
    step = int(torch.load(run / "last.pt", map_location="cpu", weights_only=False)["progress"]["step"])
    assert step == _logged_steps(run)[-1], (step, _logged_steps(run)[-3:])
    return step


def _stop_grid(data, tmp_path, signal_it) -> tuple[int, str, Path]:
    """The grid's exit status, output and run folder after ``signal_it(grid)`` while its worker trains."""
    proc, _, run = _start_grid(data, tmp_path)
    try:
        signal_it(proc)
        output, _ = proc.communicate(timeout=120)
    finally:
        stop(proc)
    return proc.returncode, output, run


def test_ctrl_c_in_a_terminal_stops_the_worker_once_and_it_saves(small_data_dir, tmp_path):
    """Ctrl-C goes to the terminal's whole foreground process group."""
    code, output, run = _stop_grid(small_data_dir, tmp_path, lambda proc: os.killpg(proc.pid, signal.SIGINT))
    assert code == 130, output
    step = _saved_every_update(run)
    assert (f"softmax/seed1: interrupted: saved {run / 'last.pt'} at update {step}; "
            "rerun the same command to continue it" in output), output


def test_sigterm_to_the_grid_stops_the_worker_which_saves(small_data_dir, tmp_path):
    code, output, run = _stop_grid(small_data_dir, tmp_path, lambda proc: proc.send_signal(signal.SIGTERM))
    assert code == 143, output
    step = _saved_every_update(run)
    assert f"softmax/seed1: interrupted: saved {run / 'last.pt'} at update {step}; " in output, output


def test_kill_9_of_the_grid_takes_its_worker_along_and_it_saves(small_data_dir, tmp_path):
    """The worker, in a process group of its own, still dies with the grid (``PR_SET_PDEATHSIG``)."""
    proc, workers, run = _start_grid(small_data_dir, tmp_path)
    try:
        proc.kill()
        proc.wait(timeout=30)
        wait_for(lambda: not alive(workers[0]), 60, "the worker to stop with the grid")
    finally:
        stop(proc)
        if alive(workers[0]):
            os.kill(workers[0], signal.SIGKILL)
    _saved_every_update(run)
