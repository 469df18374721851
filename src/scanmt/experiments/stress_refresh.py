"""``scanmt stress --boundary-only`` on a finished grid run's stress folder: the run found and held locked
(:func:`finished_run_of_stress`), and the new numbers copied into its ``metrics.json``
(:func:`refresh_stress_metrics`).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

from scanmt.errors import BusyError, DataError
from scanmt.experiments.common import read_json, write_json
from scanmt.experiments.layout import DONE, METRICS, SPEC
from scanmt.experiments.run_metrics import stress_metrics
from scanmt.experiments.spec import RunSpec
from scanmt.io import LOCK_FILE
from scanmt.processes import lock_holder, try_lock


@contextlib.contextmanager
def finished_run_of_stress(stress_dir: Path) -> Iterator[RunSpec | None]:
    """The finished grid run whose stress folder ``stress_dir`` is (``RUN/stress`` of a run with ``spec.json``,
    ``DONE`` and a readable ``metrics.json``), held locked while the block runs, so that no grid worker runs it
    meanwhile; None where ``stress_dir`` is no such folder.  Raises BusyError while a worker holds the run."""
    stress_dir = Path(stress_dir).resolve()
    run = stress_dir.parent
    spec_doc = read_json(run / SPEC)
    if spec_doc is None or read_json(run / METRICS) is None or not (run / DONE).exists():
        yield None
        return
    spec = RunSpec.from_dict(spec_doc)
    if spec.stress is None or Path(spec.stress.out).resolve() != stress_dir:
        yield None
        return
    lock = try_lock(run / LOCK_FILE)
    if lock is None:
        raise BusyError(f"{run}: {lock_holder(run / LOCK_FILE)} is running it; try again when it ends")
    with lock:
        yield spec


def refresh_stress_metrics(spec: RunSpec) -> Path:
    """Copy the numbers of the finished run's ``stress/stress.json`` into its ``metrics.json`` (``stress``:
    :func:`stress_metrics`), after ``scanmt stress --boundary-only`` measured them again, so that the report and
    the archive see them; returns that ``metrics.json``.  Hold the run (:func:`finished_run_of_stress`)."""
    path = spec.dir / METRICS
    metrics = read_json(path)
    if metrics is None:
        raise DataError(f"{path}: missing or unreadable")
    metrics["stress"] = stress_metrics(spec)
    write_json(path, metrics)
    return path
