from pathlib import Path

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
    cfg = Config.load(preset_path("cpu-small"), ["train.lr=0.5", "model.attention.transform=csparsemax", "model.attention.sink=true",
                                                 "model.attention.fertility.strategy=constant"])
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


@pytest.mark.parametrize(("text", "value"), [
    ("1e-3", 0.001), ("2E-4", 0.0002), (".5", 0.5), ("5.", 5.0), ("1_000", 1000.0), ("5e+2", 500.0), ("3", 3.0),
])
def test_set_takes_numbers_in_python_syntax(text, value):
    """Issue 16 item 5: YAML 1.1 reads ``1e-3`` as a string; any Python number syntax works."""
    assert Config.load(preset_path("cpu-small"), [f"train.lr={text}"]).train.lr == value


def test_set_takes_negative_numbers_in_python_syntax():
    """``-1e-1`` is read as -0.1 (train.lr must be in (0, 1000], so the range check shows the value read)."""
    with pytest.raises(ConfigError, match=r"train.lr must be in \(0, 1000\], got -0.1$"):
        Config.load(preset_path("cpu-small"), ["train.lr=-1e-1"])


@pytest.mark.parametrize(("text", "value"), [("1_000", 1000), ("1e3", 1000), ("2.0", 2)])
def test_integer_keys_take_whole_numbers_in_any_syntax(text, value):
    assert Config.load(preset_path("cpu-small"), [f"train.max_steps={text}"]).train.max_steps == value


def test_config_file_numbers_in_python_syntax(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("train:\n  lr: 1e-3\n  max_steps: 1_000\n")
    cfg = Config.load(path)
    assert (cfg.train.lr, cfg.train.max_steps) == (0.001, 1000)


@pytest.mark.parametrize(("item", "message"), [
    ("train.lr=abc", "--set train.lr=abc: train.lr: expected a number, got 'abc'"),
    ("train.lr=nan", "--set train.lr=nan: train.lr: expected a number, got 'nan'"),
    ("train.lr=inf", "--set train.lr=inf: train.lr: expected a number"),
    ("train.max_steps=2.5", "--set train.max_steps=2.5: train.max_steps: expected an integer, got 2.5"),
    ("train.precision=fp16", "--set train.precision=fp16: train.precision: unknown precision 'fp16'"),
    ("train.lrr=1", "--set train.lrr=1: unknown config key train.lrr"),
    ("data.src_lang=no", "--set data.src_lang=no: data.src_lang: expected a string, got False .*quote it"),
])
def test_set_errors_name_set_not_the_config_file(item, message):
    with pytest.raises(ConfigError, match=message) as exc:
        Config.load(preset_path("cpu-small"), ["train.epochs=3", item])
    assert "cpu-small.yaml" not in str(exc.value)


def test_errors_of_the_file_itself_name_the_file(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("train:\n  lr: fast\n")
    with pytest.raises(ConfigError, match=r"c\.yaml: train\.lr: expected a number, got 'fast'"):
        Config.load(path, ["train.epochs=3"])


def test_a_key_written_twice_is_an_error_naming_both_lines(tmp_path):
    # PyYAML alone keeps the last of two equal keys silently, so a stale line below an edited one would win
    path = tmp_path / "c.yaml"
    path.write_text("model:\n  attention:\n    scaling: cosine\n    transform: sparsemax\n    scaling: none\n")
    with pytest.raises(ConfigError) as exc:
        Config.load(path)
    msg = str(exc.value)
    assert msg.startswith(f"{path}: invalid YAML")
    assert "found the key 'scaling' a second time (first at line 3)" in msg
    assert f'in "{path}", line 5' in msg


def test_yaml_merge_keys_may_still_be_overridden():
    from scanmt.io import load_yaml

    assert load_yaml("base: &b {x: 1, y: 2}\nd:\n  <<: *b\n  y: 3\n")["d"] == {"x": 1, "y": 3}
    assert load_yaml("[{a: 1}, {a: 2}]") == [{"a": 1}, {"a": 2}]  # equal keys in different mappings


def test_every_shipped_yaml_has_each_key_once():
    from scanmt.io import load_yaml

    repo = Path(__file__).resolve().parents[1]
    files = sorted([*repo.glob("configs/*.yaml"), *repo.glob("experiments/*.yaml"),
                    *(repo / "src" / "scanmt" / "presets").glob("*.yaml")])
    assert len(files) >= 6
    for path in files:
        assert isinstance(load_yaml(path.read_text(encoding="utf-8"), str(path)), dict), path


@pytest.mark.parametrize(
    "override, message",
    [
        ("train.lr=-0.1", r"train.lr must be in \(0, 1000\], got -0.1"),
        ("train.lr=0", r"train.lr must be in \(0, 1000\], got 0"),
        ("train.lr_decay=1.5", r"train.lr_decay must be in \(0, 1\]"),
        ("train.label_smoothing=1.0", r"train.label_smoothing must be in \[0, 1\)"),
        ("train.checkpoint_every=0", r"train.checkpoint_every must be >= 1, got 0"),
        ("train.log_every=0", r"train.log_every must be >= 1"),
        ("train.epochs=0", r"train.epochs must be >= 1"),
        ("train.max_grad_norm=-5", r"train.max_grad_norm must be >= 0"),
        ("train.patience=-1", r"train.patience must be >= 0"),
        ("train.warmup_steps=-3", r"train.warmup_steps must be >= 0 \(0 = no warm-up\), got -3"),
        ("train.lr_schedule=inverse_sqrt", r"train.lr_schedule=inverse_sqrt needs train.warmup_steps > 0 .*got "
                                           r"train.warmup_steps=0"),
    ],
)
def test_train_values_out_of_range_name_the_key(override, message):
    with pytest.raises(ConfigError, match=message):
        Config.load(preset_path("cpu-small"), [override])


def test_train_ranges_accept_the_presets_and_their_edges():
    for name in ("cpu-small", "paper"):
        Config.load(preset_path(name), ["train.lr_decay=1", "train.max_grad_norm=0", "train.label_smoothing=0"])
