"""Checkpoint averaging (scanmt.model.averaging): the float64 mean of one model's weights, and refusals."""

from __future__ import annotations

import copy

import pytest
import torch

from scanmt.config import Config
from scanmt.errors import ConfigError, DataError
from scanmt.model.averaging import average_checkpoints, kept_checkpoints, kept_path
from scanmt.model.build import build_model
from scanmt.model.checkpoint import Checkpoint

PIPELINE = {"src_lang": "de", "tgt_lang": "en", "spm": b"model bytes", "vocab": ["<pad>", "<s>", "</s>", "a"]}


def _ckpt(seed: int, step: int, arch: str = "lstm", name: str | None = None) -> Checkpoint:
    cfg = Config()
    cfg.model.arch = arch
    cfg.model.emb_size = cfg.model.hidden_size = 16
    if arch == "transformer":
        cfg.model.transformer.heads = 2
        cfg.model.transformer.ff_size = 32
    torch.manual_seed(seed)
    model = build_model(cfg, 30)
    return Checkpoint(config=cfg.to_dict(), weights={k: v.clone() for k, v in model.state_dict().items()},
                      pipeline=copy.deepcopy(PIPELINE), progress={"step": step}, optimizer={"state": {}},
                      source=name or f"step{step}.pt")


@pytest.mark.parametrize("arch", ["lstm", "transformer"])
def test_the_mean_of_every_weight_newest_config_no_optimizer(arch):
    ckpts = [_ckpt(seed, step, arch) for seed, step in ((1, 300), (2, 100), (3, 200))]
    ckpts[0].config["train"]["lr"] = 0.5  # the newest checkpoint's config is kept
    avg = average_checkpoints(ckpts)
    assert avg.weights.keys() == ckpts[0].weights.keys()
    for name, w in avg.weights.items():
        expected = sum(c.weights[name].double() for c in ckpts) / 3
        assert w.dtype == ckpts[0].weights[name].dtype
        torch.testing.assert_close(w.double(), expected, rtol=1e-6, atol=1e-7, msg=name)
    assert avg.config["train"]["lr"] == 0.5 and avg.progress == {"step": 300}
    assert avg.optimizer is None and avg.rng is None and avg.pipeline == PIPELINE
    assert avg.extra["averaged_from"] == [{"file": "step300.pt", "step": 300}, {"file": "step100.pt", "step": 100},
                                          {"file": "step200.pt", "step": 200}]
    # and the averaged weights load into the model of the config
    model = build_model(Config.from_dict(avg.config), 30)
    model.load_state_dict(avg.weights)


def test_copies_of_one_checkpoint_average_to_it_exactly():
    one = _ckpt(1, 10)
    avg = average_checkpoints([one, copy.deepcopy(one), copy.deepcopy(one)])
    for name, w in one.weights.items():
        assert torch.equal(avg.weights[name], w), name


def test_round_trip_through_a_file(tmp_path):
    a, b = _ckpt(1, 1), _ckpt(2, 2)
    average_checkpoints([a, b]).save(tmp_path / "avg.pt")
    back = Checkpoint.load(tmp_path / "avg.pt")
    assert back.extra["averaged_from"] == [{"file": "step1.pt", "step": 1}, {"file": "step2.pt", "step": 2}]
    for name, w in back.weights.items():
        torch.testing.assert_close(w, (a.weights[name] + b.weights[name]) / 2, msg=name)


def test_refusals_name_the_problem():
    a, b = _ckpt(1, 1), _ckpt(2, 2)
    with pytest.raises(ConfigError, match="at least 2 checkpoints, got 1"):
        average_checkpoints([a])
    other = copy.deepcopy(b)
    dropout = other.config["model"]["dropout"]
    other.config["model"]["dropout"] = 0.55
    with pytest.raises(ConfigError, match=rf"different models .*model\.dropout = {dropout} against 0\.55"):
        average_checkpoints([a, other])
    other = copy.deepcopy(b)
    other.pipeline["vocab"] = ["<pad>", "<s>", "</s>", "b"]
    with pytest.raises(ConfigError, match="different text pipelines"):
        average_checkpoints([a, other])
    other = copy.deepcopy(b)
    other.fertility = {"strategy": "constant", "value": 2.0}
    with pytest.raises(ConfigError, match="different fertility providers"):
        average_checkpoints([a, other])
    other = copy.deepcopy(b)
    name = next(iter(other.weights))
    other.weights[name] = other.weights[name][:1]
    with pytest.raises(DataError, match=f"parameter {name} is"):
        average_checkpoints([a, other])
    other = copy.deepcopy(b)
    del other.weights[name]
    with pytest.raises(DataError, match="different parameters"):
        average_checkpoints([a, other])
    x, y = copy.deepcopy(a), copy.deepcopy(b)
    x.weights["counter"], y.weights["counter"] = torch.tensor([1]), torch.tensor([2])
    with pytest.raises(DataError, match="integer tensor counter differs"):
        average_checkpoints([x, y])
    predictor = copy.deepcopy(b)
    predictor.pipeline = None
    with pytest.raises(DataError, match="not an NMT checkpoint"):
        average_checkpoints([a, predictor])


def test_kept_checkpoints_sorted_by_step(tmp_path):
    for step in (1000, 20, 300):
        kept_path(tmp_path, step).parent.mkdir(exist_ok=True)
        kept_path(tmp_path, step).write_bytes(b"")
    (tmp_path / "checkpoints" / "notes.txt").write_text("")
    assert [p.name for p in kept_checkpoints(tmp_path)] == ["step20.pt", "step300.pt", "step1000.pt"]
    assert kept_checkpoints(tmp_path / "nothing") == []
