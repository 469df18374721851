"""A trained checkpoint with the data it was trained on, for the benchmarks that time or count trained models.

Trained attention is peaked: it caps entries, sends rows down recentring and bisection paths, and (in
decoding) ends hypotheses at their real length, where random weights do neither.  The benchmarks that
take ``--checkpoints`` / ``--model`` load a run's ``best.pt`` through :func:`load_trained`: its config,
its weights, its own prepared data and (for a constrained transform) the fertilities it trained with,
from the run's fertility cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from scanmt.config import Config
from scanmt.data.dataset import ParallelData
from scanmt.errors import DataError
from scanmt.model.build import build_model
from scanmt.model.checkpoint import load_checkpoint


@dataclass
class Trained:
    """``model`` (the checkpoint's weights, on the CPU, in training mode), its ``cfg``, and the training and
    validation splits of its own data, with fertilities attached when its transform is constrained."""

    path: Path
    cfg: Config
    model: torch.nn.Module
    train: ParallelData
    valid: ParallelData


def load_trained(path: str | Path) -> Trained:
    """The checkpoint at ``path`` with its data (see the module docstring).

    Raises:
        DataError: no checkpoint there, or its data folder (``data.dir``) is gone.
    """
    from scanmt.fertility.setup import setup_fertility
    from scanmt.training.trainer import load_train_data

    ckpt = load_checkpoint(path)
    cfg = Config.from_dict(ckpt["config"])
    if not (Path(cfg.data.dir) / "meta.json").exists():
        raise DataError(f"{path}: the data it was trained on ({cfg.data.dir}) is not there; the benchmark times "
                        "a trained model on its own batches")
    data = load_train_data(cfg)
    fert = setup_fertility(cfg, data.train, data.valid)
    model = build_model(cfg, len(data.pipeline.vocab))
    model.load_state_dict(ckpt["model"])
    model.train()
    train, valid = (fert.train, fert.valid) if fert is not None else (data.train, data.valid)
    return Trained(Path(path), cfg, model, train, valid)
