"""``train.keep_checkpoints`` removes only the checkpoints its run kept, and ``average --run`` averages only those
(issue 52, item 3): a ``checkpoints/step1.pt`` of another run in the folder was deleted; with stale higher-step
checkpoints there, pruning kept the stale ones and deleted the run's own, and ``average --run`` averaged the wrong
model while printing "averaged 2 checkpoints"."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from scanmt import api
from scanmt.cli.main import main
from scanmt.errors import ConfigError
from scanmt.model.checkpoint import Checkpoint
from scanmt.training.trainer import Trainer
from tests.conftest import tiny_config


def _cfg(data: Path, steps: int, keep: int = 2, **kw):
    return tiny_config(data, train__max_steps=steps, train__valid_every=4, train__keep_checkpoints=keep, **kw)


def _kept(run: Path) -> list[str]:
    return sorted(p.name for p in (run / "checkpoints").iterdir())


@pytest.fixture(scope="module")
def other_run(small_data_dir, tmp_path_factory) -> Path:
    """Another run (another seed) that kept the checkpoints of steps 4, 8 and 12."""
    run = tmp_path_factory.mktemp("other") / "run"
    Trainer(_cfg(small_data_dir, 12, keep=3, train__seed=7), run).train()
    return run


def _plant(run: Path, other: Path, names: dict[str, str]) -> dict[str, bytes]:
    """Copy ``other``'s kept checkpoints into ``run/checkpoints`` under new names; their bytes by name."""
    (run / "checkpoints").mkdir(parents=True, exist_ok=True)
    for new, old in names.items():
        shutil.copy(other / "checkpoints" / old, run / "checkpoints" / new)
    return {new: (run / "checkpoints" / new).read_bytes() for new in names}


def test_foreign_and_stale_checkpoints_survive_and_are_not_averaged(small_data_dir, other_run, tmp_path, capsys):
    run = tmp_path / "run"
    cfg = _cfg(small_data_dir, 12)
    run.mkdir()
    cfg.save_yaml(run / "config.yaml")  # a run killed before its first checkpoint: the folder is ours
    planted = _plant(run, other_run, {"step1.pt": "step4.pt", "step100.pt": "step8.pt", "step200.pt": "step12.pt"})
    Trainer(cfg, run).train()
    assert _kept(run) == ["step1.pt", "step100.pt", "step12.pt", "step200.pt", "step8.pt"]  # step4.pt pruned
    for name, data in planted.items():
        assert (run / "checkpoints" / name).read_bytes() == data, name

    capsys.readouterr()
    assert main(["average", "--run", str(run), "--out", str(tmp_path / "avg.pt")]) == 0
    printed = capsys.readouterr().out
    assert "averaged 2 checkpoints (steps 8, 12)" in printed, printed
    left = [str(run / "checkpoints" / n) for n in ("step1.pt", "step100.pt", "step200.pt")]
    assert f"left out, saved by another run than {run / 'last.pt'}'s: {', '.join(left)}" in printed, printed
    k8, k12 = (Checkpoint.load(run / "checkpoints" / f"step{s}.pt") for s in (8, 12))
    for name, w in Checkpoint.load(tmp_path / "avg.pt").weights.items():
        torch.testing.assert_close(w, (k8.weights[name] + k12.weights[name]) / 2, msg=name)
    with pytest.raises(ConfigError, match=r"--last 3: .* keeps only 2 checkpoints of this run \(left out, saved by "
                                          r"another run: .*step1\.pt"):
        api.average(api.AverageRequest(run=run, last=3, out=tmp_path / "avg3.pt"))


def test_the_record_survives_resume_and_a_kill_after_a_kept_checkpoint(small_data_dir, tmp_path):
    """Resumed runs prune what the run kept before; a checkpoint written after the last last.pt (a kill between
    the two) is the run's own and is replaced when the resumed run validates there again."""
    run = tmp_path / "run"
    Trainer(_cfg(small_data_dir, 8), run).train()
    (run / "checkpoints" / "step1.pt").write_bytes(b"someone's notes, not a checkpoint")
    at_8 = (run / "last.pt").read_bytes()
    Trainer(_cfg(small_data_dir, 12), run, resume=True).train()
    assert _kept(run) == ["step1.pt", "step12.pt", "step8.pt"]
    (run / "last.pt").write_bytes(at_8)  # killed after keeping step 12 and pruning step 4, before its last.pt
    Trainer(_cfg(small_data_dir, 16), run, resume=True).train()
    assert _kept(run) == ["step1.pt", "step12.pt", "step16.pt"]
    assert (run / "checkpoints" / "step1.pt").read_bytes() == b"someone's notes, not a checkpoint"
    res = api.average(api.AverageRequest(run=run, out=tmp_path / "avg.pt"))
    assert [s for _, s in res.sources] == [12, 16] and res.left_out == [str(run / "checkpoints" / "step1.pt")]


def test_a_foreign_checkpoint_at_a_step_the_run_keeps_is_left_alone(small_data_dir, other_run, tmp_path, caplog):
    run = tmp_path / "run"
    cfg = _cfg(small_data_dir, 8)
    run.mkdir()
    cfg.save_yaml(run / "config.yaml")
    planted = _plant(run, other_run, {"step4.pt": "step4.pt"})
    with caplog.at_level("WARNING"):
        Trainer(cfg, run).train()
    path = run / "checkpoints" / "step4.pt"
    assert path.read_bytes() == planted["step4.pt"]
    assert f"{path} was saved by another run: left as it is, and the weights of step 4 are not kept" in caplog.text
    assert _kept(run) == ["step4.pt", "step8.pt"]


def test_average_run_needs_the_runs_own_checkpoint_to_tell_its_kept_ones(small_data_dir, other_run, tmp_path):
    run = tmp_path / "run"
    _plant(run, other_run, {"step4.pt": "step4.pt", "step8.pt": "step8.pt"})
    with pytest.raises(ConfigError, match=r"--run .*: no last\.pt or best\.pt tells which checkpoints in .* this run "
                                          r"saved; give the files to average with --models"):
        api.average(api.AverageRequest(run=run, out=tmp_path / "avg.pt"))
