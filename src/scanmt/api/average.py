"""``average``: one checkpoint whose weights are the mean of several checkpoints of one model.

The checkpoints are given as files (``models``), or as a training run whose last validations were kept
(``run`` with ``train.keep_checkpoints`` > 0: the newest ``last`` of the files of ``RUN/checkpoints/stepS.pt``
that this run saved).  What a user of ``--run`` asks for is that run's model, so a file there that another run
saved (a stale run's checkpoints left in the folder, a copied file, any file that is not a checkpoint) is never
averaged: the run's own are those whose run id (:func:`scanmt.model.averaging.run_of`) is that of
``RUN/last.pt`` (or ``best.pt``), and the summary names the files left out.  A run folder with neither, or
whose ``last.pt`` was saved before runs had ids, is refused: give the files with ``models``.
The rules (same model, vocabulary and fertility provider; float64 mean) are
:func:`scanmt.model.averaging.average_checkpoints`'.  The result is written atomically to ``out`` and
translates like any ``best.pt``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from scanmt.api.arguments import check_type
from scanmt.api.requests import CommandRequest, option
from scanmt.config import Range
from scanmt.errors import ConfigError, ScanmtError

if TYPE_CHECKING:
    from scanmt.model.checkpoint import Checkpoint


@dataclass(frozen=True)
class AverageRequest(CommandRequest):
    """``scanmt average``: the mean of ``models``' weights, or of the newest ``last`` kept checkpoints of
    ``run``, written to ``out``."""

    COMMAND = "average"
    out: Path
    #: checkpoint files to average (two or more); or
    models: tuple[str, ...] = ()
    #: a training run folder whose own kept checkpoints (``RUN/checkpoints/stepS.pt`` that it saved) are averaged
    run: Path | None = None
    #: with ``run``: how many of its newest own kept checkpoints (0 = all it kept)
    last: int = option(0, range=Range(0, note="0 = all kept"))

    def __post_init__(self) -> None:
        super().__post_init__()
        if bool(self.models) == (self.run is not None):
            raise ConfigError("give the checkpoints to average as --models FILE FILE ... or as --run DIR, not both")
        if self.last and self.run is None:
            raise ConfigError("--last N counts the kept checkpoints of --run DIR; with --models give the files")

    def checkpoint_files(self) -> list[Path]:
        """The files to average: ``models``, or the files among which :func:`own_checkpoints` chooses those of
        ``run`` (every kept checkpoint there, oldest step first; at least ``last`` of them)."""
        if self.models:
            return [Path(m) for m in self.models]
        from scanmt.model.averaging import KEPT_DIR, kept_checkpoints

        kept = kept_checkpoints(self.run)
        if not kept:
            raise ConfigError(f"{self.run}: no kept checkpoints in {self.run / KEPT_DIR} (train with "
                              "train.keep_checkpoints=N to keep the last N validations)")
        if self.last > len(kept):
            raise ConfigError(f"--last {self.last}: {self.run / KEPT_DIR} keeps only {len(kept)} checkpoints")
        return kept


def own_checkpoints(run: Path, ours: str, files: list[Path], last: int) -> tuple[list[Checkpoint], list[str]]:
    """The checkpoints among ``files`` (the kept checkpoints of the run folder ``run``, oldest step first) that the
    run ``ours`` (:func:`run_checkpoint`) saved, loaded, oldest first: the newest ``last`` of them (0: all); and the
    files left out as another run's (or not checkpoints), read from the newest down to the oldest one needed.
    Raises :class:`ConfigError` when fewer than ``last`` are its own."""
    from scanmt.model.averaging import KEPT_DIR, run_of
    from scanmt.model.checkpoint import Checkpoint

    own: list[Checkpoint] = []
    left_out: list[str] = []
    for f in reversed(files):
        if last and len(own) == last:
            break
        try:
            ckpt = Checkpoint.load(f)
        except ScanmtError:
            ckpt = None
        if ckpt is not None and run_of(ckpt) == ours:
            own.append(ckpt)
        else:
            left_out.append(str(f))
    left_out.reverse()
    if last and len(own) < last:
        raise ConfigError(f"--last {last}: {run / KEPT_DIR} keeps only {len(own)} checkpoints of this run (left out, "
                          f"saved by another run: {', '.join(left_out)})")
    return own[::-1], left_out


def run_checkpoint(run: Path) -> tuple[Path, str]:
    """``(checkpoint, run id)``: the checkpoint of the run folder ``run`` that tells its run id (``last.pt``, else
    ``best.pt``) and that id; a :class:`ConfigError` when there is none, or it was saved before runs had ids."""
    from scanmt.model.averaging import KEPT_DIR, run_of
    from scanmt.model.checkpoint import Checkpoint

    for name in ("last.pt", "best.pt"):
        if (run / name).is_file():
            ours = run_of(Checkpoint.load(run / name))
            if not ours:
                raise ConfigError(f"--run {run}: {run / name} was saved before scanmt recorded which run saved a "
                                  f"checkpoint, so this run's in {run / KEPT_DIR} cannot be told from others; give "
                                  "the files to average with --models")
            return run / name, ours
    raise ConfigError(f"--run {run}: no last.pt or best.pt tells which checkpoints in {run / KEPT_DIR} this run "
                      "saved; give the files to average with --models")


@dataclass
class AverageResult:
    """What was averaged and where it went."""

    out: Path
    #: (file, training step) of each averaged checkpoint, in the order given
    sources: list[tuple[str, int]]
    #: the state dict's tensors (parameters and buffers) and their numbers of values
    tensors: int
    values: int
    seconds: float
    #: with ``run``: the files of ``RUN/checkpoints`` left out as saved by another run (:func:`own_checkpoints`)
    left_out: list[str] = field(default_factory=list)
    #: the run's checkpoint that told its own kept checkpoints (None: the files were given)
    run_checkpoint: Path | None = None

    def summary(self) -> str:
        """What ``scanmt average`` prints."""
        steps = ", ".join(f"{s:,}" if s >= 0 else "?" for _, s in self.sources)
        return "\n".join([
            f"averaged {len(self.sources)} checkpoints (steps {steps}): {self.tensors} tensors, {self.values:,} values",
            *(f"  {f}" for f, _ in self.sources),
            *([f"  left out, saved by another run than {self.run_checkpoint}'s: {', '.join(self.left_out)}"]
              if self.left_out else []),
            f"  -> {self.out} ({self.seconds:.1f} s); it translates like a best.pt (scanmt translate --model)",
        ])


def average(request: AverageRequest) -> AverageResult:
    """Run an :class:`AverageRequest`."""
    from scanmt.io import check_outputs
    from scanmt.model.averaging import average_checkpoints, step_of
    from scanmt.model.checkpoint import Checkpoint

    check_type("average", "request", request, AverageRequest)
    t0 = time.time()
    files = request.checkpoint_files()
    check_outputs({"--out": request.out}, inputs={f"averaged checkpoint {i + 1}": f for i, f in enumerate(files)})
    told_by: Path | None = None
    if request.run is None:
        ckpts, left_out = [Checkpoint.load(f) for f in files], []
    else:
        told_by, ours = run_checkpoint(request.run)
        ckpts, left_out = own_checkpoints(request.run, ours, files, request.last)
    averaged = average_checkpoints(ckpts)
    averaged.save(request.out)
    return AverageResult(out=request.out, sources=[(c.name, step_of(c)) for c in ckpts], tensors=len(averaged.weights),
                         values=sum(w.numel() for w in averaged.weights.values()), seconds=time.time() - t0,
                         left_out=left_out, run_checkpoint=told_by)
