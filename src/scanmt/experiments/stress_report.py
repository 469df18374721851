"""The report's coverage stress test (``experiment run --stress-k``): per system and K, the mean ± std over seeds
of BLEU, REP, DROP, the length ratio and the share of joined inputs that drop a whole sentence, read from each
finished run's ``metrics.json`` ``stress`` (:func:`scanmt.experiments.runner.stress_metrics`) by
:func:`stress_summary`, which feeds the table, the figure (``DOCS/STEM/stress.png``: one line per system over K,
bars of ± one std over seeds) and the results JSON; then each system's REP and DROP against its baseline's, tested
by a paired bootstrap over the joined inputs, seed by seed and pooled over the seeds
(:func:`scanmt.metrics.paired.paired_rates`)."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any, Mapping, Sequence

from scanmt.experiments.baselines import as_baselines, single_baseline

#: the table's columns: (metrics.json key, header); ``bleu`` is detokenized sacreBLEU (``scanmt stress``'s)
COLUMNS = (("bleu", "sacreBLEU"), ("rep", "REP ↓"), ("drop", "DROP ↓"),
           ("dropped_sentences", "inputs dropping a sentence % ↓"), ("length_ratio", "length ratio"))
#: the figure's file name in the report's folder
FIGURE = "stress.png"

#: per K: per metric: ``{"mean", "std", "seeds"}`` (std None below two seeds)
StressSummary = dict[int, dict[str, dict[str, Any]]]


def stress_summary(runs: Sequence[dict[str, Any]]) -> StressSummary:
    """Mean and std over seeds of every metric at every K, from the ``stress`` entries of one system's finished
    runs (``metrics.json``; runs without one are left out).  ``seeds``: how many runs measured that metric at that
    K (DROP needs an aligner, so it may be fewer)."""
    stressed = [r["stress"] for r in runs if r.get("stress")]
    summary: StressSummary = {}
    for k in sorted({int(k) for r in stressed for k in r.get("scores", {})}):
        scored = [r["scores"][str(k)] for r in stressed if str(k) in r.get("scores", {})]
        entry: dict[str, dict[str, Any]] = {}
        for key, _ in COLUMNS:
            values = [float(x[key]) for x in scored if x.get(key) is not None]
            entry[key] = {"mean": statistics.fmean(values) if values else None,
                          "std": statistics.stdev(values) if len(values) > 1 else None, "seeds": len(values)}
        summary[k] = entry
    return summary


def _cell(m: dict[str, Any]) -> str:
    if m["mean"] is None:
        return "–"
    return f"{m['mean']:.2f}" if m["std"] is None else f"{m['mean']:.2f} ± {m['std']:.2f}"


def stress_section(systems: Sequence[Any], baseline: str | Mapping[str, str] | None = None,
                   figure: str | None = None) -> list[str]:
    """Markdown lines of the stress test table, the figure (its relative path ``figure``, when drawn) and, given the
    ``baseline`` system's name (or each system's, :data:`scanmt.experiments.baselines.Baselines`), the paired tests
    against it (nothing when no finished run has a stress test).

    ``systems``: the report's ``SystemResults`` (``name``, ``label``, ``runs``: the finished seeds' ``metrics.json``).
    """
    rows = []
    for s in systems:
        runs = [r["stress"] for r in s.runs if r.get("stress")]
        for k, entry in stress_summary(s.runs).items():
            inputs = next((r["inputs"].get(str(k)) for r in runs if str(k) in r.get("inputs", {})), "–")
            cells = [_cell(entry[key]) for key, _ in COLUMNS]
            seeds = entry["bleu"]["seeds"]  # (every stress test scores BLEU)
            label = _escape(s.label)
            rows.append(f"| {label} | {k} | {inputs} | " + " | ".join(cells) + f" | {seeds} |")
    if not rows:
        return []
    head = ["system", "K", "inputs", *(h for _, h in COLUMNS), "seeds"]
    picture = [f"![coverage stress test: mean over seeds, bars ± one std]({figure})", ""] if figure else []
    return ["## Coverage stress test", "",
            "Each run's model translates the main test set with K consecutive sentences joined into one input "
            "(`scanmt stress`, `experiment run --stress-k`; source and reference joined alike, the last incomplete "
            "group left out). Mean ± std over seeds. sacreBLEU: detokenized, cased, as `scanmt stress` scores it. "
            "A joined input *drops a sentence* when one of its K source "
            "sentences has fewer than 20% of its words linked to any output word (DROP's source-output alignment); "
            "length ratio = output / reference words.", "",
            "| " + " | ".join(head) + " |", "|" + "---|" * len(head), *rows, "", *picture,
            *paired_section(systems, baseline)]


def draw_stress_figure(systems: Sequence[Any], png: Path) -> bool:
    """Draw the systems' stress curves (mean over seeds, ± one std as bars) into ``png`` (atomically); False, and
    nothing written, when no finished run has a stress test."""
    from scanmt.api.stress import METRICS
    from scanmt.viz.stress_plot import plot_stress

    summaries = {s.label: stress_summary(s.runs) for s in systems}
    summaries = {label: m for label, m in summaries.items() if m}
    if not summaries:
        return False
    ks = sorted({k for m in summaries.values() for k in m})

    def series(m: StressSummary, key: str, stat: str) -> list[float | None]:
        return [m[k][key][stat] if k in m else None for k in ks]

    panels = {title: {label: series(m, key, "mean") for label, m in summaries.items()} for key, _, title in METRICS}
    spread = {title: {label: series(m, key, "std") for label, m in summaries.items()} for key, _, title in METRICS}
    seeds = max(e["bleu"]["seeds"] for m in summaries.values() for e in m.values())
    png.parent.mkdir(parents=True, exist_ok=True)
    title = ("coverage stress test, one seed" if seeds == 1
             else f"coverage stress test: mean over up to {seeds} seeds, bars ± one std")
    plot_stress(panels, ks, png, title=title, spread=spread)
    return True


def _escape(label: str) -> str:
    return label.replace("|", chr(92) + "|")


def _per_input(run: dict[str, Any], k: int) -> dict[str, Any] | None:
    return ((run.get("stress") or {}).get("per_input") or {}).get(str(k))


def _test_cell(t: Any) -> str:
    mark = " †" if t.p_lower < 0.05 else ""
    return f"{t.delta:+.2f} ({t.p_lower:.3f}{mark})"


def paired_section(systems: Sequence[Any], baseline: str | Mapping[str, str] | None) -> list[str]:
    """Markdown lines: for each system but its baseline and each K, the differences of REP and DROP from the
    baseline trained with the same seed, with the one-sided p-value of "lower" (per seed, then pooled).

    ``baseline``: one system's name, or each system's baseline (:data:`scanmt.experiments.baselines.Baselines`;
    a *compared with* column names it when they differ)."""
    from scanmt.metrics.paired import paired_rates

    by_name = {s.name: s for s in systems}
    baselines = as_baselines(list(by_name), baseline)
    one = single_baseline(baselines)
    rows = []
    for s in systems:
        base = by_name.get(baselines.get(s.name, s.name))
        if base is None or base is s:
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
            against = "" if one is not None else f" {_escape(base.label)} |"
            rows.append(f"| {_escape(s.label)} | {k} | {cells[0][0]} | {cells[0][1]} | {cells[1][0]} | "
                        f"{cells[1][1]} | {len(pairs)} |{against}")
    if not rows:
        return []
    title = by_name[one].label if one is not None and one in by_name else "each system's baseline"
    return [f"### Stress test: REP and DROP against {title}, paired", "",
            f"For each seed, the system's REP (DROP) minus that of {title} trained with the same seed, on the same "
            "joined inputs, and the one-sided p-value that it is lower, from a paired bootstrap over the joined inputs "
            "(1000 resamples; `scanmt.metrics.paired`); pooled: the seeds' inputs resampled together. † marks p < 0.05. "
            "The test covers the choice of test inputs; the spread over seeds is in the table above, and each DROP "
            "uses one alignment of each side.", "",
            "| system | K | Δ REP (p) by seed | Δ REP (p) pooled | Δ DROP (p) by seed | Δ DROP (p) pooled | seeds |"
            + ("" if one is not None else " compared with |"),
            "|---|---:|---|---:|---|---:|---:|" + ("" if one is not None else "---|"), *rows, ""]
