import pytest

from scanmt.config import Config
from scanmt.errors import ConfigError
from scanmt.presets import preset_path


@pytest.mark.parametrize("name", ["cpu-small", "paper"])
def test_presets_load(name):
    cfg = Config.load(preset_path(name))
    assert cfg.model.attention.score == "general"


def test_paper_preset_has_the_paper_sizes():
    cfg = Config.load(preset_path("paper"))
    assert (cfg.model.layers, cfg.model.hidden_size, cfg.model.emb_size) == (2, 500, 500)
    assert (cfg.train.optimizer, cfg.train.lr, cfg.train.lr_decay, cfg.train.max_grad_norm) == ("sgd", 1.0, 0.5, 5.0)


def test_overrides_are_typed(tmp_path):
    cfg = Config.load(preset_path("cpu-small"), ["train.lr=0.5", "model.attention.transform=csparsemax", "model.attention.sink=true"])
    assert cfg.train.lr == 0.5 and cfg.model.attention.transform == "csparsemax" and cfg.model.attention.sink is True


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["train.lrr=1"], "unknown config key train.lrr"),
        (["model.layers=two"], "model.layers: expected an integer, got 'two'"),
        (["model.attention.colour=red"], "unknown config key model.attention.colour"),
        (["train.lr"], "expected key=value"),
    ],
)
def test_bad_keys_name_the_key(overrides, message):
    with pytest.raises(ConfigError, match=message):
        Config.load(preset_path("cpu-small"), overrides)


def test_missing_config_file(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        Config.load(tmp_path / "nope.yaml")


def test_round_trip_through_dict():
    cfg = Config.load(preset_path("paper"))
    assert Config.from_dict(cfg.to_dict()) == cfg
