"""``scanmt experiment report``: the command's options turned into :class:`ReportOptions`, the reports written,
and each file named (:func:`report_command`)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Sequence

from scanmt.errors import ConfigError
from scanmt.experiments.report.page import ReportOptions
from scanmt.experiments.report.writing import write_reports


def report_command(folder: str | Path, docs: str | Path, *, grid: str | Sequence[str] | None = None,
                   name: str | None = None,
                   baseline: str | None = None, reference_arm: str | None = None, samples: int = 1000,
                   figures: int = 2, examples: int = 5, min_figure_words: int = 0, max_figure_words: int = 25,
                   max_figure_tokens: int = 30, max_figure_output_words: int = 40) -> int:
    """Write the reports of the experiment folder ``folder`` into ``docs`` and print each file written; exit
    status 0.  ``grid``: one grid's name or several (with ``name``: one report of them all).  The report names the
    command that made it: every option that changes what it shows and is not at its default."""
    if min_figure_words > max_figure_words:
        raise ConfigError(f"--min-figure-words {min_figure_words} is above --max-figure-words {max_figure_words}: "
                          "no source could be drawn")
    folder, docs = Path(folder), Path(docs)
    grids = [grid] if isinstance(grid, str) else list(grid or [])
    argv = ["experiment", "report", str(folder), "--out", str(docs)] + (["--grid", *grids] if grids else [])
    for opt, value in (("name", name), ("baseline", baseline), ("reference-arm", reference_arm)):
        if value:
            argv += [f"--{opt}", value]
    opts = ReportOptions(baseline=baseline, reference_arm=reference_arm, samples=samples, figures=figures,
                         examples=examples, min_figure_words=min_figure_words, max_figure_words=max_figure_words,
                         max_figure_tokens=max_figure_tokens, max_figure_output_words=max_figure_output_words)
    default = ReportOptions()
    for field in ("samples", "figures", "examples", "min_figure_words", "max_figure_words", "max_figure_tokens",
                  "max_figure_output_words"):
        if getattr(opts, field) != getattr(default, field):
            option = "bootstrap-samples" if field == "samples" else field.replace("_", "-")
            argv += [f"--{option}", str(getattr(opts, field))]
    opts.command = "scanmt " + shlex.join(argv)
    for f in write_reports(folder.resolve(), docs, grids=grids, name=name, opts=opts):
        print(f"wrote {f}")
    return 0
