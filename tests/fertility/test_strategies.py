"""The strategy registry (issue 54): keyed by ``choices.STRATEGIES``, and what the runner asks of it."""

from __future__ import annotations

from pathlib import Path

import pytest

from scanmt.choices import NO_STRATEGY, STRATEGIES
from scanmt.config import FertilityConfig
from scanmt.errors import ConfigError
from scanmt.fertility.providers import PROVIDERS, provider_from_state
from scanmt.fertility.strategies import (
    COMPUTE_CHOICES,
    REGISTRY,
    is_oracle,
    needs_predictor,
    source_from_config,
    strategy,
)


def test_the_registry_is_keyed_by_the_choices():
    assert tuple(REGISTRY) == STRATEGIES and tuple(PROVIDERS) == STRATEGIES
    assert all(REGISTRY[n].provider_type is PROVIDERS[n] for n in STRATEGIES)
    assert COMPUTE_CHOICES == ("constant", "guided", "actual", "predicted")  # scanmt fertility --strategy, as before
    with pytest.raises(ConfigError, match="unknown fertility strategy 'nope'"):
        strategy("nope")
    with pytest.raises(ConfigError, match="unknown fertility strategy 'nope'"):
        provider_from_state({"strategy": "nope"})


def test_what_the_runner_asks():
    assert [n for n in STRATEGIES if needs_predictor(n)] == ["predicted"]
    assert [n for n in STRATEGIES if is_oracle(n)] == ["actual"]
    assert not needs_predictor(NO_STRATEGY) and not is_oracle(NO_STRATEGY) and not is_oracle(None)
    fert = {"strategy": "x", "value": 2.0, "add": 1.0, "predictor": "p.pt", "align_dir": ""}
    assert {n: strategy(n).label(fert) for n in STRATEGIES} == {
        "constant": "constant-2", "guided": "guided", "predicted": "predicted-add1", "actual": "actual"}
    assert {n: strategy(n).request_options(fert) for n in STRATEGIES} == {
        "constant": {"value": 2.0}, "guided": {}, "predicted": {"predictor": "p.pt", "add": 1.0}, "actual": {}}


def test_config_parsing(tmp_path):
    src = source_from_config(tmp_path, FertilityConfig(strategy="constant", value=3.0))
    assert src.provider().state() == {"strategy": "constant", "value": 3.0}
    assert provider_from_state(src.provider().state()) == src.provider()
    g = source_from_config(tmp_path, FertilityConfig(strategy="guided", value=3.0, align_dir="al"))
    assert g.options.value is None and g.align_dir == Path("al")  # the default value of the config is not guided's
    with pytest.raises(ConfigError, match=r"model\.attention\.fertility\.predictor: strategy 'predicted' needs"):
        source_from_config(tmp_path, FertilityConfig(strategy="predicted"))
