"""``average``: one checkpoint whose weights are the mean of several checkpoints of one model.

The checkpoints are given as files (``models``), or as a training run whose last validations were kept
(``run`` with ``train.keep_checkpoints`` > 0: its newest ``last`` files of ``RUN/checkpoints/stepS.pt``).
The rules (same model, vocabulary and fertility provider; float64 mean) are
:func:`scanmt.model.averaging.average_checkpoints`'.  The result is written atomically to ``out`` and
translates like any ``best.pt``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from scanmt.api.requests import CommandRequest, option
from scanmt.config import Range
from scanmt.errors import ConfigError


@dataclass(frozen=True)
class AverageRequest(CommandRequest):
    """``scanmt average``: the mean of ``models``' weights, or of the newest ``last`` kept checkpoints of
    ``run``, written to ``out``."""

    COMMAND = "average"
    out: Path
    #: checkpoint files to average (two or more); or
    models: tuple[str, ...] = ()
    #: a training run folder whose kept checkpoints (``RUN/checkpoints/stepS.pt``) are averaged
    run: Path | None = None
    #: with ``run``: how many of the newest kept checkpoints (0 = all it kept)
    last: int = option(0, range=Range(0, note="0 = all kept"))

    def __post_init__(self) -> None:
        super().__post_init__()
        if bool(self.models) == (self.run is not None):
            raise ConfigError("give the checkpoints to average as --models FILE FILE ... or as --run DIR, not both")
        if self.last and self.run is None:
            raise ConfigError("--last N counts the kept checkpoints of --run DIR; with --models give the files")

    def checkpoint_files(self) -> list[Path]:
        """The files to average: ``models``, or the newest ``last`` kept checkpoints of ``run``."""
        if self.models:
            return [Path(m) for m in self.models]
        from scanmt.model.averaging import KEPT_DIR, kept_checkpoints

        kept = kept_checkpoints(self.run)
        if not kept:
            raise ConfigError(f"{self.run}: no kept checkpoints in {self.run / KEPT_DIR} (train with "
                              "train.keep_checkpoints=N to keep the last N validations)")
        if self.last > len(kept):
            raise ConfigError(f"--last {self.last}: {self.run / KEPT_DIR} keeps only {len(kept)} checkpoints")
        return kept[-self.last:] if self.last else kept


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

    def summary(self) -> str:
        """What ``scanmt average`` prints."""
        steps = ", ".join(f"{s:,}" if s >= 0 else "?" for _, s in self.sources)
        return "\n".join([
            f"averaged {len(self.sources)} checkpoints (steps {steps}): {self.tensors} tensors, {self.values:,} values",
            *(f"  {f}" for f, _ in self.sources),
            f"  -> {self.out} ({self.seconds:.1f} s); it translates like a best.pt (scanmt translate --model)",
        ])


def average(request: AverageRequest) -> AverageResult:
    """Run an :class:`AverageRequest`."""
    from scanmt.io import check_outputs
    from scanmt.model.averaging import average_checkpoints, step_of
    from scanmt.model.checkpoint import Checkpoint

    t0 = time.time()
    files = request.checkpoint_files()
    check_outputs({"--out": request.out}, inputs={f"averaged checkpoint {i + 1}": f for i, f in enumerate(files)})
    ckpts = [Checkpoint.load(f) for f in files]
    averaged = average_checkpoints(ckpts)
    averaged.save(request.out)
    return AverageResult(out=request.out, sources=[(c.name, step_of(c)) for c in ckpts], tensors=len(averaged.weights),
                         values=sum(w.numel() for w in averaged.weights.values()), seconds=time.time() - t0)
