"""train.keep_checkpoints keeps the last N validations' weights; `scanmt average` averages them into a
checkpoint that translates."""

from __future__ import annotations

import pytest
import torch

from scanmt import api
from scanmt.cli.main import main
from scanmt.decoding.translator import Translator
from scanmt.errors import ConfigError
from scanmt.model.checkpoint import Checkpoint
from scanmt.training.trainer import Trainer
from tests.conftest import tiny_config


def test_keeps_the_last_n_validations_and_averages_them(small_data_dir, tmp_path, capsys):
    run = tmp_path / "run"
    cfg = tiny_config(small_data_dir, train__max_steps=12, train__valid_every=4, train__keep_checkpoints=2)
    Trainer(cfg, run).train()
    kept = sorted(p.name for p in (run / "checkpoints").iterdir())
    assert kept == ["step12.pt", "step8.pt"]  # the validations at 4, 8 and 12: the newest two
    last = Checkpoint.load(run / "last.pt")
    k12, k8 = Checkpoint.load(run / "checkpoints/step12.pt"), Checkpoint.load(run / "checkpoints/step8.pt")
    assert k12.optimizer is None and k12.rng is None and k12.progress["step"] == 12
    for name, w in last.weights.items():  # the run ended at its last validation
        assert torch.equal(k12.weights[name], w), name

    assert main(["average", "--run", str(run), "--out", str(tmp_path / "avg.pt")]) == 0
    printed = capsys.readouterr().out
    assert "averaged 2 checkpoints (steps 8, 12)" in printed
    avg = Checkpoint.load(tmp_path / "avg.pt")
    changed = 0
    for name, w in avg.weights.items():
        torch.testing.assert_close(w, (k8.weights[name] + k12.weights[name]) / 2, msg=name)
        changed += not torch.equal(k8.weights[name], k12.weights[name])
    assert changed > 0, "steps 8 and 12 have the same weights: the test would not see an average"
    out = Translator.from_checkpoint(tmp_path / "avg.pt").translate_lines(["Ein Hund läuft."], beam=3)
    assert len(out) == 1 and out[0].text.strip()

    # --last 1 of a run, and the files themselves, are the same operation
    with pytest.raises(ConfigError, match="at least 2 checkpoints, got 1"):
        api.average(api.AverageRequest(run=run, last=1, out=tmp_path / "one.pt"))
    res = api.average(api.AverageRequest(models=(str(run / "checkpoints/step8.pt"), str(run / "checkpoints/step12.pt")),
                                         out=tmp_path / "avg2.pt"))
    assert [s for _, s in res.sources] == [8, 12]
    for name, w in Checkpoint.load(tmp_path / "avg2.pt").weights.items():
        assert torch.equal(w, avg.weights[name]), name


def test_average_requests_are_checked(tmp_path):
    with pytest.raises(ConfigError, match="--models FILE FILE ... or as --run DIR, not both"):
        api.AverageRequest(out=tmp_path / "a.pt")
    with pytest.raises(ConfigError, match="not both"):
        api.AverageRequest(models=("a.pt", "b.pt"), run=tmp_path, out=tmp_path / "a.pt")
    with pytest.raises(ConfigError, match="--last N counts the kept checkpoints of --run"):
        api.AverageRequest(models=("a.pt", "b.pt"), last=2, out=tmp_path / "a.pt")
    with pytest.raises(ConfigError, match=r"--last must be >= 0 \(0 = all kept\), got -1"):
        api.AverageRequest(run=tmp_path, last=-1, out=tmp_path / "a.pt")
    with pytest.raises(ConfigError, match="no kept checkpoints in .*train.keep_checkpoints=N"):
        api.average(api.AverageRequest(run=tmp_path, out=tmp_path / "a.pt"))
    (tmp_path / "checkpoints").mkdir()
    for s in (1, 2):
        (tmp_path / "checkpoints" / f"step{s}.pt").write_bytes(b"")
    with pytest.raises(ConfigError, match=r"--last 3: .* keeps only 2 checkpoints"):
        api.average(api.AverageRequest(run=tmp_path, last=3, out=tmp_path / "a.pt"))
    with pytest.raises(Exception, match="is the averaged checkpoint 1 file"):
        api.average(api.AverageRequest(run=tmp_path, out=tmp_path / "checkpoints" / "step1.pt"))


def test_bad_averages_are_one_line_errors(small_data_dir, tmp_path, capsys):
    """One checkpoint, a file that is not a checkpoint, checkpoints of two different models, and an --out that
    names an input: one line each, exit status 2, nothing written."""
    a, b = tmp_path / "a", tmp_path / "b"
    Trainer(tiny_config(small_data_dir, train__max_steps=2), a).train()
    Trainer(tiny_config(small_data_dir, train__max_steps=2, model__hidden_size=48), b).train()
    junk = tmp_path / "junk.pt"
    junk.write_text("not a checkpoint")
    out = tmp_path / "avg.pt"
    capsys.readouterr()  # the trainings' progress bars
    cases = [
        (["--models", str(a / "last.pt")], "averaging needs at least 2 checkpoints, got 1"),
        (["--models", str(a / "last.pt"), str(junk)], f"{junk}: not a readable checkpoint"),
        (["--models", str(a / "last.pt"), str(b / "last.pt")],
         f"{b / 'last.pt'} and {a / 'last.pt'} are different models (their model config sections differ: "
         "model.hidden_size = 48 against 32)"),
        (["--models", str(a / "last.pt"), str(a / "best.pt"), "--out", str(a / "best.pt")],
         "is the averaged checkpoint 2 file: writing it would replace the input"),
    ]
    for argv, message in cases:
        full = ["average", *argv] + ([] if "--out" in argv else ["--out", str(out)])
        assert main(full) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("scanmt average: error: ") and message in err[0], (argv, err)
    assert not out.exists()
