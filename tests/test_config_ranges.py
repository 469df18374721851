"""Issue 27: configs refused when built, with one line naming the key, its range and the value.

Items 7 (infeasible sink-less constrained attention, ``decode.batch_size=0``), 11 (negative
limits), 12 (decode values), 15 (model and train keys).
"""

from __future__ import annotations

import pytest

from scanmt.config import Config
from scanmt.errors import ConfigError


def _sinkless(transform: str, strategy: str = "constant", value: float = 2.0, **sections) -> dict:
    attention = {"transform": transform, "sink": False, "fertility": {"strategy": strategy, "value": value}}
    return {"model": {"attention": attention}, **sections}


@pytest.mark.parametrize("transform", ["csparsemax", "csoftmax"])
@pytest.mark.parametrize("strategy", ["constant", "guided", "predicted", "actual"])
def test_sinkless_constrained_attention_that_can_run_out_is_refused(transform, strategy):
    """Item 7: the first validation used to end in an infeasible-bounds traceback, every update lost."""
    with pytest.raises(ConfigError, match=rf"model.attention.sink=false with {transform}: without the sink every "
                                          r"output step spends 1 of the source's fertility") as exc:
        Config.from_dict(_sinkless(transform, strategy))
    assert "\n" not in str(exc.value) and "leave the sink on" in str(exc.value)


def test_sinkless_constant_fertility_that_cannot_run_out_is_accepted():
    """The precise rule: constant f at least the longest output of a one-subword source."""
    with pytest.raises(ConfigError, match=r"value=80 lets a one-subword source have 80 output steps but up to 81"):
        Config.from_dict(_sinkless("csparsemax", value=80))
    Config.from_dict(_sinkless("csparsemax", value=81))
    with pytest.raises(ConfigError, match=r"up to 30 are taken"):
        Config.from_dict(_sinkless("csparsemax", value=29, data={"max_len": 20}, decode={"max_len_b": 28}))
    Config.from_dict(_sinkless("softmax", strategy="none"))  # unconstrained: no bounds to run out


@pytest.mark.parametrize(
    "override, message",
    [
        ("decode.batch_size=0", r"decode.batch_size must be in \[1, 1000000\], got 0$"),  # item 7
        ("data.train_limit=-399", r"data.train_limit must be >= 0 \(0 = all\), got -399$"),  # item 11
        ("data.valid_limit=-1", r"data.valid_limit must be >= 0 \(0 = all\), got -1$"),
        ("decode.beam=-3", r"decode.beam must be in \[1, 1000\] \(1 = greedy\), got -3$"),  # item 12
        ("decode.max_len_b=-100", r"decode.max_len_b must be in \[0, 100000\], got -100$"),
        ("decode.max_len_a=-1", r"decode.max_len_a must be in \[0, 1000\], got -1"),
        ("model.layers=0", r"model.layers must be in \[1, 32\], got 0$"),  # item 15
        ("model.layers=1000000", r"model.layers must be in \[1, 32\], got 1000000$"),
        ("model.dropout=1.5", r"model.dropout must be in \[0, 1\), got 1.5$"),
        ("model.hidden_size=99999999999", r"model.hidden_size must be in \[1, 16384\], got 99999999999$"),
        ("model.emb_size=1e26", r"model.emb_size: 1e26 is too large for an integer key"),
        ("train.seed=1e30", r"train.seed: 1e30 is too large for an integer key"),
        ("train.seed=1e12", r"train.seed must be in \[0, 4294967295\], got 1000000000000$"),
        ("train.lr=1e300", r"train.lr must be in \(0, 1000\], got 1e\+300$"),
        ("train.threads=100000", r"train.threads must be in \[0, 1024\] \(0 = torch's default\), got 100000$"),
        ("model.attention.fertility.value=0", r"model.attention.fertility.value must be in \(0, 1000\], got 0"),
        ("model.coverage.dim=0", r"model.coverage.dim must be in \[1, 1024\], got 0$"),
    ],
)
def test_values_out_of_range_are_one_line_naming_the_key(override, message):
    from scanmt.presets import preset_path

    with pytest.raises(ConfigError, match=message) as exc:
        Config.load(preset_path("cpu-small"), [override])
    assert "\n" not in str(exc.value) and str(exc.value).startswith(f"--set {override}: ")


def test_a_maximum_output_length_with_no_room_for_a_word_is_refused():
    with pytest.raises(ConfigError, match=r"decode.max_len_a=0 and decode.max_len_b=1: .* must be >= 2"):
        Config.from_dict({"decode": {"max_len_a": 0, "max_len_b": 1}})
    Config.from_dict({"decode": {"max_len_a": 2, "max_len_b": 0}})


@pytest.mark.parametrize("key", ["length_alpha", "coverage_beta", "coverage_eps", "max_len_a"])
@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_decode_values_set_after_building_are_checked_too(key, value):
    """Decode settings replaced later (``DecodeOverrides.apply``, ``Translator.decode``) go through the same ranges."""
    import dataclasses

    from scanmt.config import check_decode_config

    with pytest.raises(ConfigError, match=rf"decode.{key} must be .*, got {value}$"):
        check_decode_config(dataclasses.replace(Config().decode, **{key: value}))


def test_every_range_has_words_and_contains_the_default():
    from scanmt.config import RANGES, Range

    config = Config().to_dict()
    for section, ranges in RANGES.items():
        node = config
        for part in section.split("."):
            node = node[part]
        for key, rng in ranges.items():
            assert isinstance(rng, Range) and rng.words
            assert rng.contains(node[key]), f"{section}.{key} default {node[key]} outside {rng.words}"
