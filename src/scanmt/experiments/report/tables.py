"""The report's tables: the main results table (Table 1/2 analogue) and one per extra test split, the output
layer, attention statistics, attention health during training, and the per-run details; and the plain-text
summary ``experiment run`` prints.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Sequence

from scanmt.errors import DataError
from scanmt.experiments.baselines import Baselines, single_baseline
from scanmt.experiments.grid import SPEED_KEYS
from scanmt.experiments.layout import TRAIN_LOG, SharedPaths, seed_name
from scanmt.experiments.report.collection import (SystemResults, Texts, collect, hyp_lines, load_texts, run_dir_of,
                                                  system_outputs)
from scanmt.experiments.report.markdown import anchor, code_span, fmt, md_escape, mean_std
from scanmt.experiments.report.page import Page, ReportOptions
from scanmt.experiments.report.results_json import extra_splits, read_meta_lenient, split_display_name
from scanmt.experiments.report.significance import SeedTest, p_cell, significance
from scanmt.experiments.run_health import RunHealth, run_health
from scanmt.metrics.paired import MIN_INPUTS


#: (metric key, column title, higher is better)
COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("bleu", "BLEU", True),
    ("meteor", "METEOR", True),
    ("rep", "REP", False),
    ("drop", "DROP", False),
    ("sacrebleu", "sacreBLEU", True),
)


#: the Output layer table: (``metrics.json`` ``search`` key, column title, scale)
SEARCH_COLUMNS: tuple[tuple[str, str, float], ...] = (
    ("mean_support", "output support (words / step)", 1.0),
    ("exact_share", "exact search (%)", 100.0),
    ("forced", "forced `</s>` (outputs)", 1.0),
)


def best_means(systems: Sequence[SystemResults]) -> dict[str, str]:
    """Per column, the best mean formatted to 2 decimals (ties are all bold)."""
    best = {}
    for key, _, higher in COLUMNS:
        means = [mean_std(s.values(key))[0] for s in systems if s.values(key)]
        if means:
            best[key] = f"{(max(means) if higher else min(means)):.2f}"
    return best


def _metric_cells(s: SystemResults, systems: Sequence[SystemResults], best: dict[str, str]) -> list[str]:
    """The :data:`COLUMNS` cells of one system's row, each column's best mean in bold."""
    cells = []
    for key, _, _ in COLUMNS:
        vals = s.values(key)
        cell = fmt(vals)
        if vals and f"{mean_std(vals)[0]:.2f}" == best.get(key) and len([x for x in systems if x.values(key)]) > 1:
            cell = f"**{cell}**"
        cells.append(cell)
    return cells


def _table_head(first: str, baseline_label: str | None, extra: Sequence[str]) -> list[str]:
    """The results table's head: Δ BLEU against ``baseline_label`` (escaped), or, when systems have different
    baselines (None), against each row's, named in a *compared with* column."""
    delta = ([f"Δ BLEU (p) vs {baseline_label}, by seed"] if baseline_label is not None
             else ["Δ BLEU (p) vs its baseline, by seed", "compared with"])
    head = [first, *[c[1] for c in COLUMNS], *delta, "seeds", *extra]
    return ["| " + " | ".join(head) + " |",
            "|" + "|".join(["---"] + ["---:"] * (len(COLUMNS) + len(delta) + 1) + ["---"] * len(extra)) + "|"]


def system_labels(systems: Sequence[SystemResults]) -> dict[str, str]:
    """System name -> its escaped label."""
    return {s.name: md_escape(s.label) for s in systems}


def _uniform_label(systems: Sequence[SystemResults], baselines: Baselines) -> str | None:
    """The escaped label of the one baseline every system is compared with, else None."""
    one = single_baseline(baselines)
    return None if one is None else system_labels(systems).get(one, md_escape(one))


def _comparison_cells(name: str, systems: Sequence[SystemResults], baselines: Baselines,
                      tests: dict[str, list[SeedTest]]) -> list[str]:
    """A row's Δ BLEU (p) cell, and its *compared with* cell when the systems' baselines differ."""
    cells = [p_cell(name, baselines, tests)]
    if single_baseline(baselines) is None:
        base = baselines.get(name, name)
        cells.append("" if base == name else system_labels(systems).get(base, md_escape(base)))
    return cells


def _missing_baselines(systems: Sequence[SystemResults], baselines: Baselines) -> list[str]:
    """Escaped labels of the baselines some system is compared with that have no finished run."""
    runs = {s.name: bool(s.runs) for s in systems}
    labels = system_labels(systems)
    return [labels.get(b, md_escape(b)) for b in dict.fromkeys(baselines[s.name] for s in systems if s.name in baselines)
            if not runs.get(b)]


def split_section(out: Path, rec: dict[str, Any], systems: Sequence[SystemResults], baselines: Baselines,
                  opts: ReportOptions, split: str, title: str) -> list[str]:
    """Markdown lines of the results table on an extra test split (its numbers from ``test_sets``)."""
    views = [s.on_split(split) for s in systems]
    sub = {**rec, "split": split}
    try:
        texts: Texts | None = load_texts(out, sub)
    except DataError:
        texts = None  # the prepared text is gone: no p-values
    pvals = significance(out, sub, texts, views, baselines, opts.samples) if texts is not None else {}
    best = best_means(views)
    size = f", {len(texts.ref)} sentences" if texts else ""
    L = [f"## Results on {code_span(title)}", "",
         f"The same runs on the extra test split {code_span(split)} ({code_span(title)}{size}), translated and scored like "
         "the main test set (same columns; the paired bootstrap on this split's outputs).", ""]
    L += _table_head("system", _uniform_label(views, baselines), [])
    for v, s in zip(views, systems):
        notes = [f"+{n} {what}" for n, what in ((len(s.runs) - len(v.runs), "finished without this test set"),
                                                (len(s.unfinished), "unfinished")) if n]
        cells = [md_escape(v.label), *_metric_cells(v, views, best), *_comparison_cells(v.name, views, baselines, pvals),
                 str(len(v.runs)) + (f" ({', '.join(notes)})" if notes else "")]
        L.append("| " + " | ".join(cells) + " |")
    return L + [""]


def extra_split_sections(out: Path, rec: dict[str, Any], systems: Sequence[SystemResults], baselines: Baselines,
                         opts: ReportOptions) -> list[str]:
    """One :func:`split_section` per extra test split any finished run scored."""
    meta = read_meta_lenient(SharedPaths(out).data)
    L: list[str] = []
    for split in extra_splits({s.name: s.runs for s in systems}, rec["split"]):
        L += split_section(out, rec, systems, baselines, opts, split, split_display_name(meta, split))
    return L


def _machines(systems: list[SystemResults]) -> list[str]:
    """The machines the runs trained and decoded on (``metrics.json`` ``machines``), by run, when recorded."""
    by_machine: dict[str, list[str]] = {}
    for s in systems:
        for r in s.runs:
            for m in r.get("machines") or []:
                by_machine.setdefault(m, []).append(f"{s.name}/{seed_name(r['seed'])}")
    if not by_machine:
        return []
    return ["", "Machines the runs ran on (processor, CPUs, torch, training threads and precision, where recorded): "
            + "; ".join(f"`{m}`: {', '.join(runs)}" for m, runs in sorted(by_machine.items())) + "."]


def _grid_commands(rec: dict[str, Any]) -> list[str]:
    """The grid command, or every distinct one that ran into the folder, oldest first (``commands``; records
    written before it have the last one only)."""
    commands = rec.get("commands") or [rec.get("command", "")]
    if len(commands) == 1:
        return [f"Grid command: `{commands[0]}`"]
    return ["Grid commands, oldest first (each run's own is under Commands below):", "",
            *[f"- `{c}`" for c in commands]]


def page_title(rec: dict[str, Any]) -> str:
    """The title of a grid's report: the grid file's ``title``, else one naming the grid."""
    return rec.get("title") or f"Experiments: grid {rec['name']}"


def header(p: Page) -> list[str]:
    rec, systems = p.rec, p.systems
    n_done = sum(len(s.runs) for s in systems)
    commits = sorted({c for s in systems for r in s.runs for c in (r.get("commits") or [r["commit"]])})
    L = [f"# {page_title(rec)}", ""]
    if rec.get("description"):
        L += [rec["description"].strip(), ""]
    L += [
        f"Generated by `{p.opts.command or 'scanmt experiment report'}` on {time.strftime('%Y-%m-%d %H:%M')} from "
        f"`{p.out}`: {n_done} finished runs of {len(systems)} systems. Test set: `{rec['split']}` of `{rec['data']}` "
        f"({rec['src_lang']}→{rec['tgt_lang']}, {len(p.texts.ref)} sentences); preset `{rec['preset']}`; "
        f"seeds requested: {len(rec.get('seeds') or [])}; commit(s): {', '.join(f'`{c}`' for c in commits) or '–'}.",
        *_machines(systems),
        "",
        *_grid_commands(rec),
        "",
    ]
    speed = [x for x in rec.get("set") or [] if x.split("=", 1)[0] in SPEED_KEYS]
    if len(speed) < len(rec.get("set") or []):
        L += ["Overrides for every system (grid `set:`, then `--set`; later ones win): "
              + ", ".join(f"`{x}`" for x in rec["set"] if x not in speed), ""]
    if speed:
        L += ["Speed settings of the latest grid command: " + ", ".join(f"`{x}`" for x in speed) + " (they do not "
              "make a finished run stale, so runs may differ in them: the machine list and each run's "
              "`command.txt` say what it trained with)", ""]
    return L


def main_table(p: Page) -> list[str]:
    """The Table 1/2 analogue on the main test split, with its notes."""
    systems, baselines, opts = p.systems, p.baselines, p.opts
    pvals = significance(p.out, p.rec, p.texts, systems, baselines, opts.samples)
    best = best_means(systems)
    main_name = split_display_name(read_meta_lenient(SharedPaths(p.out).data), p.rec["split"])
    uniform = _uniform_label(systems, baselines)
    against = uniform or ("its baseline (the *compared with* column; the grid's baseline, "
                          f"{md_escape(p.base.label)}, for the rest)")
    L = [f"## Results on {code_span(main_name)}", ""]
    L += _table_head("system", uniform, ["commit", "command"])
    for s in systems:
        cells = [md_escape(s.label), *_metric_cells(s, systems, best)]
        cells += _comparison_cells(s.name, systems, baselines, pvals)
        cells.append(str(len(s.runs)) + (f" (+{len(s.unfinished)} unfinished)" if s.unfinished else ""))
        cs = sorted({c for r in s.runs for c in (r.get("commits") or [r["commit"]])})
        cells.append(", ".join(f"`{c[:10]}{'+dirty' if c.endswith('+dirty') else ''}`" for c in cs) or "–")
        cells.append(f"[commands](#{anchor(s.name)})" if s.runs else "–")
        L.append("| " + " | ".join(cells) + " |")
    sig = next((r["bleu_signature"] for s in systems for r in s.runs if r.get("bleu_signature")), "")
    signature = f" (sacrebleu `{sig}`)" if sig else ""  # none before a run has finished
    L += [
        "",
        f"BLEU: tokenized (Moses), lowercased, as the paper's multi-bleu -lc{signature}; sacreBLEU: "
        "detokenized, cased, for reference. METEOR: nltk with WordNet synonyms. REP and DROP: the paper's "
        f"Section 5 scores, lower is better (DROP uses the word-level eflomal aligner of `OUT/shared`; "
        f"{_drop_samples_note(systems)}). "
        "Values are mean ± sample standard deviation over the finished seeds (no ± with one seed); the best mean "
        "of each column is in bold. Δ BLEU (p), by seed: for each seed in turn, the system's tokenized BLEU minus "
        f"that of {against} trained with the same seed, and the p-value of sacrebleu's paired "
        f"bootstrap resampling ({opts.samples} resamples) of the two outputs; † marks p < 0.05 (no p-value over "
        f"fewer than {MIN_INPUTS} test sentences: the test cannot be run).",
        "",
        f"The same numbers, machine-readable: [`{p.stem}.json`]({p.stem}.json) (per system: mean and std of BLEU, "
        "REP, DROP and METEOR, the number of seeds, and DROP's noise split as `drop_noise`; see "
        "`scanmt.experiments.report.results_json`).",
        "",
    ]
    missing = _missing_baselines(systems, baselines)
    if missing:
        L += [f"No p-values against {', '.join(missing)}: no finished run.", ""]
    return L + _empty_outputs_note(p)


def empty_outputs(src: Sequence[str], hyp: Sequence[str]) -> int:
    """The number of non-empty source lines whose translation is empty."""
    return sum(1 for s, h in zip(src, hyp) if s.strip() and not h.strip())


def _empty_outputs_note(p: Page) -> list[str]:
    """A warning naming the runs that translated a non-empty source line as nothing (each such line
    drops every source word, so DROP and BLEU measure the decoder's stopping, not the attention)."""
    found = []
    for s in p.systems:
        for r in sorted(s.runs, key=lambda r: r["seed"]):
            hyp = hyp_lines(p.out, p.rec, s.name, r["seed"])
            n = empty_outputs(p.texts.src, hyp) if hyp is not None else 0
            if n:
                found.append(f"{md_escape(s.label)} seed {r['seed']}: {n}")
    if not found:
        return []
    return [f"> **Empty translations of non-empty sources** ({'; '.join(found)}). These runs were decoded without "
            "a minimum output length (before `decode.min_len`), where beam search without length normalisation can "
            "prefer `</s>` as the first word; each such line drops every source word. Decode them again with "
            "`scanmt experiment run ... --redecode` (their models are kept).", ""]


def _drop_samples_note(systems: list[SystemResults]) -> str:
    """How many alignments each run's DROP averages (``drop_samples`` of its ``metrics.json``; 1 before it existed)."""
    counts = sorted({int(r.get("drop_samples") or 1) for s in systems for r in s.runs})
    if not counts:
        return "no run has finished yet"
    if counts == [1]:
        return "one alignment per run; the aligner samples at random, which moves DROP by about 0.1"
    said = f"{counts[0]} to {counts[-1]}" if len(counts) > 1 else f"{counts[0]}"
    return f"each run's DROP is the mean over {said} alignments of each side (`--drop-samples`)"


def output_layer(p: Page) -> list[str]:
    """The searches on the main test set per system (``metrics.json`` ``search``: output support, exact searches,
    forced ``</s>``); nothing unless some system has a sparse output (reports of softmax grids do not change)."""
    from scanmt.model.output import is_sparse

    outputs = system_outputs(p.rec, p.systems)
    if not any(is_sparse(o) for o in outputs.values()):
        return []
    L = ["## Output layer", "",
         "| system | output | " + " | ".join(title for _, title, _ in SEARCH_COLUMNS) + " | seeds |",
         "|---|---|" + "---:|" * len(SEARCH_COLUMNS) + "---|"]
    for s in p.systems:
        stats = [r["search"] for r in s.runs if r.get("search")]
        cells = [fmt([scale * float(x[key]) for x in stats if x.get(key) is not None])
                 for key, _, scale in SEARCH_COLUMNS]
        without = len(s.runs) - len(stats)
        seeds = str(len(stats)) + (f" (+{without} without search statistics)" if without else "")
        L.append(f"| {md_escape(s.label)} | {code_span(outputs[s.name])} | " + " | ".join(cells) + f" | {seeds} |")
    return L + [
        "",
        f"Each finished run's beam search on the main test set (`{p.rec['split']}.search.json` in its run directory, "
        "written by `scanmt translate --search-stats`). Output support: the mean number of words of nonzero "
        "probability per output step, the `</s>` step included (the whole vocabulary for softmax). Exact search: "
        "the share of the test sentences (empty lines left out) whose beam search provably returned the best output "
        "that the length rules allow (Peters, Niculae and Martins, 2019; `scanmt.decoding.search`). Forced `</s>`: "
        "outputs that ended with a `</s>` of zero probability (at the length limit, or when no word had probability "
        "left). Mean ± std over the seeds with these statistics; – where no run has them (runs translated before "
        "`translate --search-stats` existed; `scanmt experiment run ... --redecode` adds them).",
        "",
    ]


def details(p: Page) -> list[str]:
    """Attention statistics and per-run details."""
    def share(s: SystemResults, key: str) -> list[float]:
        return [100 * r["attention"][key] for r in s.runs if (r.get("attention") or {}).get(key) is not None]

    bounds = any(share(s, "sink_share") or share(s, "saturated_share") for s in p.systems)
    L = ["## Attention statistics", "",
         "| system | exact zeros (%) | attended source tokens / step | never-attended source tokens (%) |"
         + (" attention to the sink (%) | bounds reached (%) |" if bounds else ""),
         "|---|---:|---:|---:|" + ("---:|---:|" if bounds else "")]
    for s in p.systems:
        a = [r["attention"]["mean_attended"] for r in s.runs if r.get("attention")]
        L.append(f"| {md_escape(s.label)} | {fmt(share(s, 'zero_fraction'))} | {fmt(a)} | "
                 f"{fmt(share(s, 'unattended_share'))} |"
                 + (f" {fmt(share(s, 'sink_share'))} | {fmt(share(s, 'saturated_share'))} |" if bounds else ""))
    L += ["", "Means over seeds, test set, subword attention including the <sink> column of constrained models"
          + (": *attention to the sink*, the mean weight of the <sink> per output step; *bounds reached*, the real "
             "source tokens whose total attention reaches 99 % of their fertility bound "
             "(`scanmt.metrics.attention_stats`; – for runs evaluated before these existed)." if bounds else "."), ""]
    L += _training_health(p)
    L += ["## Runs", "", "| system | seed | steps | train min | best valid BLEU | BLEU | METEOR | REP | DROP | penalties (α, β) |",
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for s in p.systems:
        for r in sorted(s.runs, key=lambda r: r["seed"]):
            t = r.get("train") or {}
            pen = r.get("penalties")
            pen_s = f"{pen['length_alpha']:g}, {pen['coverage_beta']:g}" if pen else "–"
            steps = t.get("steps")
            mins = t.get("minutes")
            vb = t.get("best_valid_bleu")
            reuse = f" (model of {Path(r['model_from']).parent.name})" if r.get("model_from") else ""
            L.append(
                f"| {md_escape(s.label)} | {r['seed']} | {steps if steps is not None else '–'}{reuse} | "
                f"{mins if mins is not None else '–'} | {f'{vb:.2f}' if isinstance(vb, (int, float)) else '–'} | "
                f"{r['bleu']:.2f} | {r['meteor']:.2f} | {r['rep']:.2f} | {r['drop']:.2f} | {pen_s} |"
            )
    return L + [""]


def _pct(values: Sequence[float]) -> str:
    return f"{100 * max(values):.2f}" if values else "–"


def _training_health(p: Page) -> list[str]:
    """Attention health during training, from each run's ``metrics.csv`` (:mod:`scanmt.experiments.run_health`)."""
    per_system: list[tuple[SystemResults, list[RunHealth]]] = []
    for s in p.systems:
        hs: list[RunHealth] = []
        for r in s.runs:
            t = r.get("train") or {}
            h = run_health(run_dir_of(p.out, s.name, r) / TRAIN_LOG, t.get("steps"), t.get("epochs"))
            if h is not None:
                hs.append(h)
        per_system.append((s, hs))
    heads = any(h.head_one_hot_max is not None for _, hs in per_system for h in hs)
    head_cols = " one-hot head rows, epoch 1 (%) | one-hot head rows, whole run (%) |" if heads else ""
    L = ["## Attention during training", "",
         "| system | runs | one-hot steps, epoch 1 (%) | one-hot steps, whole run (%) |" + head_cols
         + " support, last window | score gradient after epoch 1 |",
         "|---|---:|---:|---:|" + ("---:|---:|" if heads else "") + "---:|---|"]
    for s, hs in per_system:
        first = [h.one_hot_epoch1 for h in hs if h.one_hot_epoch1 is not None]
        whole = [h.one_hot_max for h in hs if h.one_hot_max is not None]
        grads = [h.score_grad_after_epoch1 for h in hs if h.score_grad_after_epoch1 is not None]
        grad = f"{min(g[0] for g in grads):.3g}–{max(g[1] for g in grads):.3g}" if grads else "–"
        head_vals = ""
        if heads:
            hf = [h.head_one_hot_epoch1 for h in hs if h.head_one_hot_epoch1 is not None]
            hw = [h.head_one_hot_max for h in hs if h.head_one_hot_max is not None]
            head_vals = f" {_pct(hf)} | {_pct(hw)} |"
        L.append(f"| {md_escape(s.label)} | {len(hs)} | {_pct(first)} | {_pct(whole)} |{head_vals} "
                 f"{fmt([h.support_last for h in hs if h.support_last is not None])} | {grad} |")
    notes = []
    if heads:
        notes = ["", "One-hot head rows (models with attention heads): the same share over every explicitly computed "
                 "cross-attention head's rows (target step x head, `attn/head_one_hot`); the reported attention is a "
                 "mean over the last layer's heads and can look healthy while each head is one-hot."]
    return L + notes + [
        "",
        "From the training logs (`metrics.csv`, one window per `train.log_every` updates, teacher-forced training "
        "batches). One-hot steps: the largest share, over the windows and the seeds, of target steps whose largest "
        "attention weight is above 0.999; epoch 1 is the windows that end by update ⌈steps / epochs⌉. A "
        "sparsemax or csparsemax row that is one-hot has a zero Jacobian, so its scores stop learning. Support: "
        "attended source positions per step in the last window (mean over seeds). Score gradient: the smallest and "
        "largest norm of the loss's gradient at the attention scores in any window after epoch 1, over the seeds.",
        "",
    ]


def summary_rows(out: Path, rec: dict[str, Any], split: str | None = None) -> list[list[str]]:
    """Rows for a plain-text summary (system, seeds, BLEU, METEOR, REP, DROP) of the main or an extra split."""
    rows = []
    for s in collect(out, rec):
        s = s.on_split(split) if split is not None and split != rec["split"] else s
        rows.append([s.label, str(len(s.runs)), *[fmt(s.values(k)) for k in ("bleu", "meteor", "rep", "drop")]])
    return rows
