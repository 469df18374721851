"""``train --out`` and ``fertility --train-predictor`` write only into a folder that is new, empty, or their own
earlier output (issue 52, item 3): ``--train-predictor /`` wrote ``/best.pt``, ``/last.pt``, ``/metrics.csv`` and
``/.lock``; ``train --out ~`` wrote into a home, and so did an ``--out`` that is a link to a foreign folder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from scanmt.cli.main import main
from scanmt.training.trainer import Trainer
from tests.conftest import tiny_config

REFUSED = "the folder is not empty and does not hold a scanmt training run"


@pytest.fixture()
def home(tmp_path) -> Path:
    """A folder like a home: files and folders of other programs, no scanmt run."""
    d = tmp_path / "home"
    (d / ".config").mkdir(parents=True)
    (d / ".bashrc").write_text("export PS1='$ '\n")
    (d / "thesis.tex").write_text("years of work\n")
    return d


def _listing(d: Path) -> list[str]:
    return sorted(str(p.relative_to(d)) for p in d.rglob("*"))


def _config(small_data_dir, tmp_path) -> Path:
    path = tmp_path / "c.yaml"
    tiny_config(small_data_dir, train__max_steps=2).save_yaml(path)
    return path


def test_train_refuses_a_foreign_folder_and_a_link_to_one(small_data_dir, tmp_path, home, capsys):
    before = _listing(home)
    link = tmp_path / "link"
    link.symlink_to(home)
    config = _config(small_data_dir, tmp_path)
    for out in (home, link):
        assert main(["train", "--config", str(config), "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert f"--out {out}: {REFUSED}" in err and len(err.strip().splitlines()) == 1, err
    assert _listing(home) == before  # no .lock, no metrics.csv, nothing


def test_predictor_training_refuses_a_foreign_folder(small_data_dir, home, capsys):
    before = _listing(home)
    assert main(["fertility", "--data", str(small_data_dir), "--train-predictor", str(home)]) == 2
    err = capsys.readouterr().err
    assert f"--out {home}: {REFUSED}" in err and len(err.strip().splitlines()) == 1, err
    assert _listing(home) == before


def test_new_empty_and_own_folders_are_still_used(small_data_dir, tmp_path):
    """A new folder, an empty one, a link to an empty one, and a run to resume or to start again."""
    cfg = tiny_config(small_data_dir, train__max_steps=2)
    empty, target = tmp_path / "empty", tmp_path / "disk" / "run"
    empty.mkdir()
    target.mkdir(parents=True)
    (tmp_path / "link").symlink_to(target)
    for out in (tmp_path / "new" / "run", empty, tmp_path / "link"):
        Trainer(cfg, out).train()
        assert (out / "last.pt").is_file()
    Trainer(tiny_config(small_data_dir, train__max_steps=3), empty, resume=True).train()


def test_a_grid_run_folder_is_accepted_by_its_spec(small_data_dir, tmp_path):
    """The grid runner writes spec.json, command.txt and log.txt into OUT/runs/SYSTEM/seedK before training; the
    train line of command.txt, given by hand, trains there too.  A spec.json of another folder does not count."""
    from scanmt.experiments import planning, worker
    from tests.experiments.test_run_requests import plan

    spec = next(s for s in plan(tmp_path) if s.train is not None)
    spec.dir.mkdir(parents=True)
    planning.write_spec(spec)
    worker.write_command_file(spec, worker.device_steps(spec, "cpu"), "cpu")
    (spec.dir / "log.txt").write_text("=== train: ...\n")
    cfg = tiny_config(small_data_dir, train__max_steps=2)
    Trainer(cfg, spec.dir).train()
    assert (spec.dir / "last.pt").is_file()

    copied = tmp_path / "copied"
    copied.mkdir()
    shutil.copy(spec.dir / "spec.json", copied / "spec.json")
    with pytest.raises(Exception, match=f"--out {copied}: {REFUSED}"):
        Trainer(cfg, copied)
    assert sorted(p.name for p in copied.iterdir()) == ["spec.json"]
    json.loads((copied / "spec.json").read_text())  # untouched


def test_a_demo_trainer_writes_its_log_first_and_still_trains(small_data_dir, tmp_path):
    """The demo's trainer opens RUN/train.log before it builds its Trainer: it has locked its folder first."""
    from scanmt.cli.demo import _train_all

    out = tmp_path / "demo"
    _train_all({"softmax": tiny_config(small_data_dir, train__max_steps=2)}, out, 2)
    assert (out / "softmax" / "last.pt").is_file() and (out / "softmax" / "train.log").is_file()
