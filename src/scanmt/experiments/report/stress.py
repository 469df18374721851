"""The report's stress test (``experiment run --stress-k``): per system and K, the mean ± std over seeds
of BLEU, REP, DROP, the length ratio and the share of joined inputs that drop a whole sentence, read from each
finished run's ``metrics.json`` ``stress`` (:func:`scanmt.experiments.run_metrics.stress_metrics`) by
:func:`stress_summary`, which feeds the table, the figure (``DOCS/STEM/stress.png``: one line per system over K,
bars of ± one std over seeds) and the results JSON; then each system's REP and DROP against its baseline's, tested
by a paired bootstrap over the joined inputs, seed by seed and pooled over the seeds
(:func:`scanmt.metrics.paired.paired_rates`); the probability each gives ``</s>`` after a joined input's first
sentence, and of the full stop closing that sentence, against its baseline's, paired alike
(:func:`boundary_section`); and in an ablation with a
``reference_arm``, whether each arm's
differences from its own baseline differ from the reference's (:func:`contrast_section`,
:func:`scanmt.metrics.paired.difference_in_differences`)."""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from scanmt.decoding.boundary import FINE_SCORES
from scanmt.experiments.baselines import as_baselines, single_baseline

#: the table's columns: (metrics.json key, header); ``bleu`` is detokenized sacreBLEU (``scanmt stress``'s)
COLUMNS = (("bleu", "sacreBLEU"), ("rep", "REP ↓"), ("drop", "DROP ↓"),
           ("dropped_sentences", "inputs dropping a sentence % ↓"), ("length_ratio", "length ratio"),
           ("boundary_stop", "inputs with P(`</s>`) ≥ 0.5 after sentence 1 %"), ("boundary_eos", "P(`</s>`) after sentence 1"),
           ("boundary_close", "P(full stop closing sentence 1)"))
#: the per-input probabilities the boundary tables pair: (``per_input`` key, what it is, in Markdown)
BOUNDARY_MEASURES = (("boundary_close", "P(full stop) closing the first sentence"),
                     ("boundary_eos", "P(`</s>`) after the first sentence"))
#: the figures' file names in the report's folder
FIGURE = "stress.png"
CONTRAST_FIGURE = "stress-contrast.png"

#: per K: per metric: ``{"mean", "std", "seeds"}`` (std None below two seeds)
StressSummary = dict[int, dict[str, dict[str, Any]]]


def stress_summary(runs: Sequence[dict[str, Any]]) -> StressSummary:
    """Mean and std over seeds of every metric at every K, from the ``stress`` entries of one system's finished
    runs (``metrics.json``; runs without one are left out).  ``seeds``: how many runs measured that metric at that
    K (DROP needs an aligner, so it may be fewer).  ``boundary_stop`` is counted again from the run's per-input
    P(``</s>``) at this code's threshold (:data:`scanmt.decoding.boundary.STOP_PROBABILITY`) where the run kept
    them, so that runs scored by older code with another threshold agree."""
    stressed = [r["stress"] for r in runs if r.get("stress")]
    summary: StressSummary = {}
    for k in sorted({int(k) for r in stressed for k in r.get("scores", {})}):
        scored = [_rescored(r, k) for r in stressed if str(k) in r.get("scores", {})]
        entry: dict[str, dict[str, Any]] = {}
        for key, _ in COLUMNS:
            values = [float(x[key]) for x in scored if x.get(key) is not None]
            entry[key] = {"mean": statistics.fmean(values) if values else None,
                          "std": statistics.stdev(values) if len(values) > 1 else None, "seeds": len(values)}
        summary[k] = entry
    return summary


def _rescored(stress: dict[str, Any], k: int) -> dict[str, Any]:
    """A run's scores at ``k``, with ``boundary_stop`` counted from its per-input P(``</s>``) where it has them."""
    from scanmt.decoding.boundary import STOP_PROBABILITY, share_at_least

    scores = stress["scores"][str(k)]
    p_eos = ((stress.get("per_input") or {}).get(str(k)) or {}).get("boundary_eos")
    return scores if p_eos is None else {**scores, "boundary_stop": share_at_least(p_eos, STOP_PROBABILITY)}


def _cell(m: dict[str, Any], seeds: int, digits: int = 2) -> str:
    """``mean ± std`` over the seeds that measured it, naming their number where fewer than the row's ``seeds``
    did (runs of older code have no boundary metrics, for one)."""
    if m["mean"] is None:
        return "–"
    cell = f"{m['mean']:.{digits}f}" + ("" if m["std"] is None else f" ± {m['std']:.{digits}f}")
    return cell + (f" ({m['seeds']} of {seeds} seeds)" if m["seeds"] < seeds else "")


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
            seeds = entry["bleu"]["seeds"]  # (every stress test scores BLEU)
            cells = [_cell(entry[key], seeds, 3 if key in FINE_SCORES else 2) for key, _ in COLUMNS]
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
            "length ratio = output / reference words. *P(`</s>`) after sentence 1*: the model reads the joined "
            "reference teacher-forced, and at the step after its first sentence, where the reference goes on, gives "
            "`</s>` that probability; the share of inputs where it is 0.5 or more (ending outweighs every "
            "continuation together), and its median (`scanmt.decoding.boundary`; K ≥ 2, – where the runs predate "
            "it). Label smoothing ε keeps it below about 1 − ε. A search that writes one sentence per joined input "
            "rarely reaches that step, so a high value need not mean an early stop; it decides one step earlier "
            "whether to stop after the first sentence's content: *P(full stop closing "
            "sentence 1)* is the median probability the model gives the full stop (`!`, `?`) with which the "
            "reference closes its first sentence, at that step (inputs whose first sentence ends otherwise left "
            "out).", "",
            "| " + " | ".join(head) + " |", "|" + "---|" * len(head), *rows, "", *picture,
            *paired_section(systems, baseline), *boundary_section(systems, baseline)]


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


def _test_cell(t: Any, two_sided: bool = False) -> str:
    """``+1.23 (0.012 †)``: a :class:`scanmt.metrics.paired.PairedRate`'s Δ and p-value (n/a with too few inputs)."""
    from scanmt.metrics.paired import format_p

    return f"{t.delta:+.2f} ({format_p(t.p_two_sided if two_sided else t.p_lower, significant_below=0.05)})"


def _by_seed_cell(cells: Sequence[str], deltas: Sequence[float], two_sided: bool = False) -> str:
    """The seeds' cells joined, then the sign-flip p over their Δs (two or more seeds;
    :func:`scanmt.metrics.paired.sign_flip_p`); "–" without seeds."""
    from scanmt.metrics.paired import sign_flip_p

    p = sign_flip_p(deltas, two_sided=two_sided)
    return (" / ".join(cells) or "–") + ("" if p is None else f"; sign-flip {p:.3f}")


def _length_cell(pairs: Sequence[tuple[dict[str, Any], dict[str, Any]]], standardize: Callable[..., Any],
                 test: Any = None) -> str | None:
    """The baseline's rate at the system's output lengths and the share of its Δ that explains, pooled over
    ``pairs`` (``standardize``: :func:`~scanmt.metrics.length_standardized.standardize_rep` or ``_drop``); None
    without ``hyp_words``.  The share only where ``test``, the pooled paired test of the Δ, finds it non-zero
    (two-sided p < 0.05): a share of a Δ within the inputs' noise is a ratio of noise ("–")."""
    if not all("hyp_words" in a and "hyp_words" in b for a, b in pairs):
        return None
    r = standardize([a for a, _ in pairs], [b for _, b in pairs])
    if math.isnan(r.baseline_at_system_lengths):
        return "– (no length group in common)"
    significant = test is not None and test.p_two_sided is not None and test.p_two_sided < 0.05
    share = "" if r.explained is None else f" ({int(round(100 * r.explained))} %)" if significant else " (–)"
    uncovered = f", {100 * r.uncovered:.0f} % uncovered" if r.uncovered >= 0.005 else ""
    return f"{r.baseline_at_system_lengths:.2f}{share}{uncovered}"


def _seed_tests(items: Sequence[tuple[int, Any]], test: Callable[[list[Any]], dict[str, Any]],
                two_sided: bool = False) -> tuple[dict[str, str], dict[str, Any]]:
    """``test`` (:func:`scanmt.metrics.paired.paired_rates` or ``difference_in_differences``) on each seed's
    ``(seed, item)`` alone and on all items pooled: per metric the by-seed cell (:func:`_by_seed_cell`), and the
    pooled results."""
    by_seed: dict[str, list[str]] = {"REP": [], "DROP": []}
    deltas: dict[str, list[float]] = {"REP": [], "DROP": []}
    for seed, item in items:
        for metric, t in test([item]).items():
            by_seed[metric].append(f"{seed}: {_test_cell(t, two_sided)}")
            deltas[metric].append(t.delta)
    cells = {m: _by_seed_cell(by_seed[m], deltas[m], two_sided) for m in by_seed}
    return cells, test([item for _, item in items])


def _paired_rows(s: Any, base: Any, k: int) -> tuple[list[str], list[str] | None] | None:
    """One system's row at one K against ``base`` (cells from Δ REP by seed to the seed count), and its length
    cells (REP, DROP; None without output lengths); None when no seed of the two has a stress test at ``k``."""
    from scanmt.metrics.paired import paired_rates

    pairs = []
    for run in sorted(s.runs, key=lambda r: r["seed"]):
        mine, theirs = _per_input(run, k), _per_input(base.seed(run["seed"]) or {}, k)
        if mine is not None and theirs is not None:
            pairs.append((run["seed"], (mine, theirs)))
    if not pairs:
        return None
    by_seed, pooled = _seed_tests(pairs, paired_rates)
    cells = []
    for m in ("REP", "DROP"):
        cells += [by_seed[m], _test_cell(pooled[m]) if m in pooled else "–"]
    from scanmt.metrics.length_standardized import standardize_drop, standardize_rep

    lengths = [_length_cell([pair for _, pair in pairs], standardize, pooled.get(m))
               for m, standardize in (("REP", standardize_rep), ("DROP", standardize_drop))]
    return [*cells, str(len(pairs))], (None if None in lengths else [cell or "–" for cell in lengths])


def paired_section(systems: Sequence[Any], baseline: str | Mapping[str, str] | None) -> list[str]:
    """Markdown lines: for each system but its baseline and each K, the differences of REP and DROP from the
    baseline trained with the same seed, with the one-sided p-value of "lower" (per seed, then pooled), and, when
    the runs counted their output words, the baseline's REP at the system's output lengths.

    ``baseline``: one system's name, or each system's baseline (:data:`scanmt.experiments.baselines.Baselines`;
    a *compared with* column names it when they differ)."""
    by_name = {s.name: s for s in systems}
    baselines = as_baselines(list(by_name), baseline)
    one = single_baseline(baselines)
    rows: list[tuple[list[str], list[str] | None]] = []
    for s in systems:
        base = by_name.get(baselines.get(s.name, s.name))
        if base is None or base is s:
            continue
        for k in sorted({int(k) for r in s.runs for k in ((r.get("stress") or {}).get("per_input") or {})}):
            row = _paired_rows(s, base, k)
            if row is not None:
                cells, length = row
                rows.append(([_escape(s.label), str(k), *cells, *([] if one is not None else [_escape(base.label)])],
                             length))
    if not rows:
        return []
    title = by_name[one].label if one is not None and one in by_name else "each system's baseline"
    lengths = any(length is not None for _, length in rows)
    head = ["system", "K", "Δ REP (p) by seed", "Δ REP (p) pooled", "Δ DROP (p) by seed", "Δ DROP (p) pooled", "seeds",
            *([] if one is not None else ["compared with"]),
            *(["REP of the baseline at the system's lengths (share of Δ REP)",
               "DROP of the baseline at the system's lengths (share of Δ DROP)"] if lengths else [])]
    align = ["---", "---:", "---", "---:", "---", "---:", "---:", *([] if one is not None else ["---"]),
             *(["---:", "---:"] if lengths else [])]
    table = ["| " + " | ".join(head) + " |", "|" + "|".join(align) + "|"]
    table += ["| " + " | ".join([*cells, *((length or ["–", "–"]) if lengths else [])]) + " |"
              for cells, length in rows]
    note = (" The baseline's REP (DROP) at the system's lengths: the joined inputs grouped by output/reference "
            "length ratio (`scanmt.metrics.length_standardized`), the baseline's REP (DROP) in each group weighted "
            "by the system's reference (source) words in it, pooled over the seeds; the share is the part of the "
            "pooled Δ that writing as long as the system explains, shown where the pooled Δ differs from 0 "
            "(two-sided p < 0.05; else –)." if lengths else "")
    return [f"### Stress test: REP and DROP against {title}, paired", "",
            f"For each seed, the system's REP (DROP) minus that of {title} trained with the same seed, on the same "
            "joined inputs, and the one-sided p-value that it is lower, from a paired bootstrap over the joined inputs "
            "(1000 resamples; `scanmt.metrics.paired`); pooled: the seeds' inputs resampled together. † marks p < 0.05. "
            "The bootstrap covers the choice of test inputs, not the training seeds; for those, *sign-flip* is the "
            "exact one-sided sign-flip p over the seeds' Δs (`sign_flip_p`; it cannot fall below 2^-n with n "
            "seeds, 0.125 with 3, so it says how consistently the seeds agree). Each DROP uses one alignment of "
            "each side." + note, "", *table, ""]


def _boundary_row(s: Any, base: Any, k: int, key: str) -> list[str] | None:
    """One system's cells at one K against ``base`` for the per-input probability ``key`` (from the system's mean
    to the seed count); None when no seed of the two measured it at ``k``."""
    from scanmt.metrics.paired import paired_means

    pairs = []
    for run in sorted(s.runs, key=lambda r: r["seed"]):
        mine, theirs = _per_input(run, k) or {}, _per_input(base.seed(run["seed"]) or {}, k) or {}
        if key in mine and key in theirs:
            pairs.append((run["seed"], (mine[key], theirs[key])))
    tests = [(seed, t) for seed, pair in pairs if (t := paired_means([pair])) is not None]
    pooled = paired_means([pair for _, pair in pairs])
    if pooled is None:
        return None
    by_seed = _by_seed_cell([f"{seed}: {_test_cell(t, two_sided=True)}" for seed, t in tests],
                            [t.delta for _, t in tests], two_sided=True)
    return [f"{pooled.a:.1f}", f"{pooled.b:.1f}", by_seed, _test_cell(pooled, two_sided=True), str(len(tests))]


def boundary_section(systems: Sequence[Any], baseline: str | Mapping[str, str] | None) -> list[str]:
    """Markdown lines: for each system but its baseline, each K >= 2 and each of :data:`BOUNDARY_MEASURES` (the
    probability of the full stop closing the joined inputs' first sentence, and of ``</s>`` after it; teacher-forced,
    :mod:`scanmt.decoding.boundary`), its mean against its baseline's of the same seed, with a two-sided paired
    bootstrap over the inputs both measured, by seed and pooled (:func:`scanmt.metrics.paired.paired_means`).
    Nothing where no pair of runs measured it (runs of older code)."""
    by_name = {s.name: s for s in systems}
    baselines = as_baselines(list(by_name), baseline)
    one = single_baseline(baselines)
    rows = []
    for s in systems:
        base = by_name.get(baselines.get(s.name, s.name))
        if base is None or base is s:
            continue
        for k in _stress_ks(s):
            for key, measure in BOUNDARY_MEASURES:
                cells = _boundary_row(s, base, k, key) if k >= 2 else None
                if cells is not None:
                    rows.append([_escape(s.label), str(k), measure, *cells,
                                 *([] if one is not None else [_escape(base.label)])])
    if not rows:
        return []
    title = by_name[one].label if one is not None and one in by_name else "each system's baseline"
    head = ["system", "K", "probability", "mean %", "baseline's %", "Δ (p) by seed", "Δ (p) pooled", "seeds",
            *([] if one is not None else ["compared with"])]
    align = ["---", "---:", "---", "---:", "---:", "---", "---:", "---:", *([] if one is not None else ["---"])]
    return [f"### Stress test: does the system stop after the first sentence? Against {title}, paired", "",
            "Each model reads the joined references teacher-forced (`scanmt.decoding.boundary`). At the step where "
            "the reference closes its first sentence, the probability the model gives that full stop (`!`, `?`; a "
            "search that writes one sentence per joined input decides there whether to stop after the first "
            "sentence's content), and at the step after it, where the reference goes on, the probability it gives "
            "`</s>`: the mean over the inputs, in percent. Δ: the system's mean minus its baseline's of the same "
            "seed, over the inputs both measured; p: two-sided, from a paired bootstrap over the inputs (1000 "
            "resamples; pooled: the seeds' inputs resampled together); *sign-flip*: the exact two-sided p over the "
            "seeds' Δs. † marks p < 0.05. Only runs whose stress test measured it (newer than the measure) count.", "",
            "| " + " | ".join(head) + " |", "|" + "|".join(align) + "|", *("| " + " | ".join(r) + " |" for r in rows),
            ""]


def _contrast_row(arm: Any, arm_base: Any, ref: Any, ref_base: Any, k: int) -> list[str] | None:
    """The cells of one arm at one K, from Δ REP of the arm to the seed count; None when no seed has all four runs'
    stress tests at ``k``."""
    from scanmt.metrics.paired import difference_in_differences

    quads = []
    for run in sorted(arm.runs, key=lambda r: r["seed"]):
        seed = run["seed"]
        quad = tuple(_per_input(x, k) for x in (run, arm_base.seed(seed) or {}, ref.seed(seed) or {},
                                                ref_base.seed(seed) or {}))
        if all(x is not None for x in quad):
            quads.append((seed, quad))
    if not quads:
        return None
    by_seed, pooled = _seed_tests(quads, difference_in_differences, two_sided=True)
    cells = []
    for m in ("REP", "DROP"):
        t = pooled.get(m)
        cells += ["–", "–", "–", "–"] if t is None else [f"{t.a:+.2f}", f"{t.b:+.2f}", by_seed[m],
                                                        _test_cell(t, two_sided=True)]
    return [*cells, str(len(quads))]


def _arms(systems: Sequence[Any], baselines: Mapping[str, str], reference: str | None) -> list[tuple[Any, Any]]:
    """``[(reference, its baseline), (arm, its baseline), ...]``: the arms are the systems whose baseline is neither
    themselves nor the reference's; empty without a reference that has a baseline among ``systems``."""
    by_name = {s.name: s for s in systems}
    ref = by_name.get(reference or "")
    ref_base = by_name.get(baselines.get(reference or "", ""))
    if ref is None or ref_base is None or ref_base is ref:
        return []
    pairs = [(ref, ref_base)]
    for s in systems:
        base = by_name.get(baselines.get(s.name, s.name))
        if s is not ref and base is not None and base is not s and base is not ref_base:
            pairs.append((s, base))
    return pairs


def _stress_ks(s: Any) -> list[int]:
    return sorted({int(k) for r in s.runs for k in ((r.get("stress") or {}).get("per_input") or {})})


def draw_contrast_figure(systems: Sequence[Any], baselines: Mapping[str, str], reference: str | None,
                         png: Path) -> bool:
    """Draw, for the reference and each arm (:func:`contrast_section`), its Δ REP and Δ DROP against its own
    baseline over K (pooled over the seeds, bars ± one std of the seeds' Δs) into ``png`` (atomically); False, and
    nothing written, without a reference, arms, or stress tests."""
    from scanmt.metrics.paired import paired_rates
    from scanmt.viz.stress_plot import plot_stress

    pairs = _arms(systems, baselines, reference)
    ks = sorted({k for s, _ in pairs for k in _stress_ks(s)})
    if len(pairs) < 2 or not ks:
        return False
    panels: dict[str, dict[str, list[float | None]]] = {"Δ REP": {}, "Δ DROP": {}}
    spread: dict[str, dict[str, list[float | None]]] = {"Δ REP": {}, "Δ DROP": {}}
    for s, base in pairs:
        for metric in ("REP", "DROP"):
            panels[f"Δ {metric}"][s.label], spread[f"Δ {metric}"][s.label] = [], []
        for k in ks:
            seeds = [(_per_input(run, k), _per_input(base.seed(run["seed"]) or {}, k)) for run in s.runs]
            seeds = [(mine, theirs) for mine, theirs in seeds if mine is not None and theirs is not None]
            pooled = paired_rates(seeds, samples=1)  # (only the Δs are drawn: one resample)
            each = [paired_rates([pair], samples=1) for pair in seeds]
            for metric in ("REP", "DROP"):
                deltas = [t[metric].delta for t in each if metric in t]
                panels[f"Δ {metric}"][s.label].append(pooled[metric].delta if metric in pooled else None)
                spread[f"Δ {metric}"][s.label].append(statistics.stdev(deltas) if len(deltas) > 1 else None)
    if all(v is None for lines in panels.values() for values in lines.values() for v in values):
        return False
    plot_stress(panels, ks, png, spread=spread, zero_line=True,
                title="each system minus its baseline, pooled over seeds, bars ± one std")
    return True


def contrast_section(systems: Sequence[Any], baselines: Mapping[str, str], reference: str | None,
                     figure: str | None = None) -> list[str]:
    """Markdown lines: for each arm of an ablation (a system whose baseline is not the reference's) and each K, its
    Δ REP and Δ DROP against its own baseline beside the ``reference`` system's against its baseline, and the
    difference of the two with a two-sided paired bootstrap p-value over the joined inputs, by seed and pooled
    (:func:`scanmt.metrics.paired.difference_in_differences`), then the figure (its relative path ``figure``, when
    drawn: :func:`draw_contrast_figure`).  Nothing without a reference or its runs."""
    pairs = _arms(systems, baselines, reference)
    if not pairs:
        return []
    (ref, ref_base), rows = pairs[0], []
    for s, base in pairs[1:]:
        for k in _stress_ks(s):
            cells = _contrast_row(s, base, ref, ref_base, k)
            if cells is not None:
                rows.append([f"{_escape(s.label)} − {_escape(base.label)}", str(k), *cells])
    if not rows:
        return []
    head = ["arm − its baseline", "K", "Δ REP arm", "Δ REP reference", "ΔΔ REP (p) by seed", "ΔΔ REP (p) pooled",
            "Δ DROP arm", "Δ DROP reference", "ΔΔ DROP (p) by seed", "ΔΔ DROP (p) pooled", "seeds"]
    align = ["---", "---:", "---:", "---:", "---", "---:", "---:", "---:", "---", "---:", "---:"]
    label = f"{_escape(ref.label)} − {_escape(ref_base.label)}"
    return [f"### Stress test: does an arm change the effect of {label}?", "",
            f"The reference: {label}. For each arm (a system with a baseline of its own) and each K, the arm's REP "
            "(DROP) minus its baseline's, the reference's minus its baseline's (pooled over the seeds that have all "
            "four runs), and ΔΔ, the first minus the second: negative where the arm cuts the rate more than the "
            "reference does (or raises it less). p: two-sided, from a paired bootstrap over the joined inputs "
            "(1000 resamples, the four runs of a seed resampled together; pooled: the seeds' inputs resampled "
            "together; `scanmt.metrics.paired.difference_in_differences`). † marks p < 0.05; with several arms "
            "and two metrics some † arise by chance. The bootstrap covers the choice of test inputs, not the training "
            "seeds; *sign-flip*: the exact two-sided sign-flip p over the seeds' ΔΔs (at least 2^(1-n) with n seeds, "
            "0.25 with 3). K = 1 is the test set itself.", "",
            "| " + " | ".join(head) + " |", "|" + "|".join(align) + "|", *("| " + " | ".join(r) + " |" for r in rows),
            "", *([f"![each system minus its baseline over K, pooled over seeds]({figure})", ""] if figure else [])]
