"""Atomic checkpoints.

A checkpoint is one ``torch.save`` dict::

    config      Config.to_dict()            (the full typed config)
    pipeline    TextPipeline.to_state()     (languages, sentencepiece model, vocabulary)
    model       model.state_dict()
    optimizer   optimizer.state_dict()      (training checkpoints only)
    progress    {"step", "epoch", "batch_in_epoch", "lr", "best_bleu", "bad_validations", ...}
    rng         {"torch", "python"}         (so a resumed run continues identically)
    version     format version

Files are written to a temporary name and renamed, so a killed run never
leaves a half-written checkpoint.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from scanmt.errors import ConfigError, DataError
from scanmt.io import atomic_open

FORMAT_VERSION = 1


def save_checkpoint(path: str | Path, payload: dict[str, Any]) -> None:
    with atomic_open(path, "wb") as fh:
        torch.save({**payload, "version": FORMAT_VERSION}, fh)


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: checkpoint not found")
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=False)
    except Exception as exc:  # torch raises many types for corrupt files
        raise DataError(f"{path}: not a readable checkpoint ({type(exc).__name__}: {exc})") from None
    if not isinstance(ckpt, dict) or "config" not in ckpt or "model" not in ckpt:
        raise DataError(f"{path}: not a scanmt checkpoint (missing config/model)")
    if ckpt.get("version") != FORMAT_VERSION:
        raise ConfigError(f"{path}: checkpoint format version {ckpt.get('version')} is not {FORMAT_VERSION}")
    return ckpt
