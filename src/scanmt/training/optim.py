"""Optimizers and learning-rate schedules (``train.lr_schedule``).

``sgd``: plain SGD (the paper: lr 1.0).  ``adam``: Adam (betas 0.9, 0.999).

Schedules, for update k = 1, 2, ... with peak rate ``lr`` and warm-up W = ``warmup_steps``:

* ``epoch_decay`` (OpenNMT-py's ``start_decay_at``): from epoch ``lr_decay_start`` on (1-based),
  and also from the first validation whose perplexity does not improve, the epoch's rate is the
  previous one times ``lr_decay``; the first W updates use ``rate * k / W``.
* ``inverse_sqrt`` (Vaswani et al. 2017; fairseq's ``inverse_sqrt``): ``lr * min(k / W, sqrt(W / k))``,
  linear up to ``lr`` at update W, then proportional to 1/sqrt(k); no epoch decay.
"""

from __future__ import annotations

import math

import torch

from scanmt.config import TrainConfig


def build_optimizer(params, cfg: TrainConfig) -> torch.optim.Optimizer:
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(params, lr=cfg.lr)
    # adam: the other of scanmt.choices.OPTIMIZERS (checked when the config was built)
    return torch.optim.Adam(params, lr=cfg.lr, betas=(0.9, 0.999))


def set_lr(opt: torch.optim.Optimizer, lr: float) -> None:
    for g in opt.param_groups:
        g["lr"] = lr


def epoch_lr(lr: float, epoch: int, cfg: TrainConfig, decay_started: bool) -> float:
    """The epoch's rate for 1-based ``epoch`` given the previous epoch's rate (``epoch_decay``;
    ``inverse_sqrt`` keeps ``lr``)."""
    if cfg.lr_schedule == "epoch_decay" and epoch > 1 and (epoch >= cfg.lr_decay_start or decay_started):
        return lr * cfg.lr_decay
    return lr


def update_lr(epoch_rate: float, step: int, cfg: TrainConfig) -> float:
    """The lr of update ``step + 1`` (``step`` updates done), given the epoch's rate from :func:`epoch_lr`."""
    k, warmup = step + 1, cfg.warmup_steps
    if cfg.lr_schedule == "inverse_sqrt":  # warmup > 0: checked when the config was built
        return cfg.lr * min(k / warmup, math.sqrt(warmup / k))
    if k <= warmup:
        return epoch_rate * (k / warmup)
    return epoch_rate
