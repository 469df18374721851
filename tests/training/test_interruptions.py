"""Interrupting training: the loss window across a resume, Ctrl-C, the first-run kernel build (issue 16, item 8)."""

from __future__ import annotations

import csv
import os
import signal
import time

import pytest
import torch

from scanmt.model.checkpoint import Checkpoint, load_checkpoint
from scanmt.training.trainer import Trainer
from tests.conftest import tiny_config


def _logged(run, name: str) -> dict[int, float]:
    with open(run / "metrics.csv", newline="") as fh:
        return {int(r["step"]): float(r["value"]) for r in csv.DictReader(fh) if r["name"] == name}


def test_logged_loss_after_resume_averages_the_same_window(small_data_dir, tmp_path):
    """The first loss logged after a resume averaged only the updates made since the resume."""
    cfg = tiny_config(small_data_dir, train__max_steps=10, train__log_every=5, train__checkpoint_every=7,
                      train__logger="csv")
    Trainer(cfg, tmp_path / "full").train()
    cfg.train.max_steps = 7
    Trainer(cfg, tmp_path / "killed").train()
    before = Checkpoint.load(tmp_path / "killed" / "last.pt").progress["elapsed"]
    cfg.train.max_steps = 10
    Trainer(cfg, tmp_path / "killed", resume=True).train()
    full, resumed = _logged(tmp_path / "full", "train/loss"), _logged(tmp_path / "killed", "train/loss")
    assert sorted(full) == sorted(resumed) == [5, 10]
    assert resumed[10] == full[10]
    # the run's wall time so far, for `experiment status`'s pace: it goes on from the checkpoint's
    elapsed = _logged(tmp_path / "killed", "train/elapsed_s")
    assert sorted(elapsed) == [5, 10] and 0 < elapsed[5] <= before < elapsed[10]


def _interrupt_at(trainer: Trainer, step: int, signals: int) -> None:
    """Send ``signals`` SIGINTs to this process from inside the forward pass of update ``step``."""
    loss = trainer.task.loss
    calls = {"n": 0}

    def with_ctrl_c(net, batch):
        calls["n"] += 1
        if calls["n"] == step:
            for _ in range(signals):
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.01)  # the handler runs between bytecodes of the main thread
        return loss(net, batch)

    trainer.task.loss = with_ctrl_c


def _params(model) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_ctrl_c_saves_a_checkpoint_and_the_run_resumes_exactly(small_data_dir, tmp_path, caplog):
    cfg = tiny_config(small_data_dir, train__max_steps=8, train__checkpoint_every=100)
    full = Trainer(cfg, tmp_path / "full")
    full.train()
    run = tmp_path / "run"
    trainer = Trainer(cfg, run)
    _interrupt_at(trainer, 5, signals=1)
    before = signal.getsignal(signal.SIGINT)  # SIG_IGN where the suite runs in the background (nohup, &)
    with caplog.at_level("WARNING", logger="scanmt.train"), pytest.raises(KeyboardInterrupt):
        trainer.train()
    assert load_checkpoint(run / "last.pt")["progress"]["step"] == 5
    assert f"interrupted (Ctrl-C) at step 5: saved {run / 'last.pt'}, no update lost" in caplog.text
    assert signal.getsignal(signal.SIGINT) is before, "the handler in force before training was not put back"
    resumed = Trainer(cfg, run, resume=True)
    resumed.train()
    a, b = _params(full.model), _params(resumed.model)
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=0, msg=f"parameter {k} differs after Ctrl-C + resume")


def test_second_ctrl_c_quits_at_once_and_says_what_is_lost(small_data_dir, tmp_path, caplog):
    cfg = tiny_config(small_data_dir, train__max_steps=20, train__checkpoint_every=4)
    trainer = Trainer(cfg, tmp_path / "run")
    _interrupt_at(trainer, 7, signals=2)
    with caplog.at_level("WARNING", logger="scanmt.train"), pytest.raises(KeyboardInterrupt):
        trainer.train()
    assert "press Ctrl-C again to quit at once (losing the 2 update(s) since the last checkpoint)" in caplog.text
    assert (f"interrupted at step 6: the 2 update(s) since the last checkpoint ({tmp_path / 'run' / 'last.pt'}, "
            "step 4) are lost") in caplog.text
    assert load_checkpoint(tmp_path / "run" / "last.pt")["progress"]["step"] == 4


def test_first_run_kernel_build_is_announced_and_not_training_time(small_data_dir, tmp_path, monkeypatch, caplog):
    """The first-run build of the compiled kernels (about 47 s) ran silently inside the first update."""
    from torch.utils import cpp_extension

    from scanmt.ops import _native

    build_seconds = 4.0

    def slow_failing_build(**kwargs):
        time.sleep(build_seconds)
        raise RuntimeError("no compiler in this test")

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))  # nothing built there yet
    monkeypatch.setattr(cpp_extension, "load", slow_failing_build)
    monkeypatch.setattr(_native, "_tried", False)
    monkeypatch.setattr(_native, "_module", None)
    monkeypatch.setattr(_native, "_info", {"available": False, "reason": "not loaded yet"})
    cfg = tiny_config(small_data_dir, train__max_steps=2, model__attention__transform="csoftmax",
                      model__attention__fertility__strategy="constant")
    with caplog.at_level("INFO"):
        progress = Trainer(cfg, tmp_path / "run").train()
    assert progress.elapsed < build_seconds, f"training time {progress.elapsed:.1f} s includes the kernel build"
    assert "compiling the native CPU kernels of sparsemax, csoftmax and csparsemax" in caplog.text


def test_sigterm_saves_a_checkpoint_and_says_how_to_resume(small_data_dir, tmp_path):
    """SIGTERM (timeout, Slurm, docker stop) ended `train` with status 143, no message, and no checkpoint."""
    import subprocess
    import sys

    from tests.conftest import REPO
    from tests.process_helpers import stop, wait_for

    config, run = tmp_path / "c.yaml", tmp_path / "run"
    cfg = tiny_config(small_data_dir, train__max_steps=100000, train__epochs=1000, train__log_every=1,
                      train__checkpoint_every=100000, train__valid_every=100000, train__logger="csv")
    cfg.save_yaml(config)
    with open(tmp_path / "train.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "scanmt", "train", "--config", str(config), "--out", str(run)],
                                stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
        try:
            wait_for(lambda: (run / "metrics.csv").exists() and len(_logged(run, "train/loss")) >= 2, 120,
                     "the first updates")
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=60) == 143
        finally:
            stop(proc)
    out = (tmp_path / "train.log").read_text()
    step = load_checkpoint(run / "last.pt")["progress"]["step"]
    assert step >= 2
    assert "SIGTERM: stopping after this update and saving last.pt" in out
    assert f"interrupted (SIGTERM) at step {step}: saved {run / 'last.pt'}, no update lost; continue with --resume" in out
    assert out.rstrip().endswith("scanmt train: interrupted")
    cfg.train.max_steps = step + 1
    assert Trainer(cfg, run, resume=True).train().step == step + 1
