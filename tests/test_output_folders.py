"""Every command that writes a folder refuses one it did not make (issue 16, item 1's audit)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scanmt.cli.main import main
from scanmt.training.trainer import Trainer
from tests.conftest import REPO, tiny_config


@pytest.fixture()
def foreign(tmp_path) -> Path:
    d = tmp_path / "mine"
    d.mkdir()
    (d / "notes.txt").write_text("keep\n")
    return d


def _config(small_data_dir, tmp_path, **kw) -> Path:
    path = tmp_path / "c.yaml"
    tiny_config(small_data_dir, train__max_steps=2, **kw).save_yaml(path)
    return path


def test_train_refuses_to_overwrite_a_hand_written_config(small_data_dir, tmp_path, capsys):
    path = _config(small_data_dir, tmp_path)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "config.yaml").write_text("# my experiment, with comments\ntrain: {lr: 0.1}\n")
    assert main(["train", "--config", str(path), "--out", str(mine)]) == 2
    err = capsys.readouterr().err
    assert f"--out {mine}: holds a config.yaml that no scanmt run wrote (no last.pt); refusing to overwrite it" in err
    assert (mine / "config.yaml").read_text().startswith("# my experiment")


def test_train_out_naming_a_file_fails_before_loading_data(small_data_dir, tmp_path, capsys):
    f = tmp_path / "run"
    f.write_text("a file\n")
    assert main(["train", "--config", str(_config(small_data_dir, tmp_path)), "--out", str(f)]) == 2
    assert f"--out {f}: is a file, not a folder" in capsys.readouterr().err


def test_train_writes_beside_other_files_and_restarts_a_run_killed_before_its_checkpoint(small_data_dir, tmp_path,
                                                                                         foreign):
    cfg = tiny_config(small_data_dir, train__max_steps=2, train__logger="csv")
    cfg.save_yaml(foreign / "config.yaml")  # as a run killed before its first checkpoint leaves them
    (foreign / "metrics.csv").write_text("step,name,value\n1,train/loss,5.0\n")
    Trainer(cfg, foreign).train()
    assert (foreign / "last.pt").exists() and (foreign / "notes.txt").read_text() == "keep\n"


def test_predictor_training_refuses_a_foreign_metrics_file(small_data_dir, tmp_path, capsys):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "metrics.csv").write_text("date,weight\n2024-01-01,70\n")
    assert main(["fertility", "--data", str(small_data_dir), "--train-predictor", str(mine)]) == 2
    assert "holds a metrics.csv that no scanmt run wrote" in capsys.readouterr().err
    assert (mine / "metrics.csv").read_text().startswith("date,weight")


@pytest.mark.parametrize("argv", [
    ["align", "--data", "{data}", "--out", "{out}"],
    ["experiment", "run", str(REPO / "experiments" / "tiny.yaml"), "--out", "{out}", "--dry-run"],
    ["demo", "--out", "{out}", "--minutes", "0.1"],
])
def test_commands_refuse_a_folder_they_did_not_make(small_data_dir, foreign, capsys, argv):
    argv = [a.format(data=small_data_dir, out=foreign) for a in argv]
    assert main(argv) == 2
    assert f"--out {foreign}: the folder is not empty and does not hold" in capsys.readouterr().err
    assert sorted(p.name for p in foreign.iterdir()) == ["notes.txt"]


def test_plot_attention_out_naming_a_folder_is_an_error(tmp_path, foreign, capsys):
    npz = tmp_path / "a.npz"
    npz.write_bytes(b"")
    assert main(["plot-attention", "--attention", str(npz), "--index", "0", "--out", str(foreign)]) == 2
    assert f"--out {foreign}: is a folder" in capsys.readouterr().err
