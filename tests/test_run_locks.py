"""A second command writing into a folder that a live run writes into fails naming that run (issue 27, item 1).

The lock is ``FOLDER/.lock`` (:func:`scanmt.processes.lock_folder`): an ``flock`` that the kernel releases when
its process dies, holding the PID and command line of the process that took it.
"""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from scanmt.cli.main import main
from scanmt.errors import BusyError
from tests.conftest import REPO, tiny_config
from tests.process_helpers import lock_held_elsewhere, stop, wait_for


def _train_rows(run: Path) -> list[int]:
    """The steps of the ``train/loss`` rows of ``run/metrics.csv``."""
    try:
        with open(run / "metrics.csv", newline="") as fh:
            return [int(r["step"]) for r in csv.DictReader(fh) if r["name"] == "train/loss"]
    except (OSError, ValueError, KeyError):
        return []


def _long_run_config(small_data_dir: Path, path: Path) -> Path:
    """A tiny model that trains until it is stopped, logging every update to ``metrics.csv``."""
    tiny_config(small_data_dir, train__max_steps=100000, train__epochs=1000, train__log_every=1,
                train__checkpoint_every=100000, train__valid_every=100000, train__logger="csv").save_yaml(path)
    return path


def test_second_train_into_a_running_out_fails_naming_the_first(small_data_dir, tmp_path, capsys):
    """Two `train` runs into the same --out both exited 0; metrics.csv interleaved them (step 5 twice)."""
    config, run = _long_run_config(small_data_dir, tmp_path / "c.yaml"), tmp_path / "run"
    log = open(tmp_path / "first.log", "wb")
    first = subprocess.Popen([sys.executable, "-m", "scanmt", "train", "--config", str(config), "--out", str(run)],
                             stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
    try:
        wait_for(lambda: len(_train_rows(run)) >= 2, 120, "the first run's first updates")
        code = main(["train", "--config", str(config), "--out", str(run), "--set", "train.max_steps=3"])
        err = capsys.readouterr().err
        assert code == 2, err
        assert f"--out {run}: process {first.pid} (" in err and f"-m scanmt train --config {config}" in err
        assert "is writing into this folder; wait for it to end or stop it" in err
        assert len(err.strip().splitlines()) == 1, err
        assert first.poll() is None, "the first run was disturbed"
        steps = _train_rows(run)
        assert len(steps) == len(set(steps)), f"metrics.csv has a step twice: {steps}"
    finally:
        stop(first)
        log.close()


def test_predictor_training_into_a_locked_folder_fails_naming_the_holder(small_data_dir, tmp_path, capsys):
    out = tmp_path / "predictor"
    with lock_held_elsewhere(out) as holder:
        assert main(["fertility", "--data", str(small_data_dir), "--train-predictor", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"--out {out}: process {holder.pid} (a test holding the lock) is writing into this folder" in err
    assert sorted(p.name for p in out.iterdir()) == [".lock"]


def test_experiment_run_into_a_locked_out_names_the_holder(small_data_dir, tmp_path, capsys):
    out = tmp_path / "grid"
    with lock_held_elsewhere(out) as holder:
        code = main(["experiment", "run", str(REPO / "experiments" / "tiny.yaml"), "--data", str(small_data_dir),
                     "--out", str(out), "--preset", "cpu-small", "--set", "train.max_steps=2"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"--out {out}: process {holder.pid} (a test holding the lock) is writing into this folder" in err


def test_demo_rerun_refuses_a_trainer_still_writing_into_its_folder(small_data_dir, tmp_path):
    """A demo killed before this fix left its trainers running; the rerun trained into the same folders."""
    from scanmt.cli.demo import _train_all

    out = tmp_path / "demo"
    config = _long_run_config(small_data_dir, tmp_path / "c.yaml")
    log = open(tmp_path / "left.log", "wb")
    left = subprocess.Popen([sys.executable, "-m", "scanmt", "train", "--config", str(config),
                             "--out", str(out / "softmax")], stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
    try:
        wait_for(lambda: len(_train_rows(out / "softmax")) >= 1, 120, "the trainer left running")
        configs = {name: tiny_config(small_data_dir, train__max_steps=2) for name in ("softmax", "sparsemax")}
        with pytest.raises(BusyError, match=rf"the demo's run folder {out / 'softmax'}: process {left.pid} \("):
            _train_all(configs, out, 2)
        assert not (out / "sparsemax").exists(), "a trainer was started before the live one was noticed"
    finally:
        stop(left)
        log.close()


def test_a_lock_file_alone_does_not_make_a_folder_foreign(tmp_path):
    """A run killed right after taking its lock leaves only ``.lock``; the folder is still usable."""
    from scanmt.io import check_output_dir

    (tmp_path / "out").mkdir()
    (tmp_path / "out" / ".lock").write_text("12345\nscanmt demo\n")
    assert check_output_dir(tmp_path / "out", ours=lambda d: False, holds="a demo") == tmp_path / "out"
