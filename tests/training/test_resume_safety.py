"""What ``train --resume`` accepts and refuses (issue 16, items 2 and 3)."""

from __future__ import annotations

import contextlib
import copy
import shutil
import signal

import pytest
import yaml

from scanmt.cli.main import main
from scanmt.config import Config
from scanmt.errors import ConfigError
from scanmt.model.checkpoint import load_checkpoint
from scanmt.training.trainer import Trainer
from tests.conftest import tiny_config


@contextlib.contextmanager
def deadline(seconds: int):
    """Fail (instead of hanging the suite) when the block runs longer than ``seconds``."""
    def expired(signum, frame):
        raise TimeoutError(f"still running after {seconds} s (hangs?)")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.fixture(scope="module")
def killed_run(small_data_dir, tmp_path_factory):
    """A run of 12 steps on 1000 pairs, "killed" after its checkpoint at step 12 (mid-epoch)."""
    data = tmp_path_factory.mktemp("data") / "de-en"
    shutil.copytree(small_data_dir, data)
    cfg = tiny_config(data, train__max_steps=12, train__checkpoint_every=12, data__train_limit=1000)
    out = tmp_path_factory.mktemp("runs") / "run"
    Trainer(cfg, out).train()
    assert 0 < load_checkpoint(out / "last.pt")["progress"]["batch_in_epoch"]
    return cfg, out


def _resume(killed_run, tmp_path, **changes) -> tuple[Config, object]:
    """A copy of the killed run (so that tests do not disturb each other) and its config with ``changes``."""
    cfg, out = killed_run
    run = tmp_path / "run"
    shutil.copytree(out, run)
    new = copy.deepcopy(cfg)
    for dotted, value in changes.items():
        node = new
        *sections, key = dotted.split("__")
        for s in sections:
            node = getattr(node, s)
        setattr(node, key, value)
    return new, run


def test_resume_with_a_shorter_epoch_is_refused_not_a_hang(killed_run, tmp_path):
    """Item 2: a smaller data.train_limit left the saved batch position past the end of the epoch: endless loop."""
    cfg, run = _resume(killed_run, tmp_path, data__train_limit=100, train__max_steps=20)
    with deadline(60), pytest.raises(ConfigError, match="data.train_limit=1000 but the config says "
                                                          "data.train_limit=100: data.train_limit cannot change"):
        Trainer(cfg, run, resume=True).train()


def test_epoch_that_got_shorter_under_the_loop_is_an_error(killed_run, tmp_path):
    """Item 2, the loop itself: fewer batches than the saved position (any task) stops with an error."""
    cfg, run = _resume(killed_run, tmp_path, train__max_steps=20)
    trainer = Trainer(cfg, run, resume=True)
    batches = trainer.task.epoch_batches
    trainer.task.epoch_batches = lambda epoch: batches(epoch)[:5]
    with deadline(60), pytest.raises(ConfigError, match="stopped after batch 12 of epoch 1, but that epoch now "
                                                          "has 5 batches"):
        trainer.train()


@pytest.mark.parametrize(("change", "key", "old", "new"), [
    ({"model__attention__transform": "sparsemax"}, "model.attention.transform", "'softmax'", "'sparsemax'"),
    ({"train__lr": 0.01}, "train.lr", "0.005", "0.01"),
    ({"data__batch_tokens": 1200}, "data.batch_tokens", "600", "1200"),
    ({"model__attention__scaling": "sqrt"}, "model.attention.scaling", "'none'", "'sqrt'"),
    ({"train__warmup_steps": 10}, "train.warmup_steps", "0", "10"),
    ({"train__seed": 2}, "train.seed", "1", "2"),
])
def test_resume_refuses_changes_naming_key_and_both_values(killed_run, tmp_path, change, key, old, new):
    """Item 3: a changed transform relabelled the checkpoint; a changed lr went to config.yaml only."""
    cfg, run = _resume(killed_run, tmp_path, **change)
    before = (run / "config.yaml").read_text()
    with pytest.raises(ConfigError) as exc:
        Trainer(cfg, run, resume=True)
    assert f"was trained with {key}={old} but the config says {key}={new}: {key} cannot change on --resume" in str(exc.value)
    assert (run / "config.yaml").read_text() == before
    assert load_checkpoint(run / "last.pt")["config"]["model"]["attention"]["transform"] == "softmax"


def test_resume_accepts_the_changeable_keys(killed_run, tmp_path, caplog):
    precision = "fp32" if killed_run[0].train.precision == "bf16" else "bf16"
    cfg, run = _resume(killed_run, tmp_path, train__max_steps=14, train__log_every=7, train__threads=1,
                       decode__beam=4, train__precision=precision)
    with caplog.at_level("INFO", logger="scanmt.train"):
        trainer = Trainer(cfg, run, resume=True)
    assert "resume: train.max_steps changed from 12 to 14" in caplog.text
    assert f"resume: train.precision changed from '{killed_run[0].train.precision}' to '{precision}'" in caplog.text
    assert trainer.train().step == 14
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["train"]["max_steps"] == 14 and saved["decode"]["beam"] == 4 and saved["train"]["precision"] == precision


def test_resume_from_moved_data_is_accepted(killed_run, tmp_path):
    cfg, run = _resume(killed_run, tmp_path, train__max_steps=13)
    moved = tmp_path / "moved"
    shutil.copytree(cfg.data.dir, moved)
    cfg.data.dir = str(moved)
    assert Trainer(cfg, run, resume=True).train().step == 13


def test_resume_on_other_data_is_refused(killed_run, tmp_path, small_data_dir):
    """Item 3: another data.dir crashed with a raw ``RuntimeError: size mismatch``."""
    from scanmt.data.prepare import SplitFiles, prepare

    cfg, run = _resume(killed_run, tmp_path)
    other = tmp_path / "other"
    lines = {s: (small_data_dir / f"train.raw.{s}").read_text().splitlines()[:300] for s in ("de", "en")}
    for s in ("de", "en"):
        (tmp_path / f"t.{s}").write_text("\n".join(lines[s]) + "\n")
    splits = {k: SplitFiles(tmp_path / "t.de", tmp_path / "t.en") for k in ("train", "valid")}
    prepare(splits, "de", "en", other, vocab_size=500)
    cfg.data.dir = str(other)
    with pytest.raises(ConfigError, match=r"data\.dir=.*de-en' but the config says data\.dir=.*other'.*"
                                          r"holds other data"):
        Trainer(cfg, run, resume=True)


def test_data_prepared_again_in_the_same_folder_is_refused(small_data_dir, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(small_data_dir, data)
    cfg = tiny_config(data, train__max_steps=2, train__checkpoint_every=2)
    Trainer(cfg, tmp_path / "run").train()
    train = data / "train.bpe.en"
    train.write_text(train.read_text().replace("▁a ", "▁the ", 5))
    cfg.train.max_steps = 4
    with pytest.raises(ConfigError, match=r"the data in data\.dir=.* changed since .*last\.pt was written"):
        Trainer(cfg, tmp_path / "run", resume=True)


def test_cli_resume_change_is_one_line(killed_run, tmp_path, capsys):
    cfg, run = _resume(killed_run, tmp_path)
    path = tmp_path / "c.yaml"
    cfg.save_yaml(path)
    argv = ["train", "--config", str(path), "--out", str(run), "--resume", "--set", "model.attention.transform=sparsemax"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("scanmt train: error: ") and "model.attention.transform='softmax'" in err[-1]


@pytest.mark.parametrize("kind", ["kept", "averaged"])
def test_resume_from_a_checkpoint_without_optimizer_state_is_one_line(killed_run, tmp_path, capsys, kind):
    """Issue 52, item 12: last.pt replaced by a kept ``checkpoints/stepN.pt`` (weights and progress, no optimizer
    state or RNG) or an averaged checkpoint raised ``AttributeError`` from the optimizer's ``load_state_dict``."""
    from scanmt.model.averaging import average_checkpoints
    from scanmt.model.checkpoint import Checkpoint

    cfg, run = _resume(killed_run, tmp_path, train__max_steps=14)
    last = Checkpoint.load(run / "last.pt")
    if kind == "kept":  # what train.keep_checkpoints keeps
        last.optimizer = last.rng = None
        weights = last
    else:
        weights = average_checkpoints([last, last])
    weights.save(run / "last.pt")
    what = "an averaged checkpoint" if kind == "averaged" else "weights only"
    with pytest.raises(ConfigError, match=f"last.pt has no optimizer state .{what}"):
        Trainer(cfg, run, resume=True)
    path = tmp_path / "c.yaml"
    cfg.save_yaml(path)
    assert main(["train", "--config", str(path), "--out", str(run), "--resume"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("scanmt train: error: ") and "has no optimizer state" in err[-1]
    assert "Traceback" not in "\n".join(err)
