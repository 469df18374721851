"""Learning curves in a grid report: each run's validation BLEU and perplexity by update, read back from its
``metrics.csv`` (``valid/bleu``, ``valid/ppl``: what training logged at each validation), for finished runs and
runs still training alike, as a table and a figure (``STEM/curves.png``).  Where runs logged it
(``valid/len_ratio``; runs trained before it was added have not), the greedy output's length over the
references' gets a panel and a column too: a system whose BLEU trails at equal perplexity often writes too short or too long.

Where a grid misses a paper's figure, the first question is whether its runs converged: the curves answer it
without opening a log.  A resumed run may have logged one update twice; the last value counts.  A run whose
``metrics.csv`` cannot be read is left out of the curves (with a warning): the rest of the report stands.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Sequence

from scanmt.errors import DataError
from scanmt.experiments.layout import TRAIN_LOG, seed_dirs, seed_name, seed_of, system_dir
from scanmt.experiments.report.markdown import md_escape
from scanmt.experiments.run_health import read_series

log = logging.getLogger("scanmt.experiment")

FIGURE = "curves.png"
#: the metrics shown: key in metrics.csv, panel title
METRICS = (("valid/bleu", "validation BLEU (greedy)"), ("valid/ppl", "validation perplexity"))
#: shown only where some run logged them (runs trained before they were logged have not)
OPTIONAL = (("valid/len_ratio", "validation output length / reference length"),)
#: the most update columns of the table (evenly spaced over the validations, the last one included)
MAX_COLUMNS = 10

#: system label -> seed -> metric key -> [(update, value), ...] in update order
RunCurves = dict[str, dict[int, dict[str, list[tuple[int, float]]]]]


def learning_curves(out: Path, systems: Sequence[Any]) -> RunCurves:
    """The validation curves of every run folder of ``systems`` (:class:`~.collection.SystemResults`) under ``out``
    that logged a validation."""
    curves: RunCurves = {}
    for s in systems:
        for d in seed_dirs(system_dir(out, s.name)):
            k = seed_of(d)
            if k is None or not (d / TRAIN_LOG).is_file():
                continue
            try:
                series = read_series(d / TRAIN_LOG)
            except DataError as exc:
                log.warning("learning curves: %s left out (%s)", d, exc)
                continue
            run = {key: sorted(dict(series.get(key, [])).items()) for key, _ in METRICS + OPTIONAL}
            if any(run.values()):
                curves.setdefault(s.label, {})[k] = run
    return curves


def draw_curves_figure(curves: RunCurves, png: Path) -> bool:
    """Draw the curves into ``png`` (atomically); False, and nothing written, when no run validated."""
    from scanmt.viz.curves_plot import plot_curves

    if not curves:
        return False
    panels = {title: {label: {k: run.get(key, []) for k, run in seeds.items()} for label, seeds in curves.items()}
              for key, title in METRICS + _logged_optional(curves)}
    png.parent.mkdir(parents=True, exist_ok=True)
    plot_curves(panels, png, title="learning curves: one line per seed", log_y=[METRICS[1][1]])
    return True


def _logged_optional(curves: RunCurves) -> tuple[tuple[str, str], ...]:
    """The :data:`OPTIONAL` metrics that some run of ``curves`` logged."""
    return tuple(m for m in OPTIONAL if any(run.get(m[0]) for seeds in curves.values() for run in seeds.values()))


def _columns(steps: Sequence[int]) -> list[int]:
    """At most :data:`MAX_COLUMNS` of the validated ``steps``, evenly spaced, the last one included."""
    if len(steps) <= MAX_COLUMNS:
        return list(steps)
    picks = {round(i * (len(steps) - 1) / (MAX_COLUMNS - 1)) for i in range(MAX_COLUMNS)}
    return [steps[i] for i in sorted(picks)]


def _as_of(points: Sequence[tuple[int, float]], update: int) -> str:
    """The value of the last of ``points`` at or before ``update``; "–" before the first one and past the last
    (a run that stopped, or has not got there yet)."""
    before = [v for u, v in points if u <= update]
    return f"{before[-1]:.2f}" if before and points[-1][0] >= update else "–"


def curves_section(curves: RunCurves, link: str | None) -> list[str]:
    """The section's Markdown: validation BLEU per run as of the validated updates (at most :data:`MAX_COLUMNS`),
    the best BLEU and its update, the last perplexity (and length ratio, where logged); the figure ``link`` if
    drawn."""
    L = ["## Learning curves", ""]
    if not curves:
        return L + ["No run has validated yet.", ""]
    bleu, ppl = METRICS[0][0], METRICS[1][0]
    lengths = bool(_logged_optional(curves))
    steps = _columns(sorted({u for seeds in curves.values() for run in seeds.values() for u, _ in run[bleu]}))
    L += ["Validation BLEU (greedy decoding, as training validates; the checkpoint kept is the best) of every run "
          "folder, finished or still training: in each update's column the run's last validation at or before it "
          "(runs that validate once per epoch validate at different updates)"
          + (f"; {len(steps)} of the validated updates, evenly spaced" if len(steps) == MAX_COLUMNS else "")
          + "; the best BLEU and its update; the perplexity of the last validation"
          + (" and its output's length over the references'" if lengths else "") + ".", ""]
    L += ["| system | seed | " + " | ".join(f"{u:,}" for u in steps) + " | best (update) | last perplexity |"
          + (" last length ratio |" if lengths else ""),
          "|---|---|" + "---:|" * (len(steps) + 2 + lengths)]
    for label, seeds in curves.items():
        for k, run in sorted(seeds.items()):
            cells = [_as_of(run[bleu], u) for u in steps]
            best = max(run[bleu], key=lambda p: p[1], default=None)
            best_cell = f"{best[1]:.2f} ({best[0]:,})" if best else "–"
            last_ppl = f"{run[ppl][-1][1]:.2f} ({run[ppl][-1][0]:,})" if run[ppl] else "–"
            ratio = run.get(OPTIONAL[0][0])
            last_len = (f" {ratio[-1][1]:.2f} ({ratio[-1][0]:,}) |" if ratio else " – |") if lengths else ""
            L.append(f"| {md_escape(label)} | {seed_name(k)} | " + " | ".join(cells) + f" | {best_cell} | {last_ppl} |"
                     + last_len)
    L.append("")
    if link:
        L += [f"![learning curves]({link})", ""]
    return L
