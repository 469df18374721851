"""Experiment tooling: grids of systems x seeds run end to end, and their reports.

- :mod:`~scanmt.experiments.grid`: grid files (``experiments/*.yaml``), parsed and checked.
- :mod:`~scanmt.experiments.shared`: work done once per experiment directory (data, alignment,
  fertility predictor, fertility caches) under ``OUT/shared/``.
- :mod:`~scanmt.experiments.runner`: planning and checking the runs, one run in a worker
  process (train, tune penalties, translate, evaluate; resumable), the pool of workers.
- :mod:`~scanmt.experiments.report`: aggregation over seeds, paired bootstrap, the Markdown
  report with Figure-2-style attention maps and translation examples.

The command is ``scanmt experiment run|report`` (:mod:`scanmt.cli.experiment`).  This
package sits at the top of the layering, beside ``scanmt.cli``: it runs the other
commands through :func:`scanmt.cli.main.main`.
"""
