"""Optimizers and the OpenNMT learning-rate schedule.

``sgd``: plain SGD (the paper: lr 1.0).  ``adam``: Adam (betas 0.9, 0.999).
Schedule: from epoch ``lr_decay_start`` on (1-based), and also from the first
validation whose perplexity does not improve, the lr is multiplied by
``lr_decay`` at the start of every following epoch (OpenNMT-py's
``start_decay_at`` behaviour).
"""

from __future__ import annotations

import torch

from scanmt.config import TrainConfig
from scanmt.errors import ConfigError


def build_optimizer(params, cfg: TrainConfig) -> torch.optim.Optimizer:
    if cfg.lr <= 0:
        raise ConfigError(f"train.lr must be positive, got {cfg.lr}")
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(params, lr=cfg.lr)
    # adam: the other of scanmt.choices.OPTIMIZERS (checked when the config was built)
    return torch.optim.Adam(params, lr=cfg.lr, betas=(0.9, 0.999))


def set_lr(opt: torch.optim.Optimizer, lr: float) -> None:
    for g in opt.param_groups:
        g["lr"] = lr


def epoch_lr(lr: float, epoch: int, cfg: TrainConfig, decay_started: bool) -> float:
    """The lr to use for 1-based ``epoch`` given the previous epoch's lr."""
    if epoch > 1 and (epoch >= cfg.lr_decay_start or decay_started):
        return lr * cfg.lr_decay
    return lr
