"""Issue 27 items 13 and 16: a full disk, and files that are not UTF-8, are one line naming the file.

A full disk is simulated by making the writer fail as it does then (an ``OSError(ENOSPC)`` with no
file name from ``write``/``fsync``, torch's ``RuntimeError``, sentencepiece's ``RuntimeError``).
"""

from __future__ import annotations

import errno
import os

import pytest

from scanmt.cli.main import main
from scanmt.config import Config
from scanmt.errors import DataError

ENFORCE = ("[enforce fail at inline_container.cc:672] . PytorchStreamWriter failed writing file data/0: "
           "file write failed")


def _no_space(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_failed_write_names_the_file(tmp_path, monkeypatch):
    """Item 13: "No space left on device" used to come without the file's name."""
    from scanmt.io import write_lines

    monkeypatch.setattr(os, "fsync", _no_space)
    with pytest.raises(OSError) as exc:
        write_lines(tmp_path / "out.txt", ["a"])
    assert exc.value.filename == str(tmp_path / "out.txt") and exc.value.errno == errno.ENOSPC
    assert not list(tmp_path.iterdir())  # no temporary file left


def test_torch_save_failing_is_an_os_error_naming_the_checkpoint(tmp_path, monkeypatch):
    from scanmt.model import checkpoint

    def fail(*args, **kwargs):
        raise RuntimeError(ENFORCE)

    monkeypatch.setattr(checkpoint.torch, "save", fail)
    with pytest.raises(OSError) as exc:
        checkpoint.save_checkpoint(tmp_path / "last.pt", {"x": 1})
    assert exc.value.filename == str(tmp_path / "last.pt")
    assert "torch.save could not write the file (" in exc.value.strerror and "is the disk full?" in exc.value.strerror


def test_train_on_a_full_disk_is_one_line(small_data_dir, tmp_path, monkeypatch, capsys):
    """Item 13: ``train`` printed torch's ``RuntimeError: [enforce fail at inline_container.cc:672]``."""
    from scanmt.model import checkpoint
    from tests.conftest import tiny_config

    def fail(*args, **kwargs):
        raise RuntimeError(ENFORCE)

    monkeypatch.setattr(checkpoint.torch, "save", fail)
    tiny_config(small_data_dir, train__max_steps=2, train__checkpoint_every=1).save_yaml(tmp_path / "c.yaml")
    assert main(["train", "--config", str(tmp_path / "c.yaml"), "--out", str(tmp_path / "run")]) == 1
    err = capsys.readouterr().err
    line = next(ln for ln in err.splitlines() if "error:" in ln)
    assert "Traceback" not in err and "inline_container.cc" in line and line.endswith("run/last.pt")
    assert "scanmt train: error: torch.save could not write the file (" in line


@pytest.mark.parametrize("message", ["INTERNAL: [model_interface.cc] ParseFromArray failed", "No space left on device"])
def test_sentencepiece_failing_to_write_names_the_model_file(tmp_path, monkeypatch, message):
    """Item 13: ``prepare`` printed sentencepiece's ``RuntimeError: INTERNAL: ... ParseFromArray``."""
    from scanmt.data import subword

    def fail(**kwargs):
        raise RuntimeError(message)

    monkeypatch.setattr(subword.spm.SentencePieceTrainer, "train", fail)
    text = tmp_path / "t.txt"
    text.write_text("ein hund\n", encoding="utf-8")
    with pytest.raises(OSError) as exc:
        subword.train_subword_model([text], tmp_path / "spm", 10)
    assert exc.value.filename == str(tmp_path / "spm.model") and "sentencepiece could not write" in exc.value.strerror
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.txt"]  # the temporary folder removed


NOT_UTF8 = b"train:\n  lr: 0.5 # \xe9t\xe9\n"


def test_config_file_that_is_not_utf8_names_file_and_line(tmp_path, capsys):
    """Item 16: a non-UTF-8 config gave a ``UnicodeDecodeError``."""
    path = tmp_path / "c.yaml"
    path.write_bytes(NOT_UTF8)
    with pytest.raises(DataError, match=rf"^{path}:2: config file is not valid UTF-8 \(byte 0xe9 at offset \d+\)$"):
        Config.load(path)
    assert main(["train", "--config", str(path), "--out", str(tmp_path / "run")]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_grid_and_penalties_files_that_are_not_utf8_name_file_and_line(tmp_path):
    from scanmt.api.decode import load_penalties
    from scanmt.experiments.grid import load_grid

    grid = tmp_path / "g.yaml"
    grid.write_bytes(b"name: g\nsystems: # \xff\n")
    with pytest.raises(DataError, match=rf"^{grid}:2: grid file is not valid UTF-8"):
        load_grid(grid)
    penalties = tmp_path / "p.yaml"
    penalties.write_bytes(b"length_alpha: 0.2 # \xff\n")
    with pytest.raises(DataError, match=rf"^{penalties}:1: penalties file is not valid UTF-8"):
        load_penalties(penalties)


def test_experiment_worker_reports_a_full_disk_in_one_line(tmp_path, monkeypatch, capsys):
    """Item 13: ``experiment run`` repeated torch's traceback in the run's log; now one line naming the file."""
    from contextlib import nullcontext

    from scanmt.experiments import spec as run_spec, worker

    spec_file = tmp_path / "spec.json"
    spec_file.write_text("{}", encoding="utf-8")
    spec = type("Spec", (), {"key": "softmax/seed1", "dir": tmp_path})()
    monkeypatch.setattr(worker, "die_with_parent", lambda parent=None: None)
    monkeypatch.setattr(run_spec.RunSpec, "from_dict", staticmethod(lambda d: spec))
    monkeypatch.setattr(worker, "try_lock", lambda *a, **k: nullcontext())

    def full(*args):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "last.pt"))

    monkeypatch.setattr(worker, "run_one", full)
    assert worker.worker_main([str(spec_file), "1"]) == 1
    err = capsys.readouterr().err
    assert err == f"softmax/seed1: error: No space left on device: {tmp_path / 'last.pt'}\n"
