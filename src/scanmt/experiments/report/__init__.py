"""``scanmt experiment report``: a grid's results as Markdown, laid out like the paper's tables.

The package by concept: :mod:`.collection` (what it reads), :mod:`.tables`, :mod:`.significance`, :mod:`.figures`,
:mod:`.stress` (the stress test), :mod:`.lengths` (scores by source length), :mod:`.curves` (learning curves),
:mod:`.drop_noise`, :mod:`.results_json`, :mod:`.page` and :mod:`.writing`
(the page put together and written), :mod:`.combined` (one report of several grids), :mod:`.command` (the command).

For each grid recorded in ``OUT/grids/`` (by ``scanmt experiment run``) it writes
``DOCS/experiments-{grid}.md`` (or ``--name``) with:

- the main table (Table 1 / Table 2 analogue): tokenized BLEU, METEOR, REP and
  DROP per system as mean ± sample standard deviation over the finished seeds,
  the best mean of each column in bold (higher BLEU/METEOR, lower REP/DROP),
  sacreBLEU for reference, per seed the difference of each system's tokenized
  BLEU to its baseline's run with the same seed and its paired-bootstrap
  p-value (each system's baseline: :mod:`scanmt.experiments.baselines`), and per row the git
  commit and a link to the exact commands;
- one such table for each extra test split the runs scored (``metrics.json``
  ``test_sets``, e.g. ``test2017``), titled with its upstream name (test_2017_flickr);
- the output layer, when a system has a sparse ``model.output``: per system the mean output support, the share
  of exact beam searches and the outputs ended by a forced ``</s>`` on the main test set, mean ± std over seeds
  (``metrics.json`` ``search``, from each run's ``{split}.search.json``; "–" for runs translated before it existed);
- DROP's spread split between the aligner and the model (runs scored with ``--drop-samples K``, K ≥ 2): per
  system and test set, the seeds' sd, the aligner's sd and standard error, the model's sd, and whether the
  difference to the baseline exceeds each noise (:mod:`scanmt.experiments.report.drop_noise`; one line without samples);
- the stress test of runs made with ``--stress-k`` (``metrics.json`` ``stress``): BLEU, REP, DROP,
  inputs dropping a whole sentence and length ratio per system and K, mean ± std over seeds
  (:mod:`scanmt.experiments.report.stress`);
- scores by source length (runs with a stress test at K = 1): the test sentences grouped by source words, the
  baseline's BLEU, REP and DROP in each group, and each system's against its baseline's with paired bootstrap
  p-values (:mod:`scanmt.experiments.report.lengths`);
- attention statistics (sparsity), attention health during training (one-hot share
  in epoch 1 and overall, support, score gradient; from each run's ``metrics.csv``,
  :mod:`scanmt.experiments.run_health`) and per-run details (steps, minutes, tuned
  penalties); learning curves (validation BLEU and perplexity by update, :mod:`.curves`);
- Figure 2 analogues: attention maps of the baseline and a constrained system,
  side by side, for test sentences where the baseline repeats words (chosen
  automatically with the REP sentence score), as PNGs in
  ``DOCS/experiments-{grid}/``;
- an Appendix B analogue: source, reference and every system's output for a few
  test sentences;
- the commands, and the runs that are missing or unfinished;

and ``DOCS/experiments-{grid}.json`` (or ``--name``), the main table's numbers in a
machine-readable form (:mod:`scanmt.experiments.report.results_json`).  Every file is written atomically.
Regenerating a report removes the figures its previous version linked and the new one does not show
(:func:`stale_figures`); nothing else in the folder is touched.

With ``--grid A B --name STEM`` it writes one report of the grids A and B instead (:mod:`.combined`):
``DOCS/STEM.md`` with each grid's page in turn below one title, ``DOCS/STEM.json`` with every grid's systems
(:func:`scanmt.experiments.report.results_json.merge_tables`) and their figures in ``DOCS/STEM/``, each named by
its grid (``A-attention-3.png``, ``B-stress.png``).
"""

from __future__ import annotations

from scanmt.experiments.report.collection import SystemResults, collect, grid_records, last_log_line
from scanmt.experiments.report.command import report_command
from scanmt.experiments.report.page import ReportOptions
from scanmt.experiments.report.tables import summary_rows
from scanmt.experiments.report.markdown import format_rows
from scanmt.experiments.report.writing import render, write_reports

__all__ = ["ReportOptions", "SystemResults", "collect", "format_rows", "grid_records", "last_log_line", "render",
           "report_command", "summary_rows", "write_reports"]
