"""Experiment tooling: grids of systems x seeds run end to end, and their reports.

- :mod:`~scanmt.experiments.grid`: grid files (``experiments/*.yaml``), parsed and checked.
- :mod:`~scanmt.experiments.shared`: work done once per experiment directory (data, alignment,
  fertility predictor, fertility caches) under ``OUT/shared/``.
- :mod:`~scanmt.experiments.runner`: planning and checking the runs, one run in a worker
  process (train, tune penalties, translate, evaluate; resumable), the pool of workers.
- :mod:`~scanmt.experiments.report`: aggregation over seeds, paired bootstrap, the Markdown
  report with Figure-2-style attention maps and translation examples.
- :mod:`~scanmt.experiments.archive`: a grid's finished runs without checkpoints, and its shared work,
  packed for git and restored on another machine.
- :mod:`~scanmt.experiments.run_health`: a run's attention health over training, read back
  from its ``metrics.csv`` for the report.

The command is ``scanmt experiment run|report|archive|restore``, defined one layer up, in the command-line
package.  This package sits below it and above :mod:`scanmt.api`: every step is a typed
API request, run by its API function; ``command.txt`` records each request's command line.
"""
