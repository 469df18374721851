"""Experiment tooling: grids of systems x seeds run end to end, and their reports.

By concept:

- :mod:`~scanmt.experiments.layout`: every folder and file name of an experiment folder (``OUT/grids``,
  ``OUT/shared``, ``OUT/runs/SYSTEM/seedK`` and each run's files, markers, locks, archive members).
- :mod:`~scanmt.experiments.grid`: grid files (``experiments/*.yaml``), parsed and checked;
  :mod:`~scanmt.experiments.grid_record`: a grid's record in ``OUT/grids``.
- :mod:`~scanmt.experiments.shared`: work done once per experiment directory (data, alignment,
  fertility predictor, fertility caches) under ``OUT/shared/``; :mod:`~scanmt.experiments.fertility_hooks`: the
  tooling's questions about a fertility strategy by its name.
- :mod:`~scanmt.experiments.spec` and :mod:`~scanmt.experiments.planning`: each run's spec and step requests,
  planned and checked before any work.
- :mod:`~scanmt.experiments.state`: where a run stands (one answer for ``run``, ``status`` and ``report``);
  :mod:`~scanmt.experiments.progress`: how far it has come and how long its steps take.
- :mod:`~scanmt.experiments.worker` (started as ``python -m scanmt.experiments.runner``): one run in a worker
  process; :mod:`~scanmt.experiments.run_metrics`: its ``metrics.json``; :mod:`~scanmt.experiments.pool`: the
  pool of workers; :mod:`~scanmt.experiments.deadline`: ``--deadline``; :mod:`~scanmt.experiments.redecode`:
  ``--redecode``; :mod:`~scanmt.experiments.stress_refresh`: a finished run's stress numbers measured again.
- :mod:`~scanmt.experiments.grid_run`: the ``experiment run`` command end to end.
- :mod:`~scanmt.experiments.status`: ``experiment status``.
- :mod:`~scanmt.experiments.report`: the Markdown report (a package: collection, tables, significance, figures,
  stress, DROP noise, results JSON); :mod:`~scanmt.experiments.baselines`,
  :mod:`~scanmt.experiments.run_health`: what it compares and reads.
- :mod:`~scanmt.experiments.archive`: a grid's finished runs without checkpoints, and its shared work,
  packed for git and restored on another machine (a package: manifest, shared work, packing, restoring).

The command is ``scanmt experiment run|report|status|archive|restore``, defined one layer up, in the command-line
package, with one call per sub-command into the names below (imported when first used, so that the command line
starts without loading the tooling).  This package sits below it and above :mod:`scanmt.api`: every step is a
typed API request, run by its API function; ``command.txt`` records each request's command line.
"""

from __future__ import annotations

import importlib
from typing import Any

#: the names of the ``scanmt experiment`` sub-commands' entry points, and the module of each
_COMMANDS = {
    "GridRunOptions": "grid_run", "run_grid": "grid_run", "report_command": "report", "status_command": "status",
    "archive_command": "archive", "restore_command": "archive", "trim_command": "archive",
    "PREDICTOR_TOLERANCE": "archive",
    "FigureWindow": "figure_window",
}

__all__ = sorted(_COMMANDS)


def __getattr__(name: str) -> Any:
    """The entry points of :data:`_COMMANDS`, imported on first use."""
    if name in _COMMANDS:
        return getattr(importlib.import_module(f"scanmt.experiments.{_COMMANDS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
