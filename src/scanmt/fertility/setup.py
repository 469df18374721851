"""Fertility bounds for training a constrained model (``model.attention.fertility``).

Fertilities of the train and valid splits come from the cache next to the prepared data
(:class:`scanmt.fertility.strategies.FertilitySource`); the provider (constant value, guided
table, predictor weights or the oracle) is built once and returned so that it can be stored in
checkpoints for translation.  Whether the config's transform and strategy fit was checked when
the config was built (:mod:`scanmt.fertility.rules`).
"""

from __future__ import annotations

from dataclasses import dataclass

from scanmt.choices import STRATEGIES
from scanmt.config import Config
from scanmt.data.dataset import ParallelData
from scanmt.fertility.providers import FertilityProvider
from scanmt.fertility.rules import check_strategy, is_constrained
from scanmt.fertility.strategies import source_from_config


@dataclass
class FertilitySetup:
    provider: FertilityProvider
    train: ParallelData
    valid: ParallelData


def setup_fertility(cfg: Config, train: ParallelData, valid: ParallelData) -> FertilitySetup | None:
    """Attach cached fertilities to ``train``/``valid`` if the transform is constrained."""
    fc = cfg.model.attention.fertility
    if not is_constrained(cfg.model.attention.transform):
        return None
    if fc.strategy not in STRATEGIES:  # a Config built in code, which no rule has checked
        check_strategy(cfg.model.attention.transform, fc.strategy)
    source = source_from_config(cfg.data.dir, fc)
    provider = source.provider()
    return FertilitySetup(provider, source.attach(train, "train"), source.attach(valid, "valid"))
