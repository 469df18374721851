"""The report's coverage stress test section (``experiment run --stress-k``): per system and K, the mean ± std
over seeds of BLEU, REP, DROP and the share of joined inputs that drop a whole sentence, read from each finished
run's ``metrics.json`` ``stress`` (:func:`scanmt.experiments.runner.stress_metrics`); then each system's REP and
DROP against the baseline's, tested by a paired bootstrap over the joined inputs, seed by seed and pooled over
the seeds (:func:`scanmt.metrics.paired.paired_rates`)."""

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


def stress_section(systems: Sequence[Any], baseline: str | None = None) -> list[str]:
    """Markdown lines of the stress test table and, given the ``baseline`` system's name, of the paired tests
    against it (nothing when no finished run has a stress test).

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
            "| " + " | ".join(head) + " |", "|" + "---|" * len(head), *rows, "", *paired_section(systems, baseline)]


def _per_input(run: dict[str, Any], k: int) -> dict[str, Any] | None:
    return ((run.get("stress") or {}).get("per_input") or {}).get(str(k))


def _test_cell(t: Any) -> str:
    mark = " †" if t.p_lower < 0.05 else ""
    return f"{t.delta:+.2f} ({t.p_lower:.3f}{mark})"


def paired_section(systems: Sequence[Any], baseline: str | None) -> list[str]:
    """Markdown lines: for each system but ``baseline`` and each K, the differences of REP and DROP from the
    baseline trained with the same seed, with the one-sided p-value of "lower" (per seed, then pooled)."""
    from scanmt.metrics.paired import paired_rates

    base = next((s for s in systems if s.name == baseline), None)
    if base is None:
        return []
    rows = []
    for s in systems:
        if s is base:
            continue
        ks = sorted({int(k) for r in s.runs for k in ((r.get("stress") or {}).get("per_input") or {})})
        for k in ks:
            pairs, by_seed = [], {"REP": [], "DROP": []}
            for run in sorted(s.runs, key=lambda r: r["seed"]):
                mine, theirs = _per_input(run, k), _per_input(base.seed(run["seed"]) or {}, k)
                if mine is None or theirs is None:
                    continue
                pairs.append((mine, theirs))
                for metric, t in paired_rates([(mine, theirs)]).items():
                    by_seed[metric].append(f"{run['seed']}: {_test_cell(t)}")
            if not pairs:
                continue
            pooled = paired_rates(pairs)
            cells = [(" / ".join(by_seed[m]) or "–", _test_cell(pooled[m]) if m in pooled else "–") for m in ("REP", "DROP")]
            rows.append(f"| {s.label.replace('|', chr(92) + '|')} | {k} | {cells[0][0]} | {cells[0][1]} | {cells[1][0]} | "
                        f"{cells[1][1]} | {len(pairs)} |")
    if not rows:
        return []
    return [f"### Stress test: REP and DROP against {base.label}, paired", "",
            f"For each seed, the system's REP (DROP) minus that of {base.label} trained with the same seed, on the same "
            "joined inputs, and the one-sided p-value that it is lower, from a paired bootstrap over the joined inputs "
            "(1000 resamples; `scanmt.metrics.paired`); pooled: the seeds' inputs resampled together. † marks p < 0.05. "
            "The test covers the choice of test inputs; the spread over seeds is in the table above, and each DROP "
            "uses one alignment of each side.", "",
            "| system | K | Δ REP (p) by seed | Δ REP (p) pooled | Δ DROP (p) by seed | Δ DROP (p) pooled | seeds |",
            "|---|---:|---|---:|---|---:|---:|", *rows, ""]
