"""How far a run has come and how long its steps take: the step times of finished runs (from their step
markers), the updates a training has logged, and what they make of a run's remaining time (:class:`RunTimes`,
for ``experiment run --deadline`` and ``experiment status``).
"""

from __future__ import annotations

import csv
import os
import re
import statistics
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Collection, Sequence

from scanmt.experiments.common import read_json
from scanmt.experiments.deadline import Estimate, StepTimes, expected_seconds
from scanmt.experiments.layout import (DONE, LAST_CHECKPOINT, LOG, TRAIN_LOG, marker_stage, run_dirs, stage_marker,
                                       stage_markers)
from scanmt.experiments.spec import RunSpec
from scanmt.experiments.state import pending_steps, run_status


def step_times(run: Path) -> StepTimes | None:
    """How long the steps of a finished run took, from its step markers (None: not finished, or no marker
    records seconds).

    A step's time is its wall-clock seconds, or, for a step that ran on one CPU thread, its CPU seconds
    when less: the time it takes with its core to itself.  A run that waited for the CPU behind other jobs
    (a shared machine, a low priority) would otherwise make every later estimate too long; one that had the
    CPU gives its wall time.  With several threads the CPU time says less (threads also idle for want of
    work), and a GPU step records none, so those give their wall time, as do markers written before the
    CPU time was recorded.
    """
    if not (run / DONE).exists():
        return None
    seconds: dict[str, float] = {}
    train: dict[str, Any] = {}
    cpu_timed = cpu_recorded = False
    for marker in stage_markers(run):
        info = read_json(marker) or {}
        if isinstance(info.get("seconds"), (int, float)):
            wall = float(info["seconds"])
            cpu, threads = info.get("cpu_seconds"), info.get("threads")
            if isinstance(cpu, (int, float)) and marker_stage(marker) == "train":
                cpu_recorded = True
            if isinstance(cpu, (int, float)) and threads == 1:
                wall = min(wall, float(cpu))
                cpu_timed = cpu_timed or marker_stage(marker) == "train"
            seconds[marker_stage(marker)] = wall
        if marker_stage(marker) == "train":
            train = info
    if not seconds:
        return None
    updates = train.get("steps") if isinstance(train.get("steps"), int) else None
    attempt = train.get("attempt_steps") if isinstance(train.get("attempt_steps"), int) else None
    return StepTimes(seconds, updates, attempt, cpu_timed, cpu_recorded)


def updates_done(run: Path) -> int:
    """The updates an unfinished training has logged (the last step of ``RUN/metrics.csv``; 0 when it has
    not started, has no checkpoint to resume from, or logs elsewhere).  Training resumes from ``last.pt``,
    at most ``train.checkpoint_every`` updates before it."""
    if not (run / LAST_CHECKPOINT).exists() or stage_marker(run, "train").exists():
        return 0
    return logged_updates(run)


def logged_updates(run: Path) -> int:
    """The last step a training in ``run`` has logged in ``RUN/metrics.csv`` (0: none, or no such file)."""
    try:
        with open(run / TRAIN_LOG, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 4096))
            lines = fh.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return 0
    for line in reversed(lines):
        first = line.split(",", 1)[0].strip()
        if first.isdigit():
            return int(first)
    return 0


def logged_metric(run: Path, name: str) -> dict[int, float]:
    """Update -> the value of ``name`` (``valid/bleu``, ``train/elapsed_s``, ...) a training logged in
    ``RUN/metrics.csv``, in update order (a resumed run's repeated update: the last value); empty when there is
    none or the file cannot be read."""
    rows: dict[int, float] = {}
    try:
        with open(run / TRAIN_LOG, encoding="utf-8", newline="") as fh:
            for row in csv.reader(fh):
                if len(row) == 3 and row[1] == name and row[0].isdigit():
                    try:
                        rows[int(row[0])] = float(row[2])
                    except ValueError:
                        continue
    except (OSError, UnicodeDecodeError, csv.Error):
        return {}
    return dict(sorted(rows.items()))


#: the updates over which :func:`own_pace` measures a training's speed (a validation falls in them)
PACE_WINDOW = 2000


def own_pace(run: Path) -> float | None:
    """Seconds per update of the training in ``run`` over its last :data:`PACE_WINDOW` logged updates, its
    validations and saves included, from the ``train/elapsed_s`` it logs, or, in a run from before scanmt logged
    it, from the clock times of its log's resume and validation lines (:func:`log_points`).  None: fewer than
    two such points.  Where the points are further apart than the window, the last two count."""
    elapsed = logged_metric(run, "train/elapsed_s")
    if len(elapsed) < 2:
        elapsed = log_points(run)
    if len(elapsed) < 2:
        return None
    steps = list(elapsed)
    last = steps[-1]
    first = next(s for s in steps if s >= last - PACE_WINDOW)
    first = first if first < last else steps[-2]
    seconds = elapsed[last] - elapsed[first]
    return seconds / (last - first) if seconds > 0 else None


#: a worker's start line in ``RUN/log.txt`` (:meth:`scanmt.experiments.pool.Pool`), the date of the lines after it
_LOG_START = re.compile(r"^##### (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) start\b")
#: a training's log lines (``HH:MM:SS LEVEL message``) that name the update they were written at
_LOG_STEP = re.compile(r"^(\d\d:\d\d:\d\d) INFO (?:resumed from step (\d+) |step (\d+), epoch \d+: valid )")


def log_points(run: Path) -> dict[int, float]:
    """Update -> seconds into the training, from ``RUN/log.txt``: the clock times of the lines a training writes
    as it resumes (``resumed from step N``) and validates (``step N, epoch E: valid ...``), in the last stretch
    of the log that has two of them (a stretch: what one worker wrote, after its ``##### DATE TIME start`` line;
    the time between two workers is no training's).  A line's clock time is taken on the start line's date, a day
    later each time the clock goes back.  Empty when the log has no such stretch or cannot be read."""
    try:
        lines = (run / LOG).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return {}
    stretches: list[dict[int, float]] = []
    now: datetime | None = None
    for line in lines:
        if start := _LOG_START.match(line):
            now = datetime.strptime(start.group(1), "%Y-%m-%d %H:%M:%S")
            stretches.append({})
        elif now is not None and (point := _LOG_STEP.match(line)):
            clock = datetime.strptime(f"{now:%Y-%m-%d} {point.group(1)}", "%Y-%m-%d %H:%M:%S")
            while clock < now - timedelta(seconds=1):
                clock += timedelta(days=1)
            now = clock
            stretches[-1][int(point.group(2) or point.group(3))] = clock.timestamp()
    for points in reversed(stretches):
        if len(points) >= 2:
            return dict(sorted(points.items()))
    return {}


def max_updates(spec: RunSpec) -> tuple[int, bool] | None:
    """``(updates, exact)``: the updates the run's training makes in all (:func:`planned_updates`, exact) or at
    most (``train.max_steps``, which early stopping may cut short); None when its config bounds neither."""
    if (planned := planned_updates(spec)) is not None:
        return planned, True
    train = (spec.config or {}).get("train") or {}
    if spec.train is None or not isinstance(train.get("max_steps"), int) or train["max_steps"] <= 0:
        return None
    return int(train["max_steps"]), train.get("patience") == 0


def own_training_left(spec: RunSpec, updates: int, pace: float | None) -> Estimate | None:
    """The seconds the training of ``spec``, at update ``updates``, has left at its own ``pace`` (:func:`own_pace`)
    up to :func:`max_updates` (source ``own``: its training alone, for a run of a system no finished run
    tells the decoding of); None when the pace or the end is unknown."""
    end = max_updates(spec)
    if pace is None or end is None:
        return None
    return Estimate(pace * max(0, end[0] - updates), "own")


def planned_updates(spec: RunSpec) -> int | None:
    """The updates the run's training will make in all, where its config fixes them and its first epoch has
    been logged: no early stopping (``train.patience`` 0) and a validation at each epoch's end
    (``train.valid_every`` 0), so that the first ``valid/`` row of ``RUN/metrics.csv`` is the first epoch's
    updates: ``train.epochs`` times those, at most ``train.max_steps``.  None otherwise (early stopping,
    no epoch finished yet, or no training of its own)."""
    train = (spec.config or {}).get("train") or {}
    if spec.train is None or train.get("patience") != 0 or train.get("valid_every") != 0 or not train.get("epochs"):
        return None
    first = _first_validation(spec.dir / TRAIN_LOG)
    if first is None:
        return None
    planned = int(train["epochs"]) * first
    return min(planned, int(train["max_steps"])) if train.get("max_steps") else planned


def _first_validation(metrics: Path) -> int | None:
    """The step of the first ``valid/`` row of a ``metrics.csv`` (None: none, or no such file)."""
    try:
        with open(metrics, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                step, _, rest = line.partition(",")
                if rest.startswith("valid/") and step.strip().isdigit():
                    return int(step)
    except OSError:
        return None
    return None


class RunTimes:
    """The step times of a grid's finished runs, by system, and what they make of a run's remaining time; and the
    pace of the unfinished trainings of the folders it read (:func:`own_pace`): a training is estimated at the pace
    measured here (:meth:`pace`), not at the finished runs' speed, which may be another system's or another
    machine's."""

    def __init__(self, specs: Sequence[RunSpec] = ()) -> None:
        self.by_system: dict[str, list[StepTimes]] = {}
        self.paces: dict[str, list[float]] = {}
        for spec in specs:
            if run_status(spec) == "done":
                self.add(spec)
            elif (pace := own_pace(spec.dir)) is not None:
                self.paces.setdefault(spec.system, []).append(pace)

    def add(self, spec: RunSpec) -> None:
        """Add a finished run (one without step times adds nothing)."""
        self.add_dir(spec.system, spec.dir)

    def add_dir(self, system: str, run: Path) -> None:
        """Add the finished run in ``run`` of ``system`` (one without step times adds nothing)."""
        if (times := step_times(run)) is not None:
            self.by_system.setdefault(system, []).append(times)

    def add_others(self, specs: Sequence[RunSpec]) -> None:
        """Add the finished runs in the folders of ``specs`` (``OUT/runs/SYSTEM/seedK``) that are not among them:
        the systems a ``--systems`` left out, and other grids run into the same folder, so that a run of a
        system without finished runs is estimated from the whole folder's."""
        mine = {spec.dir.resolve() for spec in specs}
        for runs in sorted({spec.dir.parent.parent for spec in specs}):
            self.add_folder(runs, skip=mine)

    def add_folder(self, runs: Path, skip: Collection[Path] = ()) -> None:
        """Add the finished runs in ``runs`` (an ``OUT/runs`` folder of ``SYSTEM/seedK``), but those whose
        resolved path is in ``skip``."""
        for run in run_dirs(runs):
            if not run.is_dir() or run.resolve() in skip:
                continue
            if (run / DONE).exists():
                self.add_dir(run.parent.name, run)
            elif (run / LAST_CHECKPOINT).exists() and (pace := own_pace(run)) is not None:
                self.paces.setdefault(run.parent.name, []).append(pace)

    def pace(self, system: str) -> float | None:
        """The seconds per update a training of ``system`` is expected to take here: the median pace of its
        unfinished trainings read so far; else, where other systems have both an unfinished training and finished
        runs, its finished runs' speed scaled by theirs (the median of each such system's pace over its finished
        runs' seconds per update): finished runs restored from an archive trained on another processor, maybe in
        another precision, and the trainings here say how much faster or slower this machine is.  None: neither."""
        paces = self.paces.get(system)
        if paces:
            return statistics.median(paces)
        own = self._finished_rate(system)
        factors = [statistics.median(p) / rate for other, p in self.paces.items()
                   if p and (rate := self._finished_rate(other)) is not None]
        return own * statistics.median(factors) if own is not None and factors else None

    def _finished_rate(self, system: str) -> float | None:
        """The median seconds per update of ``system``'s finished runs (None: none with a training)."""
        rates = [r for times in self.by_system.get(system, []) if (r := times.seconds_per_update()) is not None]
        return statistics.median(rates) if rates else None

    def estimate(self, spec: RunSpec, updates: int | None = None, pace: float | None = None) -> Estimate | None:
        """The expected seconds of what ``spec`` still has to do (:func:`expected_seconds`); its training has
        done ``updates`` updates already (default: those a resume picks up, :func:`updates_done`), at ``pace``
        seconds per update (default: read from its folder, :func:`own_pace`)."""
        end = max_updates(spec)
        return self.estimate_steps(spec.system, pending_steps(spec),
                                   updates_done(spec.dir) if updates is None else updates, planned_updates(spec),
                                   end[0] if end is not None else None, own_pace(spec.dir) if pace is None else pace)

    def estimate_steps(self, system: str, steps: Sequence[str], updates: int = 0, planned: int | None = None,
                       bound: int | None = None, pace: float | None = None) -> Estimate | None:
        """The expected seconds of the ``steps`` of a run of ``system`` whose training has done ``updates`` (of
        ``planned`` in all, where known: :func:`planned_updates`; of at most ``bound``, its ``train.max_steps``,
        which an estimate from other systems' runs takes in place of their updates, as it takes the run's own
        ``pace`` (else its system's other trainings', :meth:`pace`) in place of their speed)."""
        grid = [t for times in self.by_system.values() for t in times]
        return expected_seconds(steps, updates, self.by_system.get(system, []), grid, planned, bound,
                                pace if pace is not None else self.pace(system))
