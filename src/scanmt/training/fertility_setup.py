"""Fertility bounds for training a constrained model (``model.attention.fertility``).

Fertilities of the train and valid splits come from the cache next to the
prepared data (:func:`scanmt.data.fertility.compute_fertility`); the provider
(constant value, guided table or predictor weights) is returned so that it can
be stored in checkpoints for translation.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scanmt.config import Config
from scanmt.data.dataset import ParallelData
from scanmt.data.fertility import ConstantFertility, compute_fertility, file_digest, require_predictor, train_guided
from scanmt.errors import ConfigError
from scanmt.model.fertility import PredictedFertility
from scanmt.model.transforms import get_transform
from scanmt.training.checkpoint import load_checkpoint

KEY = "model.attention.fertility"


@dataclass
class FertilitySetup:
    provider: Any
    train: ParallelData
    valid: ParallelData


def load_provider(cfg: Config) -> tuple[Any, dict[str, Any]]:
    """The provider for ``cfg`` and the keyword arguments of ``compute_fertility`` for it."""
    fc = cfg.model.attention.fertility
    align_dir = fc.align_dir or None
    if fc.strategy == "constant":
        return ConstantFertility(fc.value), {"value": fc.value}
    if fc.strategy == "guided":
        return train_guided(cfg.data.dir, align_dir), {"align_dir": align_dir}
    if fc.strategy == "actual":
        return "actual", {"align_dir": align_dir}
    if fc.strategy == "predicted":
        path = require_predictor(fc.predictor, key=f"{KEY}.predictor")
        provider = PredictedFertility.from_checkpoint_state(load_checkpoint(path), fc.add)
        return provider, {"predictor": provider.apply, "predictor_id": f"{file_digest(path)[:16]}-add{fc.add:g}"}
    raise ConfigError(f"{KEY}.strategy: unknown strategy {fc.strategy!r} (known: none, constant, guided, predicted, actual)")


def setup_fertility(cfg: Config, train: ParallelData, valid: ParallelData) -> FertilitySetup | None:
    """Attach cached fertilities to ``train``/``valid`` if the transform is constrained."""
    fc = cfg.model.attention.fertility
    transform = get_transform(cfg.model.attention.transform)
    if not transform.constrained:
        if fc.strategy != "none":
            raise ConfigError(
                f"{KEY}.strategy={fc.strategy!r} only applies to constrained transforms (csoftmax, csparsemax), "
                f"not {transform.name}"
            )
        return None
    if fc.strategy == "none":
        raise ConfigError(
            f"{KEY}.strategy: {transform.name} needs fertility bounds; set it to constant, guided, predicted or actual"
        )
    provider, kwargs = load_provider(cfg)
    data_dir = Path(cfg.data.dir)
    out = []
    for split, data in (("train", train), ("valid", valid)):
        cached = compute_fertility(data_dir, split, fc.strategy, **kwargs)
        out.append(data.with_fertility(cached.values, source=str(cached.path)))
    return FertilitySetup(provider, out[0], out[1])
