"""The report's coverage stress test section (``experiment run --stress-k``): per system and K, the mean ± std
over seeds of BLEU, REP, DROP and the share of joined inputs that drop a whole sentence, read from each finished
run's ``metrics.json`` ``stress`` (:func:`scanmt.experiments.runner.stress_metrics`)."""

from __future__ import annotations

import statistics
from typing import Any, Sequence

#: the columns: (metrics.json key, header)
COLUMNS = (("bleu", "BLEU"), ("rep", "REP ↓"), ("drop", "DROP ↓"), ("dropped_sentences", "inputs dropping a sentence % ↓"),
           ("length_ratio", "length ratio"))


def _cell(values: Sequence[float]) -> str:
    if not values:
        return "–"
    m = statistics.fmean(values)
    return f"{m:.2f}" if len(values) < 2 else f"{m:.2f} ± {statistics.stdev(values):.2f}"


def stress_section(systems: Sequence[Any]) -> list[str]:
    """Markdown lines of the stress test table (nothing when no finished run has a stress test).

    ``systems``: the report's ``SystemResults`` (``name``, ``label``, ``runs``: the finished seeds' ``metrics.json``).
    """
    rows = []
    for s in systems:
        runs = [r["stress"] for r in s.runs if r.get("stress")]
        ks = sorted({int(k) for r in runs for k in r.get("scores", {})})
        for k in ks:
            scored = [r["scores"][str(k)] for r in runs if str(k) in r.get("scores", {})]
            inputs = next((r["inputs"].get(str(k)) for r in runs if str(k) in r.get("inputs", {})), "–")
            cells = [_cell([float(x[key]) for x in scored if x.get(key) is not None]) for key, _ in COLUMNS]
            rows.append(f"| {s.label.replace('|', chr(92) + '|')} | {k} | {inputs} | " + " | ".join(cells) + f" | {len(scored)} |")
    if not rows:
        return []
    head = ["system", "K", "inputs", *(h for _, h in COLUMNS), "seeds"]
    return ["## Coverage stress test", "",
            "Each run's model translates the main test set with K consecutive sentences joined into one input "
            "(`scanmt stress`, `experiment run --stress-k`; source and reference joined alike, the last incomplete "
            "group left out). Mean ± std over seeds. A joined input *drops a sentence* when one of its K source "
            "sentences has fewer than 20% of its words linked to any output word (DROP's source-output alignment); "
            "length ratio = output / reference words.", "",
            "| " + " | ".join(head) + " |", "|" + "---|" * len(head), *rows, ""]
