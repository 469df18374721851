"""When a grid may still start a run: ``scanmt experiment run --deadline``.

A machine lent for a few hours, a batch job with a wall-clock limit: a run started too late is killed
before it ends, and on a machine that does not outlive the job its checkpoints go with it.  With a
deadline the pool starts a run only when it is expected to end before it.

A run's time is estimated from the runs of the same grid that finished before it (:class:`StepTimes`, read
from their step markers by :func:`scanmt.experiments.progress.step_times`: a step's wall-clock time, or, on
one CPU thread, its CPU time when that is less, so that a run that waited behind other jobs does not make
every estimate after it too long):

* each step it still has to do (translate, evaluate, stress, ...) takes the median of that step's seconds
  over the finished runs of its system, or over every finished run of the grid when its own system has
  none;
* its training takes the median seconds per update times the updates still to go: the median updates of
  a finished training less the updates a resumed one has done.

Where the grid has runs whose training was CPU-timed, only those count (:func:`expected_seconds`).

A run without an estimate (no finished run has one of its steps) starts, and its start line says so;
once the deadline has passed, none starts.  A run not started is *deferred*: rerunning the same command
continues it.
"""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from scanmt.errors import ConfigError

#: ``+2h30m``, ``+90m``, ``+1.5h``, ``+45s``: a span from now (hours, minutes, seconds, each at most once)
_SPAN = re.compile(r"\+((?:\d+(?:\.\d+)?[hms])+)")
_SPAN_PART = re.compile(r"(\d+(?:\.\d+)?)([hms])")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0}
_CLOCK = re.compile(r"(\d{1,2}):(\d{2})")
_FORMS = "+DURATION (+2h30m, +90m, +45s), HH:MM (its next occurrence) or YYYY-MM-DD HH:MM[:SS]"


def parse_deadline(text: str, now: float | None = None) -> float:
    """The deadline ``text`` as seconds since the epoch (``now``: the current time, for tests).

    Raises:
        ConfigError: ``text`` is none of the forms, a span of zero, or a date already past.
    """
    now = time.time() if now is None else now
    t = text.strip()
    span = _SPAN.fullmatch(t.replace(" ", ""))
    if span:
        parts = _SPAN_PART.findall(span.group(1))
        units = [unit for _, unit in parts]
        if len(set(units)) != len(units):
            raise ConfigError(f"--deadline {text!r}: a unit given twice; expected {_FORMS}")
        seconds = sum(float(n) * _UNIT_SECONDS[unit] for n, unit in parts)
        if seconds <= 0:
            raise ConfigError(f"--deadline {text!r}: a span of zero; expected {_FORMS}")
        return now + seconds
    clock = _CLOCK.fullmatch(t)
    if clock:
        hour, minute = int(clock.group(1)), int(clock.group(2))
        if hour > 23 or minute > 59:
            raise ConfigError(f"--deadline {text!r}: no such time of day; expected {_FORMS}")
        today = datetime.fromtimestamp(now)
        at = today.replace(hour=hour, minute=minute, second=0, microsecond=0)
        if at.timestamp() <= now:
            at += timedelta(days=1)
        return at.timestamp()
    try:
        at = datetime.fromisoformat(t)
    except ValueError:
        raise ConfigError(f"--deadline {text!r}: expected {_FORMS}") from None
    if at.tzinfo is not None:
        at = at.astimezone().replace(tzinfo=None)
    if at.timestamp() <= now:
        raise ConfigError(f"--deadline {text!r}: {at:%Y-%m-%d %H:%M:%S} has passed already")
    return at.timestamp()


@dataclass(frozen=True)
class StepTimes:
    """How long the steps of one finished run took.

    Attributes:
        seconds: step name (``train``, ``translate``, ``evaluate.test2017``, ``stress``, ...) -> seconds.
        train_updates: the updates of its finished training (None: it trained no model of its own).
        attempt_updates: the updates of the attempt that ``seconds["train"]`` counts (a resumed training's
            last attempt; ``train_updates`` when unknown).
        cpu_timed: ``seconds["train"]`` is a one-thread training's CPU time, the time with a core to itself
            (False: wall-clock time, which also counts any wait for the CPU behind other jobs).
        cpu_recorded: its training's marker records CPU time (every one since CPU time was recorded; False:
            an older marker, a wall-clock time whatever its threads).  A training on several threads records
            it and is still timed by the wall clock: the CPU time of several threads says less (they also idle
            for want of work).
    """

    seconds: dict[str, float]
    train_updates: int | None = None
    attempt_updates: int | None = None
    cpu_timed: bool = False
    cpu_recorded: bool = False

    def seconds_per_update(self) -> float | None:
        """Training seconds per update (None: no training, or no update counted)."""
        updates = self.attempt_updates or self.train_updates
        if "train" not in self.seconds or not updates:
            return None
        return self.seconds["train"] / updates


@dataclass(frozen=True)
class Estimate:
    """A run's expected remaining seconds, and whose finished runs it comes from (``system`` or ``grid``), or
    ``own``: a training's own pace, which leaves the steps after it out (``experiment status`` only)."""

    seconds: float
    source: str


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def median_updates(history: Sequence[StepTimes]) -> float | None:
    """The median updates of the finished trainings in ``history`` (None: none trained)."""
    return _median([h.train_updates for h in history if h.train_updates])


def _step_seconds(step: str, updates_done: int, history: Sequence[StepTimes],
                  planned: int | None = None) -> float | None:
    """The expected seconds of ``step`` from ``history`` (None: no finished run has it); a training makes
    ``planned`` updates in all where that is known, else the median of ``history``'s."""
    if step != "train":
        return _median([h.seconds[step] for h in history if step in h.seconds])
    rate = _median([r for h in history if (r := h.seconds_per_update()) is not None])
    updates = planned or median_updates(history)
    if rate is None or updates is None:
        return None
    return rate * max(0.0, updates - updates_done)


def expected_seconds(steps: Sequence[str], updates_done: int, own: Sequence[StepTimes],
                     grid: Sequence[StepTimes], planned: int | None = None,
                     bound: int | None = None, pace: float | None = None) -> Estimate | None:
    """The expected seconds of a run's remaining ``steps``, from the finished runs of its own system (``own``)
    when they have every step, else from every finished run of the grid (``grid``); None when neither has.

    ``updates_done``: the updates its training has done already (0 for a new run); ``planned``: the updates
    it will make in all where its config fixes them (``runner.planned_updates``; None: the median of the finished
    runs' is taken, which early stopping may put far from a fixed-epoch run's); ``bound``: the most updates its
    config allows (``train.max_steps``; None: no such bound), taken in place of the median where the estimate
    comes from the grid's other systems, whose budget may be another (a Transformer's 16,000 updates beside an
    LSTM's 18,000 in one folder).  Where the grid has runs
    whose training was CPU-timed (:attr:`StepTimes.cpu_timed`), the runs timed before CPU time was recorded
    (:attr:`StepTimes.cpu_recorded`) do not count: their wall-clock times may include hours of waiting behind
    other jobs, and one such run would make every later run of its system look too long to start.  A training
    on several threads records its CPU time and still counts, by its wall time: no better time of it exists,
    and its system's own (a Transformer on two threads beside one-thread LSTMs) says more than other systems'.

    ``pace``: seconds per update that a training of this system has been seen to take (its own, or another
    seed's: ``progress.own_pace``), measured on this machine now; it takes the place of the finished runs'
    speed, which may be another architecture's, or another processor's (runs restored from an archive), or
    another precision's.
    """
    if any(h.cpu_timed for h in grid):
        own = [h for h in own if h.cpu_timed or h.cpu_recorded]
        grid = [h for h in grid if h.cpu_timed or h.cpu_recorded]
    for source, history in (("system", own), ("grid", grid)):
        updates = planned if source == "system" else planned or bound
        parts = [_step_seconds(step, updates_done, history, updates) for step in steps]
        if pace is not None and "train" in steps:
            total = updates or median_updates(history)
            parts[steps.index("train")] = None if total is None else pace * max(0.0, total - updates_done)
        if history and all(p is not None for p in parts):
            return Estimate(sum(p for p in parts if p is not None), source)
    return None


def defer_reason(deadline: float, now: float, estimate: Estimate | None) -> str | None:
    """Why a run may not start now (None: it may): the deadline has passed, or it would end after it."""
    left = deadline - now
    if left <= 0:
        return f"the deadline ({clock(deadline)}) has passed"
    if estimate is not None and estimate.seconds > left:
        whose = "its system's" if estimate.source == "system" else "the grid's"
        return (f"expected to take {estimate.seconds / 60:.0f} min (from {whose} finished runs), "
                f"{left / 60:.0f} min left before the deadline ({clock(deadline)})")
    return None


def clock(at: float) -> str:
    """``at`` (seconds since the epoch) as local ``YYYY-MM-DD HH:MM``."""
    return datetime.fromtimestamp(at).strftime("%Y-%m-%d %H:%M")
