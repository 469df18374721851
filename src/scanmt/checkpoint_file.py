"""The checkpoint file as a plain dict: written atomically, read back checked (base level).

A checkpoint is one ``torch.save`` dict stamped with :data:`FORMAT_VERSION` (unchanged since
the first version); its keys are named by :class:`scanmt.model.checkpoint.Checkpoint`.  This
module knows only the file, so that any layer (the fertility predictor, training, the model)
can read and write checkpoints without importing :mod:`scanmt.model`.

It imports only :mod:`scanmt.errors`, :mod:`scanmt.io` and torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from scanmt.errors import ConfigError, DataError
from scanmt.io import atomic_open, write_error

FORMAT_VERSION = 1


def save_checkpoint(path: str | Path, payload: dict[str, Any]) -> None:
    """Write the checkpoint dict ``payload`` (atomically), stamped with the format version."""
    try:
        with atomic_open(path, "wb") as fh:
            torch.save({**payload, "version": FORMAT_VERSION}, fh)
    except RuntimeError as exc:  # torch reports a failed write as "[enforce fail at inline_container.cc ...]"
        raise write_error(path, exc, "torch.save") from None


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """The checkpoint dict in ``path``, checked to be a scanmt checkpoint of this format version."""
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
