"""One grid's report page: the options of ``experiment report`` (:class:`ReportOptions`) and what every section
of the page reads (:class:`Page`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scanmt.experiments.baselines import Baselines
from scanmt.experiments.report.collection import Restored, SystemResults, Texts


@dataclass
class ReportOptions:
    baseline: str | None = None
    #: instead of the grid's ``reference_arm`` (:func:`scanmt.experiments.report.stress.contrast_section`)
    reference_arm: str | None = None
    samples: int = 1000
    figures: int = 2
    examples: int = 5
    #: the figures' sources: words (by the source language's tokenizer) and subwords
    min_figure_words: int = 0
    max_figure_words: int = 25
    max_figure_tokens: int = 30
    #: the figures' outputs: tokenized words of either system
    max_figure_output_words: int = 40
    command: str = ""


@dataclass
class Page:
    """What every section of one grid's report reads."""

    out: Path
    rec: dict[str, Any]
    docs: Path
    stem: str
    opts: ReportOptions
    systems: list[SystemResults]
    baseline: str  #: the grid's baseline (figures, examples)
    baselines: Baselines  #: each system's baseline (the paired comparisons)
    texts: Texts
    #: in a report of several grids, this grid's name, which starts its figures' file names (they share a folder)
    figure_grid: str | None = None
    #: the folder's shared work and the seeds restored from an archive of runs only
    #: (:func:`~scanmt.experiments.report.collection.restored_runs`)
    restored: Restored = field(default_factory=lambda: (None, []))

    @property
    def base(self) -> SystemResults:
        return next(s for s in self.systems if s.name == self.baseline)
