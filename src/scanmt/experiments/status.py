"""Where a grid stands: ``scanmt experiment status OUT``.

A grid of dozens of runs takes hours or days.  This reads its experiment folder, writes nothing and takes
no lock, and says for each run of each grid recorded in ``OUT/grids/`` (in the order ``experiment run``
starts them, seeds by systems):

* ``done``: its test scores;
* ``training``: the update its training has logged, against the updates its system's finished runs took (a
  system with none: its own ``train.max_steps``, not another system's budget),
  its last and best validation BLEU so far, and its baseline's (the same seed's) at that update, so that a
  new system can be watched against the one it is meant to beat while it trains;
* ``decoding``: the step it is in (translate, evaluate, an extra split, the stress test);
* ``stopped``: a run no process holds that has work left (killed, failed or deferred), what a rerun of
  the grid command picks up, and the last line of its log (often the error);
* ``not started``.

A run is running while some process holds its folder's lock (``RUN/.lock``,
:func:`scanmt.processes.lock_held`), and a grid while one holds ``OUT/.lock``.  The time a run has left is
estimated as ``experiment run --deadline`` does it (:mod:`scanmt.experiments.deadline`), from the step
times of the folder's finished runs; the summary adds the runs' times up, once per run folder (a run of
two grids counts once), and divides each grid's by its own command's ``--workers`` (a queue runs its grids one
after another).  A training goes at the pace of its own runs where they have logged one (the ``train/elapsed_s``
a training logs over its last 2,000 updates, or its log's clock times,
:func:`~scanmt.experiments.progress.own_pace`), measured here and now, not at the finished runs' speed, which may
be another processor's (runs restored from an archive).  A system with no finished run yet is estimated from the
folder's other systems (marked ``*``), up to its own ``train.max_steps``; where no other system has finished
either, a training run gets its training's time alone, at its own pace, marked ``+``.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from scanmt.errors import ConfigError, DataError
from scanmt.experiments.archive.shared_work import read_origin
from scanmt.experiments.baselines import resolve_baselines
from scanmt.experiments.deadline import Estimate, median_updates
from scanmt.experiments.common import read_json
from scanmt.experiments.layout import (LAST_CHECKPOINT, LOCK_FILE, METRICS, SPEC, TRAIN_LOG, run_dir, runs_dir,
                                       seed_name, system_dir)
from scanmt.experiments.pool import describe
from scanmt.experiments.progress import (RunTimes, logged_metric, logged_updates, max_updates, own_pace,
                                        own_training_left, planned_updates)
from scanmt.experiments.report import format_rows, grid_records, last_log_line
from scanmt.experiments.spec import RunSpec, stage_names
from scanmt.experiments.state import resume_note, run_state
from scanmt.processes import lock_held, lock_holder

#: a run's states, in the order the summary counts them
STATES = ("done", "training", "decoding", "stopped", "not started")


@dataclass(frozen=True)
class RunRow:
    """One run's row of the status table.

    Attributes:
        key: ``SYSTEM/seedK``.
        dir: its run folder.
        state: one of :data:`STATES`.
        detail: what it has done or is doing, in words.
        left: the expected seconds of what it still has to do (None: done, or no finished run to tell).
    """

    key: str
    dir: Path
    state: str
    detail: str
    left: Estimate | None = None


@dataclass(frozen=True)
class GridStatus:
    """The runs of one recorded grid, with the command that recorded it last."""

    name: str
    runs: list[RunRow]
    command: str

    def counts(self) -> str:
        """``10 done, 2 training, 24 not started``: the states that occur, in :data:`STATES` order."""
        n = {state: sum(r.state == state for r in self.runs) for state in STATES}
        return ", ".join(f"{n[state]} {state}" for state in STATES if n[state])


def planned_steps(rec: dict[str, Any], system: dict[str, Any]) -> list[str]:
    """The steps a run of ``system`` (a grid record's system) will do, as ``RunSpec.steps`` names them."""
    skipped = ({"train"} if system.get("reuse_model") else set()) | (set() if system.get("tune_penalties") else {"tune"})
    return [s for s in stage_names(rec.get("extra_splits") or [], bool(rec.get("stress_k"))) if s not in skipped]


def valid_bleus(run: Path) -> dict[int, float]:
    """Update -> the ``valid/bleu`` a training logged at it in ``RUN/metrics.csv`` (:func:`logged_metric`)."""
    return logged_metric(run, "valid/bleu")


def valid_bleu(run: Path) -> tuple[float, int, float] | None:
    """``(last, at update, best)`` of the ``valid/bleu`` a training logged in ``RUN/metrics.csv`` (None: none)."""
    rows = valid_bleus(run)
    if not rows:
        return None
    at = max(rows)
    return rows[at], at, max(rows.values())


def _expected_updates(spec: RunSpec, times: RunTimes) -> str:
    """`` of ~N`` / `` of N`` / `` of at most N``: the updates the run's training will make, from its config where it
    fixes them, else the median of its system's finished trainings, else its ``train.max_steps``, else the median
    of the folder's other trainings (whose budget may be another's); "" when nothing tells."""
    if (planned := planned_updates(spec)) is not None:
        return f" of ~{planned:,}"
    if (own := median_updates(times.by_system.get(spec.system, []))) is not None:
        return f" of ~{own:,.0f}"
    if (end := max_updates(spec)) is not None:
        return f" of {'' if end[1] else 'at most '}{end[0]:,}"
    other = median_updates([t for ts in times.by_system.values() for t in ts])
    return f" of ~{other:,.0f}" if other is not None else ""


def _training_detail(spec: RunSpec, times: RunTimes, updates: int, baseline: tuple[str, Path] | None,
                     pace: float | None) -> str:
    """``baseline``: the name of the system this one is compared with and its run folder of the same seed, whose
    validation BLEU at the same update follows this run's own (when it validated there); ``pace``: the run's
    seconds per update (:func:`own_pace`; None: unknown)."""
    text = f"update {updates:,}" + _expected_updates(spec, times)
    if pace is not None:
        text += f" ({pace:.2f} s per update)"
    if (bleu := valid_bleu(spec.dir)) is not None:
        last, at, best = bleu
        text += f"; valid BLEU {last:.2f} at update {at:,} (best {best:.2f})"
        if baseline is not None and (theirs := valid_bleus(baseline[1]).get(at)) is not None:
            text += f"; {baseline[0]} {theirs:.2f} there"
    return text


def _restored(run: Path) -> str:
    """"; restored ..." for a run restored from an archive of runs only (it has a
    :data:`~scanmt.experiments.layout.SHARED_ORIGIN`), else ""; status reads, so an unreadable record is said, not
    raised."""
    try:
        origin = read_origin(run)
    except DataError as exc:
        return f"; restored, its record of the shared work it trained on unreadable: {exc}"
    if origin is None:
        return ""
    return f"; restored from {origin.get('archive')}, trained on alignments {str(origin['alignments'])[:12]}"


def run_row(spec: RunSpec | None, key: str, folder: Path, times: RunTimes, steps: Sequence[str],
            baseline: tuple[str, Path] | None = None, bound: int | None = None) -> RunRow:
    """The row of the run in ``folder`` (``spec``: its ``spec.json``, None when it has none yet; ``steps``:
    the steps a run not started will do, for its estimate, and ``bound`` the most updates its training makes, as
    another seed's config of its system says; ``baseline``: the system it is compared with and that system's run
    folder of the same seed), from its :func:`~scanmt.experiments.state.run_state` and whether a process holds
    it."""
    system = key.split("/")[0]
    if spec is None:
        return RunRow(key, folder, "not started", "", times.estimate_steps(system, steps, bound=bound))
    state = run_state(spec.dir, spec)  # (the folder the spec names, as the runner sees it)
    if state.status == "done":
        return RunRow(key, folder, "done", describe(read_json(folder / METRICS)) + _restored(folder))
    pending = list(state.pending)
    if lock_held(folder / LOCK_FILE):
        if "train" in pending:
            updates, pace = logged_updates(folder), own_pace(spec.dir)
            left = times.estimate(spec, updates=updates, pace=pace) or own_training_left(spec, updates, pace)
            return RunRow(key, folder, "training", _training_detail(spec, times, updates, baseline, pace), left)
        done = sum(request is not None for _, request in spec.steps()) - len(pending)
        where = pending[0] if pending else "its summary"
        return RunRow(key, folder, "decoding", f"{where} ({done} of {done + len(pending)} steps done)",
                        times.estimate(spec))
    rerun = resume_note(spec).removeprefix(", ") or "starting afresh"
    if "train" in pending and (folder / LAST_CHECKPOINT).exists():
        rerun += f" (update {logged_updates(folder):,} logged)"
    last = last_log_line(folder, width=120)
    return RunRow(key, folder, "stopped", f"rerun: {rerun}" + (f"; log: {last}" if last else ""),
                    times.estimate(spec))


def _read_spec(folder: Path) -> RunSpec | None:
    """The run's ``spec.json`` (None: the run has not started); raises :class:`DataError` naming a file that is
    there but is no run spec (cut short, edited, or from another version of scanmt)."""
    path = folder / SPEC
    if not path.exists():
        return None
    raw = read_json(path)
    try:
        if not isinstance(raw, dict):
            raise TypeError("not a JSON object")
        return RunSpec.from_dict(raw)
    except (TypeError, KeyError, ValueError) as exc:
        raise DataError(f"{path}: not a run spec ({exc}); the next `experiment run` writes it again") from None


def grid_status(out: Path, rec: dict[str, Any], times: RunTimes) -> GridStatus:
    """The state of every run of the recorded grid ``rec`` (systems a ``--systems`` left out and never ran are
    not its runs)."""
    requested = set(rec.get("requested") or (s["name"] for s in rec["systems"]))
    systems = [s for s in rec["systems"] if s["name"] in requested or system_dir(out, s["name"]).is_dir()]
    try:
        baselines = resolve_baselines(rec, [s["name"] for s in rec["systems"]])
    except ConfigError:  # a record whose baseline is none of its systems: its rows go without the comparison
        baselines = {}
    specs: dict[tuple[str, int], RunSpec | DataError | None] = {}
    bounds: dict[str, int] = {}  # per system, train.max_steps as any of its seeds' specs says
    for seed in rec.get("seeds") or []:
        for system in systems:
            try:
                spec = specs[system["name"], seed] = _read_spec(run_dir(out, system["name"], seed))
            except DataError as exc:
                specs[system["name"], seed] = exc
                continue
            if spec is not None and (end := max_updates(spec)) is not None:
                bounds.setdefault(system["name"], end[0])
    runs = []
    for seed in rec.get("seeds") or []:
        for system in systems:
            folder = run_dir(out, system["name"], seed)
            key = f"{system['name']}/{seed_name(seed)}"
            spec = specs[system["name"], seed]
            if isinstance(spec, DataError):
                runs.append(RunRow(key, folder, "stopped", str(spec)))
                continue
            base = baselines.get(system["name"])
            against = (base, run_dir(out, base, seed)) if base and base != system["name"] else None
            runs.append(run_row(spec, key, folder, times, planned_steps(rec, system), against,
                                bounds.get(system["name"])))
    return GridStatus(rec["name"], runs, rec.get("command") or "")


def folder_status(out: Path, grids: Sequence[str] | None = None) -> list[GridStatus]:
    """The status of the grids recorded in ``out`` (``grids``: only these names)."""
    recs = grid_records(out)
    if grids:
        unknown = sorted(set(grids) - {rec["name"] for rec in recs})
        if unknown:
            names = ", ".join(rec["name"] for rec in recs)
            raise DataError(f"{out}: no grid named {', '.join(unknown)} recorded here (recorded: {names})")
        recs = [rec for rec in recs if rec["name"] in grids]
    times = RunTimes()
    times.add_folder(runs_dir(out))
    return [grid_status(out, rec, times) for rec in recs]


def workers_of(command: str) -> int:
    """The ``--workers`` of a recorded grid command (1 when it gives none)."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return 1
    for flag, value in zip(argv, argv[1:]):
        if flag == "--workers" and value.isdigit() and int(value) > 0:
            return int(value)
    return 1


def _duration(seconds: float) -> str:
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 90 else f"{seconds / 3600:.1f} h"


def _left_cell(r: RunRow) -> str:
    if r.state == "done":
        return ""
    if r.left is None:
        return "?"
    return _duration(r.left.seconds) + {"system": "", "own": " +"}.get(r.left.source, " *")


def render(out: Path, statuses: Sequence[GridStatus], *, brief: bool = False) -> str:
    """The status as text: who writes into ``out``, a table per grid, and the time left."""
    lock = out / LOCK_FILE
    lines = [f"{out}: " + (f"a grid is running, {lock_holder(lock)}" if lock_held(lock) else "no grid is running")]
    starred = partial = False
    for g in statuses:
        lines += ["", f"{g.name}: {len(g.runs)} runs, {g.counts()}"]
        shown = [r for r in g.runs if not (brief and r.state == "done")]
        if shown:
            rows = [[r.key, r.state, _left_cell(r), r.detail] for r in shown]
            lines += ["  " + row for row in format_rows(["run", "state", "left", "detail"], rows, left_columns=4).splitlines()]
        starred = starred or any(r.left is not None and r.left.source == "grid" for r in shown)
        partial = partial or any(r.left is not None and r.left.source == "own" for r in shown)
    todo: dict[Path, tuple[RunRow, int]] = {}  # a run of two grids counts once, with the first one's workers
    for g in statuses:
        for r in g.runs:
            if r.state != "done":
                todo.setdefault(r.dir.resolve(), (r, workers_of(g.command)))
    if todo:
        known = [(r.left.seconds, workers) for r, workers in todo.values() if r.left is not None]
        total = sum(seconds for seconds, _ in known)
        text = f"left: {len(todo)} run(s)"
        if known:
            text += f", {'at least' if partial else 'about'} {_duration(total)} of run time"
            counts = sorted({workers for _, workers in known})
            if counts != [1]:  # each grid's runs over its own command's --workers (grids run one after another)
                whose = (f"the grid command's {counts[0]} workers" if len(counts) == 1
                         else "each grid command's workers (" + ", ".join(map(str, counts)) + ")")
                text += f", {_duration(sum(seconds / workers for seconds, workers in known))} with {whose}"
        unknown = len(todo) - len(known)
        if unknown:
            text += f" ({unknown} without an estimate: no finished run has their steps)"
        lines += ["", text]
    else:
        lines += ["", "every run is done"]
    if starred:
        lines.append("* this system has no finished run yet: estimated from the folder's other systems' runs, "
                     "its training at its own runs' pace where they have logged one")
    if partial:
        lines.append("+ its training alone, at its own pace: no finished run tells how long the steps after it take")
    return "\n".join(lines)


def status_command(folder: str | Path, grids: Sequence[str] | None = None, *, brief: bool = False) -> int:
    """``scanmt experiment status``: print where the grids of ``folder`` stand; exit status 0."""
    out = Path(folder).resolve()
    print(render(out, folder_status(out, grids), brief=brief))
    return 0
