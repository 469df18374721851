"""Fertility bounds for training a constrained model (``model.attention.fertility``).

Fertilities of the train and valid splits come from the cache next to the
prepared data (:func:`scanmt.fertility.compute.compute_fertility`); the provider
(constant value, guided table, predictor weights or the oracle) is returned so that it can
be stored in checkpoints for translation.  Whether the config's transform and strategy fit
was checked when the config was built (:mod:`scanmt.fertility.rules`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scanmt.config import Config
from scanmt.data.dataset import ParallelData
from scanmt.data.fertility import file_digest
from scanmt.fertility.compute import compute_fertility, require_predictor, train_guided
from scanmt.fertility.providers import ActualFertility, ConstantFertility, FertilityProvider, PredictedFertility
from scanmt.fertility.rules import FERTILITY_KEY, check_strategy, is_constrained
from scanmt.model.checkpoint import Checkpoint


@dataclass
class FertilitySetup:
    provider: FertilityProvider
    train: ParallelData
    valid: ParallelData


def load_provider(cfg: Config) -> tuple[FertilityProvider, dict[str, Any]]:
    """The provider for ``cfg`` and the keyword arguments of ``compute_fertility`` for it."""
    fc = cfg.model.attention.fertility
    align_dir = fc.align_dir or None
    if fc.strategy == ConstantFertility.name:
        return ConstantFertility(fc.value), {"value": fc.value}
    if fc.strategy == "guided":
        return train_guided(cfg.data.dir, align_dir), {"align_dir": align_dir}
    if fc.strategy == ActualFertility.name:
        return ActualFertility(), {"align_dir": align_dir}
    if fc.strategy != PredictedFertility.name:  # a Config built in code, which no rule has checked
        check_strategy(cfg.model.attention.transform, fc.strategy)
    path = require_predictor(fc.predictor, key=f"{FERTILITY_KEY}.predictor")
    provider = PredictedFertility.from_weights(Checkpoint.load(path).predictor_weights(), fc.add)
    return provider, {"predictor": provider.apply, "predictor_id": f"{file_digest(path)[:16]}-add{fc.add:g}"}


def setup_fertility(cfg: Config, train: ParallelData, valid: ParallelData) -> FertilitySetup | None:
    """Attach cached fertilities to ``train``/``valid`` if the transform is constrained."""
    fc = cfg.model.attention.fertility
    if not is_constrained(cfg.model.attention.transform):
        return None
    provider, kwargs = load_provider(cfg)
    data_dir = Path(cfg.data.dir)
    out = []
    for split, data in (("train", train), ("valid", valid)):
        cached = compute_fertility(data_dir, split, fc.strategy, **kwargs)
        out.append(data.with_fertility(cached.values, source=str(cached.path)))
    return FertilitySetup(provider, out[0], out[1])
