"""Config validation in one place (issue 29, item 4): every key with a closed set of values is
declared once in :mod:`scanmt.choices` (immutable) and checked when a :class:`Config` is built,
with a message naming the key, the value and the valid choices; the transforms registry binds
functions to declared names only."""

from __future__ import annotations

import re
from types import MappingProxyType

import pytest

from scanmt import choices
from scanmt.config import Config, PredictorConfig
from scanmt.errors import ConfigError
from scanmt.fertility import rules
from scanmt.model import transforms
from scanmt.presets import preset_path

#: (overrides that make the rest consistent, the key, its choices)
CASES = [
    ([], "model.attention.transform", choices.TRANSFORMS),
    ([], "model.attention.score", choices.SCORES),
    ([], "model.attention.scaling", choices.SCALINGS),
    (["model.attention.transform=csparsemax", "model.attention.fertility.strategy=constant"],
     "model.attention.fertility.strategy",
     ("none",) + choices.STRATEGIES),
    ([], "model.coverage.type", choices.COVERAGE_TYPES),
    ([], "model.arch", choices.ARCHS),
    ([], "model.output", choices.OUTPUTS),
    (["model.arch=transformer", "model.emb_size=32", "model.hidden_size=32", "model.attention.scaling=sqrt"], "model.transformer.bounded",
     choices.BOUNDED_MODES),
    ([], "train.precision", choices.PRECISIONS),
    ([], "train.normalization", choices.NORMALIZATIONS),
    ([], "train.optimizer", choices.OPTIMIZERS),
    (["train.warmup_steps=10"], "train.lr_schedule", choices.LR_SCHEDULES),
    ([], "train.logger", choices.LOGGERS),
    ([], "decode.penalty_mode", choices.PENALTY_MODES),
    ([], "data.batch_sort", choices.BATCH_SORTS),
]


@pytest.mark.parametrize("extra, key, valid", CASES, ids=[c[1] for c in CASES])
def test_unknown_value_is_refused_when_the_config_is_built(extra, key, valid):
    raw = Config.load(preset_path("cpu-small"), extra).to_dict()
    section = raw
    *path, last = key.split(".")
    for part in path:
        section = section[part]
    section[last] = "bogus42"
    with pytest.raises(ConfigError) as info:
        Config.from_dict(raw)
    message = str(info.value)
    assert key in message and "'bogus42'" in message, message
    for choice in valid:
        assert choice in message, (choice, message)


def test_every_valid_value_is_accepted():
    for key, valid in (("model.attention.score", choices.SCORES), ("model.attention.scaling", choices.SCALINGS),
                       ("train.optimizer", choices.OPTIMIZERS), ("train.precision", choices.PRECISIONS),
                       ("decode.penalty_mode", choices.PENALTY_MODES), ("model.coverage.type", choices.COVERAGE_TYPES),
                       ("data.batch_sort", choices.BATCH_SORTS)):
        for value in valid:
            # cosine scaling needs the general score (a cross-field rule of its own)
            extra = ["model.attention.scaling=sqrt"] if (key, value) == ("model.attention.score", "mlp") else []
            Config.load(preset_path("cpu-small"), [f"{key}={value}", *extra])
    for name, constrained in choices.TRANSFORMS.items():
        extra = ["model.attention.fertility.strategy=constant"] if constrained else []
        assert Config.load(preset_path("cpu-small"), [f"model.attention.transform={name}", *extra])


def test_predictor_level_is_a_choice():
    with pytest.raises(ConfigError, match=re.escape("level: unknown fertility level 'char' (known: subword, word)")):
        PredictorConfig.from_dict({"level": "char"})


def test_choices_are_immutable():
    with pytest.raises(TypeError):
        choices.TRANSFORMS["entmax42"] = False  # type: ignore[index]
    assert isinstance(choices.TRANSFORMS, MappingProxyType)
    assert isinstance(choices.CONSTRAINED_TRANSFORMS, frozenset)
    for name in dir(choices):
        value = getattr(choices, name)
        if name.isupper():
            assert isinstance(value, (tuple, frozenset, MappingProxyType, str)), name
    assert rules.CONSTRAINED_TRANSFORMS is choices.CONSTRAINED_TRANSFORMS
    assert not hasattr(rules, "declare_transform")


def test_registry_binds_every_declared_name_and_no_other():
    assert transforms.names() == sorted(choices.TRANSFORMS), "a declared transform has no function (or vice versa)"
    for name, constrained in choices.TRANSFORMS.items():
        assert transforms.get_transform(name).constrained is constrained
        assert rules.is_constrained(name) is constrained
    with pytest.raises(ValueError, match="not declared in scanmt.choices.TRANSFORMS"):
        transforms.register("entmax42", lambda z, u, mask: z)
    assert "entmax42" not in transforms.names()
