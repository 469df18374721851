import copy

import pytest
import torch

from scanmt.config import Config
from scanmt.decoding.translator import Translator
from scanmt.errors import ConfigError
from scanmt.model.checkpoint import load_checkpoint
from scanmt.training.trainer import Trainer
from tests.conftest import tiny_config


def _params(model):
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_resume_continues_identically(small_data_dir, tmp_path):
    cfg = tiny_config(small_data_dir, train__max_steps=16, train__checkpoint_every=7)
    full = Trainer(cfg, tmp_path / "full")
    full.train()

    # "killed" run: stop after 7 steps (the checkpoint), then resume up to 16
    short = copy.deepcopy(cfg)
    short.train.max_steps = 7
    Trainer(short, tmp_path / "killed").train()
    resumed = Trainer(cfg, tmp_path / "killed", resume=True)
    assert resumed.progress.step == 7
    resumed.train()
    a, b = _params(full.model), _params(resumed.model)
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=0, msg=f"parameter {k} differs after resume")


def test_checkpoint_round_trip_and_translate(small_data_dir, tmp_path):
    cfg = tiny_config(small_data_dir)
    t = Trainer(cfg, tmp_path / "run")
    t.train()
    ckpt = load_checkpoint(tmp_path / "run" / "last.pt")
    assert Config.from_dict(ckpt["config"]) == cfg
    tr = Translator.from_checkpoint(tmp_path / "run" / "last.pt")
    for k, v in t.model.state_dict().items():
        torch.testing.assert_close(tr.model.state_dict()[k], v)
    out = tr.translate_lines(["Ein Hund läuft.", "Zwei Männer."], beam=3)
    assert len(out) == 2 and all(isinstance(o.text, str) for o in out)
    assert not list((tmp_path / "run").glob("*.tmp")), "temporary checkpoint files left behind"

    # forced decoding of the greedy output reproduces its log-probability and attention
    greedy = tr.translate_lines(["Ein Hund läuft."], beam=1)[0]
    forced = tr.force_pieces([greedy.src_pieces], [greedy.pieces])[0]
    assert abs(forced.hypothesis.log_prob - greedy.hypothesis.log_prob) < 1e-4
    torch.testing.assert_close(forced.hypothesis.attention, greedy.hypothesis.attention, rtol=1e-5, atol=1e-6)


def test_refuses_to_overwrite_and_rejects_incompatible_resume(small_data_dir, tmp_path):
    cfg = tiny_config(small_data_dir, train__max_steps=2)
    Trainer(cfg, tmp_path / "run").train()
    with pytest.raises(ConfigError, match="already holds a run"):
        Trainer(cfg, tmp_path / "run")
    other = copy.deepcopy(cfg)
    other.model.hidden_size = 64
    with pytest.raises(ConfigError, match="model.hidden_size=32 but the config says model.hidden_size=64"):
        Trainer(other, tmp_path / "run", resume=True)


def test_checkpoint_from_incompatible_config_is_a_clear_error(small_data_dir, tmp_path):
    from scanmt.model.build import build_model

    cfg = tiny_config(small_data_dir, train__max_steps=1)
    Trainer(cfg, tmp_path / "run").train()
    ckpt = load_checkpoint(tmp_path / "run" / "last.pt")
    bad = copy.deepcopy(cfg)
    bad.model.layers = 2
    with pytest.raises(ConfigError, match="does not match the model"):
        build_model(bad, len(ckpt["pipeline"]["vocab"]), ckpt["model"])
