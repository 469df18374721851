"""Checkpoint averaging: one model whose weights are the element-wise mean of several checkpoints' weights.

The mean of the weights of the last few validations of one run usually translates better than any of
them, most of all when the learning rate has not decayed to zero (an inverse square-root schedule), as
fairseq's ``scripts/average_checkpoints.py`` does for its users.  A training run keeps
the checkpoints to average with ``train.keep_checkpoints: N`` (``RUN/checkpoints/stepS.pt``, weights only; each
records the id of the run that saved it, :func:`run_of`, so that a run's own are told from another run's there);
``scanmt average`` writes the mean as an ordinary checkpoint that ``translate``, ``evaluate`` and
``tune-penalties`` take.

Only checkpoints of one model can be averaged: the same ``model`` config section, text pipeline
(vocabulary and subword model) and fertility provider, and the same parameter names and shapes.  Floating
point tensors are averaged in float64 and stored in their own dtype; any other tensor (an integer
buffer) must be equal in all of them.  The result takes everything else (config, pipeline, fertility
provider, progress) from the checkpoint of the latest step, has no optimizer state (it cannot resume a
run), and records its sources as ``averaged_from``: ``[{"file", "step"}, ...]``.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any, Sequence

import torch

from scanmt.config import config_differences, with_defaults
from scanmt.errors import ConfigError, DataError, ScanmtError
from scanmt.model.build import upgraded_weights
from scanmt.model.checkpoint import Checkpoint

#: the folder of a run where ``train.keep_checkpoints`` puts its checkpoints
KEPT_DIR = "checkpoints"
_KEPT = re.compile(r"step(\d+)\.pt")


def kept_path(run_dir: str | Path, step: int) -> Path:
    """Where a run keeps the checkpoint of the validation at ``step``."""
    return Path(run_dir) / KEPT_DIR / f"step{step}.pt"


def kept_checkpoints(run_dir: str | Path) -> list[Path]:
    """The checkpoints a run kept (``RUN/checkpoints/stepS.pt``), oldest step first."""
    folder = Path(run_dir) / KEPT_DIR
    if not folder.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in folder.iterdir() if (m := _KEPT.fullmatch(p.name)) and p.is_file()]
    return [p for _, p in sorted(found)]


def run_of(ckpt: Checkpoint) -> str:
    """The id of the training run that saved ``ckpt`` (its ``progress["run"]``, the same in all the checkpoints of
    one run, across ``--resume``); "" for a checkpoint saved before runs had ids."""
    return str((ckpt.progress or {}).get("run") or "")


def saved_by(path: Path, run: str) -> bool:
    """Whether the file ``path`` is a checkpoint that the run ``run`` saved (False for another run's, or a file
    that is not a readable checkpoint)."""
    try:
        return run_of(Checkpoint.load(path)) == run
    except ScanmtError:
        return False


def step_of(ckpt: Checkpoint) -> int:
    """The training step a checkpoint was saved at (-1 when it does not say)."""
    return int((ckpt.progress or {}).get("step", -1))


def average_checkpoints(ckpts: Sequence[Checkpoint]) -> Checkpoint:
    """The checkpoint whose weights are the mean of ``ckpts``' weights (see the module docstring).

    Raises :class:`ConfigError` for fewer than two checkpoints or checkpoints of different models, and
    :class:`DataError` for weights that do not match (names, shapes, dtypes, unequal integer tensors).
    """
    if len(ckpts) < 2:
        raise ConfigError(f"averaging needs at least 2 checkpoints, got {len(ckpts)}")
    for c in ckpts:
        if c.pipeline is None:
            raise DataError(f"{c.name}: not an NMT checkpoint (it has no text pipeline); only NMT models are averaged")
    # the parameter names of checkpoints written before a rename (a run resumed across it keeps both kinds)
    ckpts = [dataclasses.replace(c, weights=upgraded_weights(with_defaults(c.config)["model"]["arch"], c.weights))
             for c in ckpts]
    newest = max(ckpts, key=step_of)
    for c in ckpts:
        _check_same_model(newest, c)
    weights = {name: _mean(name, [c.weights[name] for c in ckpts], ckpts) for name in newest.weights}
    sources = [{"file": c.name, "step": step_of(c)} for c in ckpts]
    return Checkpoint(config=newest.config, weights=weights, pipeline=newest.pipeline, fertility=newest.fertility,
                      data_digest=newest.data_digest, progress=newest.progress,
                      extra={**newest.extra, "averaged_from": sources})


def _check_same_model(ref: Checkpoint, other: Checkpoint) -> None:
    # keys added to the config since a checkpoint was saved count at their defaults
    diffs = config_differences({"model": with_defaults(other.config).get("model")},
                               {"model": with_defaults(ref.config).get("model")})
    if diffs:
        key, a, b = diffs[0]
        raise ConfigError(f"{other.name} and {ref.name} are different models (their model config sections differ: "
                          f"{key} = {a!r} against {b!r})")
    if not _equal(other.pipeline, ref.pipeline):
        raise ConfigError(f"{other.name} and {ref.name} have different text pipelines (languages, subword model "
                          "or vocabulary)")
    if not _equal(other.fertility, ref.fertility):
        raise ConfigError(f"{other.name} and {ref.name} were trained with different fertility providers")
    if other.weights.keys() != ref.weights.keys():
        missing = sorted(set(ref.weights) ^ set(other.weights))
        raise DataError(f"{other.name} and {ref.name} have different parameters: {', '.join(missing[:5])}")


def _mean(name: str, tensors: list[torch.Tensor], ckpts: Sequence[Checkpoint]) -> torch.Tensor:
    first = tensors[0]
    for t, c in zip(tensors, ckpts):
        if t.shape != first.shape or t.dtype != first.dtype:
            raise DataError(f"{c.name}: parameter {name} is {t.dtype} {tuple(t.shape)}, but "
                            f"{first.dtype} {tuple(first.shape)} in {ckpts[0].name}")
    if not first.is_floating_point():
        for t, c in zip(tensors, ckpts):
            if not torch.equal(t, first):
                raise DataError(f"{c.name}: the integer tensor {name} differs from {ckpts[0].name}'s "
                                "(only floating-point weights can be averaged)")
        return first.clone()
    total = torch.zeros(first.shape, dtype=torch.float64)
    for t in tensors:
        total += t.detach().to("cpu", torch.float64)
    return (total / len(tensors)).to(first.dtype)


def _equal(a: Any, b: Any) -> bool:
    """Equality of nested checkpoint values (dicts, lists, tensors, bytes, numbers)."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape and bool(
            torch.equal(a.cpu(), b.cpu()))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b
