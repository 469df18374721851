"""``scanmt experiment report``: a grid's results as Markdown, laid out like the paper's tables.

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
  difference to the baseline exceeds each noise (:mod:`scanmt.experiments.drop_noise`; one line without samples);
- the coverage stress test of runs made with ``--stress-k`` (``metrics.json`` ``stress``): BLEU, REP, DROP,
  inputs dropping a whole sentence and length ratio per system and K, mean ± std over seeds
  (:mod:`scanmt.experiments.stress_report`);
- attention statistics (sparsity), attention health during training (one-hot share
  in epoch 1 and overall, support, score gradient; from each run's ``metrics.csv``,
  :mod:`scanmt.experiments.run_health`) and per-run details (steps, minutes, tuned
  penalties);
- Figure 2 analogues: attention maps of the baseline and a constrained system,
  side by side, for test sentences where the baseline repeats words (chosen
  automatically with the REP sentence score), as PNGs in
  ``DOCS/experiments-{grid}/``;
- an Appendix B analogue: source, reference and every system's output for a few
  test sentences;
- the commands, and the runs that are missing or unfinished;

and ``DOCS/experiments-{grid}.json`` (or ``--name``), the main table's numbers in a
machine-readable form (:mod:`scanmt.experiments.results_json`).  Every file is written atomically.
Regenerating a report removes the figures its previous version linked and the new one does not show
(:func:`stale_figures`); nothing else in the folder is touched.
"""

from __future__ import annotations

import json
import logging
import re
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from scanmt.errors import ConfigError, DataError
from scanmt.experiments.baselines import (
    Baselines,
    as_baselines,
    grid_baseline,
    resolve_baselines,
    resolve_reference_arm,
    single_baseline,
)
from scanmt.experiments.drop_noise import drop_noise, drop_noise_section, has_aligner_samples
from scanmt.experiments.grid import SPEED_KEYS, check_name
from scanmt.experiments.results_json import (
    extra_splits,
    read_meta_lenient,
    results_table,
    split_display_name,
    write_results_json,
)
from scanmt.experiments.run_health import RunHealth, run_health
from scanmt.experiments.stress_report import CONTRAST_FIGURE
from scanmt.experiments.stress_report import FIGURE as STRESS_FIGURE
from scanmt.experiments.stress_report import (
    contrast_section,
    draw_contrast_figure,
    draw_stress_figure,
    stress_section,
)
from scanmt.io import atomic_open, check_output_file, read_lines
from scanmt.metrics.paired import MIN_INPUTS, format_p

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
MAX_FIGURE_BYTES = 150_000
#: a figure link as the report writes it: ``](STEM/attention-N.png)``, ``](STEM/stress.png)``
FIGURE_LINK = re.compile(r"\]\(([^()/]+)/(attention-\d+\.png|stress\.png|stress-contrast\.png)\)")

log = logging.getLogger("scanmt.experiment")


# --------------------------------------------------------------------------- loading


def grid_records(out: Path) -> list[dict[str, Any]]:
    """The grids recorded in ``OUT/grids/*.json`` by ``scanmt experiment run``."""
    d = out / "grids"
    if not out.is_dir():
        raise DataError(f"{out}: experiment directory not found")
    recs = []
    for p in sorted(d.glob("*.json")) if d.is_dir() else []:
        try:
            rec = json.loads(p.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise DataError(f"{p}: not valid JSON ({exc})") from None
        recs.append(rec)
    if not recs:
        raise DataError(f"{out}: no grid recorded (no {d}/*.json); run `scanmt experiment run GRID --out {out}` first")
    return recs


@dataclass
class SystemResults:
    name: str
    label: str
    runs: list[dict[str, Any]] = field(default_factory=list)  # metrics.json of finished seeds, by seed
    unfinished: list[str] = field(default_factory=list)  # "seed2 (training)" ...
    commands: str = ""

    def seed(self, k: int) -> dict[str, Any] | None:
        return next((r for r in self.runs if r["seed"] == k), None)

    def values(self, key: str) -> list[float]:
        return [float(r[key]) for r in self.runs if r.get(key) is not None]

    def on_split(self, split: str) -> "SystemResults":
        """The same system on an extra test split: the finished seeds that scored it (``test_sets``)."""
        runs = [{"seed": r["seed"], **r["test_sets"][split]} for r in self.runs if split in (r.get("test_sets") or {})]
        return SystemResults(self.name, self.label, runs, self.unfinished, self.commands)


def _stage(run: Path) -> str:
    """Where an unfinished run stopped, with the last line of its log (often the error)."""
    where = "not started"
    if (run / "last.pt").exists():
        where = "stopped during training"
    elif (run / "log.txt").exists():
        where = "stopped before its first checkpoint"
    for stage in ("evaluate", "translate", "tune", "train"):
        if (run / ".stages" / f"{stage}.done").exists():
            where = f"stopped after {stage}"
            break
    if last := last_log_line(run):
        where += f"; last log line: {last}"
    return where


def last_log_line(run: Path, width: int = 200) -> str:
    """The last line of ``RUN/log.txt`` with text (at most its last ``width`` characters; a progress bar's
    carriage returns end a line; "": no log)."""
    try:
        text = (run / "log.txt").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    lines = [ln.strip() for ln in text.replace("\r", "\n").splitlines() if ln.strip() and not ln.startswith("#####")]
    return lines[-1][-width:] if lines else ""


def collect(out: Path, rec: dict[str, Any]) -> list[SystemResults]:
    seeds = list(rec.get("seeds") or [])
    res = []
    requested = set(rec.get("requested") or (s["name"] for s in rec["systems"]))
    for s in rec["systems"]:
        if s["name"] not in requested and not (out / "runs" / s["name"]).is_dir():
            continue  # left out with --systems: neither a result nor a missing run
        sr = SystemResults(s["name"], s.get("label") or s["name"])
        base = out / "runs" / s["name"]
        dirs = sorted(base.glob("seed*"), key=lambda p: int(p.name[4:]) if p.name[4:].isdigit() else 0) \
            if base.is_dir() else []
        found = set()
        for d in dirs:
            if not d.name[4:].isdigit():
                continue
            k = int(d.name[4:])
            found.add(k)
            m = None
            if (d / "DONE").exists():
                try:
                    m = json.loads((d / "metrics.json").read_text(encoding="utf-8"))
                except (OSError, json.JSONDecodeError):
                    m = None
            if m is not None:
                sr.runs.append(m)
            else:
                sr.unfinished.append(f"seed{k} ({md_escape(_stage(d))})")
        for k in seeds:
            if k not in found:
                sr.unfinished.append(f"seed{k} (not started)")
        first = min((r["seed"] for r in sr.runs), default=None)
        if first is not None and (base / f"seed{first}" / "command.txt").exists():
            sr.commands = (base / f"seed{first}" / "command.txt").read_text(encoding="utf-8")
        res.append(sr)
    return res


# --------------------------------------------------------------------------- numbers


def mean_std(values: Sequence[float]) -> tuple[float, float | None]:
    m = statistics.fmean(values)
    return m, (statistics.stdev(values) if len(values) > 1 else None)


def fmt(values: Sequence[float]) -> str:
    if not values:
        return "–"
    m, s = mean_std(values)
    return f"{m:.2f}" if s is None else f"{m:.2f} ± {s:.2f}"


def best_means(systems: Sequence[SystemResults]) -> dict[str, str]:
    """Per column, the best mean formatted to 2 decimals (ties are all bold)."""
    best = {}
    for key, _, higher in COLUMNS:
        means = [mean_std(s.values(key))[0] for s in systems if s.values(key)]
        if means:
            best[key] = f"{(max(means) if higher else min(means)):.2f}"
    return best


def _tokenize_all(lines: Sequence[str], lang: str) -> list[str]:
    from scanmt.data.tokenize import tokenize

    return [tokenize(x, lang) if x.strip() else "" for x in lines]


@dataclass
class Texts:
    """Test-set text shared by all systems: raw and tokenized source and reference."""

    src: list[str]
    ref: list[str]
    ref_tok: list[str]
    tgt_lang: str


def load_texts(out: Path, rec: dict[str, Any]) -> Texts:
    """The source and reference of ``rec['split']`` (raises :class:`DataError` when missing)."""
    data = out / "shared" / "data"
    split, s, t = rec["split"], rec["src_lang"], rec["tgt_lang"]
    src = read_lines(data / f"{split}.raw.{s}", what="source file")
    ref = read_lines(data / f"{split}.raw.{t}", what="reference file")
    return Texts(src, ref, _tokenize_all(ref, t), t)


def hyp_lines(out: Path, rec: dict[str, Any], system: str, seed: int) -> list[str] | None:
    p = out / "runs" / system / f"seed{seed}" / f"{rec['split']}.hyp.{rec['tgt_lang']}"
    return read_lines(p, allow_empty=True, what="hypothesis file") if p.exists() else None


@dataclass(frozen=True)
class SeedTest:
    """Paired bootstrap of one seed's tokenized BLEU against its baseline's run with the same seed."""

    seed: int
    delta: float  #: system's BLEU minus the baseline's, in BLEU points
    p: float | None  #: sacrebleu's p-value; 1.0 when the two scores are equal; None over too few sentences


def significance(out: Path, rec: dict[str, Any], texts: Texts, systems: Sequence[SystemResults],
                 baseline: str | Baselines, samples: int) -> dict[str, list[SeedTest]]:
    """Per system, a :class:`SeedTest` for each finished seed whose baseline run of the same seed has outputs.

    ``baseline``: the system every other one is compared with, or each system's own (:mod:`scanmt.experiments.
    baselines`); a system that is its own baseline, or whose baseline is not among ``systems``, gets no entry.
    Seeds pair runs that share everything but the system (data order, initialisation seed), so each
    seed is tested against its own baseline run; a seed the baseline lacks is left out.
    """
    from scanmt.metrics.bleu import paired_bootstrap

    by_name = {s.name: s for s in systems}
    baselines = as_baselines(list(by_name), baseline)
    base_tok: dict[str, dict[int, list[str]]] = {}
    for name in sorted({b for n, b in baselines.items() if b != n and b in by_name}):
        base_tok[name] = {}
        for r in by_name[name].runs:
            hyp = hyp_lines(out, rec, name, r["seed"])
            if hyp is not None:
                base_tok[name][r["seed"]] = _tokenize_all(hyp, texts.tgt_lang)
    tests: dict[str, list[SeedTest]] = {}
    for s in systems:
        name = baselines.get(s.name, s.name)
        base = base_tok.get(name) if name != s.name else None
        if base is None:
            continue
        tests[s.name] = []
        for k in sorted(r["seed"] for r in s.runs):
            hyp = hyp_lines(out, rec, s.name, k)
            if k not in base or hyp is None:
                continue
            b = paired_bootstrap(base[k], _tokenize_all(hyp, texts.tgt_lang), texts.ref_tok, tokenized=True,
                                 samples=samples)
            # sacrebleu counts resampled differences strictly above the observed one, so a zero difference
            # (e.g. identical outputs) would get p = 1/(samples+1); no difference is never significant.  None:
            # fewer than MIN_INPUTS sentences, the test was not run
            p_value = 1.0 if b.score1 == b.score2 and b.p_value is not None else b.p_value
            tests[s.name].append(SeedTest(k, b.score2 - b.score1, p_value))
    return tests


# --------------------------------------------------------------------------- figure 2 and examples


def repetition_scores(hyps_tok: Sequence[str], refs_tok: Sequence[str]) -> list[float]:
    """REP sentence score σ(t, r) (repeated bigrams and doubled words beyond the reference) per sentence."""
    from scanmt.metrics.rep import rep_sentence

    return [rep_sentence(h.split(), r.split()) for h, r in zip(hyps_tok, refs_tok)]


def choose_sentences(base_tok: Sequence[str], other_tok: Sequence[str] | None, texts: Texts, k: int, *,
                     max_src_words: int, max_hyp_words: int = 40, src_tokens: Sequence[int] | None = None,
                     max_src_tokens: int = 0) -> list[int]:
    """Test sentences where the baseline repeats words (σ > 0), those the other system repeats least first.

    Ranked by (σ_baseline − σ_other, σ_baseline), short sources only (readable maps):
    at most ``max_src_words`` words and, with ``src_tokens`` (subwords per source,
    from the attention file), at most ``max_src_tokens`` subwords.
    """
    rb = repetition_scores(base_tok, texts.ref_tok)
    ro = repetition_scores(other_tok, texts.ref_tok) if other_tok is not None else [0.0] * len(rb)
    cands = [
        i for i in range(len(rb))
        if rb[i] > 0 and len(texts.src[i].split()) <= max_src_words
        and (src_tokens is None or src_tokens[i] <= max_src_tokens)
        and len(base_tok[i].split()) <= max_hyp_words
        and (other_tok is None or len(other_tok[i].split()) <= max_hyp_words)
    ]
    cands.sort(key=lambda i: (-(rb[i] - ro[i]), -rb[i], len(texts.src[i].split()), i))
    return cands[:k]


def draw_figure(out_png: Path, panels: list[tuple[str, Any]], title: str) -> int:
    """Attention maps side by side (scanmt.viz.attention_map), at a dpi that keeps the PNG small."""
    from scanmt.viz.attention_map import Panel, figure_pixels, plot_attention_maps

    ps = [Panel(name=name, attention=s.attention, src=list(s.src), hyp=list(s.hyp)) for name, s in panels]
    w, _ = figure_pixels(ps, 100)
    dpi = max(40, min(100, int(100 * 1400 / max(w, 1))))
    for _ in range(5):
        plot_attention_maps(ps, out_png, title=title, dpi=dpi)
        size = out_png.stat().st_size
        if size <= MAX_FIGURE_BYTES or dpi <= 40:
            return size
        dpi = max(40, int(dpi * 0.75))
    return out_png.stat().st_size


def md_escape(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    text = text.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
    for ch in "*_`[]":
        text = text.replace(ch, "\\" + ch)
    return text.replace("\n", " ")


# --------------------------------------------------------------------------- markdown


@dataclass
class ReportOptions:
    baseline: str | None = None
    reference_arm: str | None = None  #: instead of the grid's ``reference_arm`` (stress_report.contrast_section)
    samples: int = 1000
    figures: int = 2
    examples: int = 5
    max_figure_words: int = 25
    max_figure_tokens: int = 30
    command: str = ""


def _anchor(name: str) -> str:
    return "cmd-" + "".join(c if c.isalnum() else "-" for c in name.lower())


def _p_cell(name: str, baselines: Baselines, tests: dict[str, list[SeedTest]]) -> str:
    """``+0.99 (0.018 †) / +0.73 (0.065)``: per seed, the BLEU difference to the baseline and its p-value
    (:func:`scanmt.metrics.paired.format_p`: its n/a text over too few sentences)."""
    if baselines.get(name) == name:
        return "baseline"
    if not tests.get(name):
        return "n/a"
    return " / ".join(f"{t.delta:+.2f} ({format_p(t.p, significant_below=0.05)})" for t in tests[name])


def _code(text: str) -> str:
    """``text`` as a Markdown code span (split and corpus names: no escaping needed inside)."""
    return "`" + text.replace("`", "'") + "`"


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


def _labels(systems: Sequence[SystemResults]) -> dict[str, str]:
    """System name -> its escaped label."""
    return {s.name: md_escape(s.label) for s in systems}


def _uniform_label(systems: Sequence[SystemResults], baselines: Baselines) -> str | None:
    """The escaped label of the one baseline every system is compared with, else None."""
    one = single_baseline(baselines)
    return None if one is None else _labels(systems).get(one, md_escape(one))


def _comparison_cells(name: str, systems: Sequence[SystemResults], baselines: Baselines,
                      tests: dict[str, list[SeedTest]]) -> list[str]:
    """A row's Δ BLEU (p) cell, and its *compared with* cell when the systems' baselines differ."""
    cells = [_p_cell(name, baselines, tests)]
    if single_baseline(baselines) is None:
        base = baselines.get(name, name)
        cells.append("" if base == name else _labels(systems).get(base, md_escape(base)))
    return cells


def _missing_baselines(systems: Sequence[SystemResults], baselines: Baselines) -> list[str]:
    """Escaped labels of the baselines some system is compared with that have no finished run."""
    runs = {s.name: bool(s.runs) for s in systems}
    labels = _labels(systems)
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
    L = [f"## Results on {_code(title)}", "",
         f"The same runs on the extra test split {_code(split)} ({_code(title)}{size}), translated and scored like "
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
    meta = read_meta_lenient(out / "shared" / "data")
    L: list[str] = []
    for split in extra_splits({s.name: s.runs for s in systems}, rec["split"]):
        L += split_section(out, rec, systems, baselines, opts, split, split_display_name(meta, split))
    return L


def figure_systems(rec: dict[str, Any], systems: Sequence[SystemResults], baseline: str) -> tuple[str, str] | None:
    names = [s.name for s in systems]
    fig = rec.get("figure") or []
    if len(fig) == 2:
        return fig[0], fig[1]
    transforms = rec.get("transforms", {})
    other = next((n for n in names if n != baseline and transforms.get(n) == "csparsemax"), None)
    other = other or next((n for n in names if n != baseline), None)
    return (baseline, other) if other else None


@dataclass
class _Page:
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

    @property
    def base(self) -> SystemResults:
        return next(s for s in self.systems if s.name == self.baseline)


def _machines(systems: list[SystemResults]) -> list[str]:
    """The machines the runs trained and decoded on (``metrics.json`` ``machines``), by run, when recorded."""
    by_machine: dict[str, list[str]] = {}
    for s in systems:
        for r in s.runs:
            for m in r.get("machines") or []:
                by_machine.setdefault(m, []).append(f"{s.name}/seed{r['seed']}")
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


def _header(p: _Page) -> list[str]:
    rec, systems = p.rec, p.systems
    n_done = sum(len(s.runs) for s in systems)
    commits = sorted({c for s in systems for r in s.runs for c in (r.get("commits") or [r["commit"]])})
    title = rec.get("title") or f"Experiments: grid {rec['name']}"
    L = [f"# {title}", ""]
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


def _main_table(p: _Page) -> list[str]:
    """The Table 1/2 analogue on the main test split, with its notes."""
    systems, baselines, opts = p.systems, p.baselines, p.opts
    pvals = significance(p.out, p.rec, p.texts, systems, baselines, opts.samples)
    best = best_means(systems)
    main_name = split_display_name(read_meta_lenient(p.out / "shared" / "data"), p.rec["split"])
    uniform = _uniform_label(systems, baselines)
    against = uniform or ("its baseline (the *compared with* column; the grid's baseline, "
                          f"{md_escape(p.base.label)}, for the rest)")
    L = [f"## Results on {_code(main_name)}", ""]
    L += _table_head("system", uniform, ["commit", "command"])
    for s in systems:
        cells = [md_escape(s.label), *_metric_cells(s, systems, best)]
        cells += _comparison_cells(s.name, systems, baselines, pvals)
        cells.append(str(len(s.runs)) + (f" (+{len(s.unfinished)} unfinished)" if s.unfinished else ""))
        cs = sorted({c for r in s.runs for c in (r.get("commits") or [r["commit"]])})
        cells.append(", ".join(f"`{c[:10]}{'+dirty' if c.endswith('+dirty') else ''}`" for c in cs) or "–")
        cells.append(f"[commands](#{_anchor(s.name)})" if s.runs else "–")
        L.append("| " + " | ".join(cells) + " |")
    sig = next((r.get("bleu_signature") for s in systems for r in s.runs), "")
    L += [
        "",
        f"BLEU: tokenized (Moses), lowercased, as the paper's multi-bleu -lc (sacrebleu `{sig}`); sacreBLEU: "
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
        "`scanmt.experiments.results_json`).",
        "",
    ]
    missing = _missing_baselines(systems, baselines)
    if missing:
        L += [f"No p-values against {', '.join(missing)}: no finished run.", ""]
    return L + _empty_outputs_note(p)


def empty_outputs(src: Sequence[str], hyp: Sequence[str]) -> int:
    """The number of non-empty source lines whose translation is empty."""
    return sum(1 for s, h in zip(src, hyp) if s.strip() and not h.strip())


def _empty_outputs_note(p: _Page) -> list[str]:
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
    if not counts or counts == [1]:
        return "one alignment per run; the aligner samples at random, which moves DROP by about 0.1"
    said = f"{counts[0]} to {counts[-1]}" if len(counts) > 1 else f"{counts[0]}"
    return f"each run's DROP is the mean over {said} alignments of each side (`--drop-samples`)"


def _drop_noise(p: _Page) -> list[str]:
    """DROP's spread split between the aligner and the model, on the main and each extra test split
    (:mod:`scanmt.experiments.drop_noise`)."""
    meta = read_meta_lenient(p.out / "shared" / "data")
    splits = [(p.rec["split"], p.systems)]
    splits += [(split, [s.on_split(split) for s in p.systems]) for split in extra_splits(
        {s.name: s.runs for s in p.systems}, p.rec["split"])]
    tables = [(_code(split_display_name(meta, split)), drop_noise({s.name: s.runs for s in views}, p.baselines))
              for split, views in splits]
    sampled = has_aligner_samples([s.runs for _, views in splits for s in views])
    return drop_noise_section(tables, _labels(p.systems), sampled)


def system_outputs(rec: dict[str, Any], systems: Sequence[SystemResults]) -> dict[str, str]:
    """Each system's ``model.output``: the grid record's ``outputs``, else its runs' ``metrics.json`` ``output``,
    else softmax (records and runs from before either was written)."""
    known = rec.get("outputs") or {}
    return {s.name: known.get(s.name) or next((r["output"] for r in s.runs if r.get("output")), "softmax")
            for s in systems}


def _output_layer(p: _Page) -> list[str]:
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
        L.append(f"| {md_escape(s.label)} | {_code(outputs[s.name])} | " + " | ".join(cells) + f" | {seeds} |")
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


def _details(p: _Page) -> list[str]:
    """Attention statistics and per-run details."""
    L = ["## Attention statistics", "",
         "| system | exact zeros (%) | attended source tokens / step | never-attended source tokens (%) |",
         "|---|---:|---:|---:|"]
    for s in p.systems:
        z = [100 * r["attention"]["zero_fraction"] for r in s.runs if r.get("attention")]
        a = [r["attention"]["mean_attended"] for r in s.runs if r.get("attention")]
        u = [100 * r["attention"]["unattended_share"] for r in s.runs if r.get("attention")]
        L.append(f"| {md_escape(s.label)} | {fmt(z)} | {fmt(a)} | {fmt(u)} |")
    L += ["", "Means over seeds, test set, subword attention including the <sink> column of constrained models.", ""]
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


def _run_dir(p: _Page, s: SystemResults, r: dict[str, Any]) -> Path:
    """The folder whose training log belongs to a run (the trained model's, for a run that reused one)."""
    return Path(r["model_from"]) if r.get("model_from") else p.out / "runs" / s.name / f"seed{r['seed']}"


def _pct(values: Sequence[float]) -> str:
    return f"{100 * max(values):.2f}" if values else "–"


def _training_health(p: _Page) -> list[str]:
    """Attention health during training, from each run's ``metrics.csv`` (:mod:`scanmt.experiments.run_health`)."""
    per_system: list[tuple[SystemResults, list[RunHealth]]] = []
    for s in p.systems:
        hs: list[RunHealth] = []
        for r in s.runs:
            t = r.get("train") or {}
            h = run_health(_run_dir(p, s, r) / "metrics.csv", t.get("steps"), t.get("epochs"))
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


def _figures(p: _Page) -> tuple[list[str], list[Path], list[int]]:
    """The Figure 2 analogue: ``(lines, PNG files, chosen sentence indices)``."""
    L = ["## Attention maps (Figure 2 analogue)", ""]
    pair = figure_systems(p.rec, p.systems, p.baseline)
    if p.opts.figures <= 0:
        return L + ["No figures requested (`--figures 0`).", ""], [], []
    if pair is None:
        return L + ["No figure: the grid needs two systems.", ""], [], []
    a_sys = next((s for s in p.systems if s.name == pair[0]), None)
    b_sys = next((s for s in p.systems if s.name == pair[1]), None)
    ha = hyp_lines(p.out, p.rec, pair[0], 1) if a_sys and a_sys.seed(1) else None
    hb = hyp_lines(p.out, p.rec, pair[1], 1) if b_sys and b_sys.seed(1) else None
    if a_sys is None or b_sys is None or ha is None or hb is None:
        return L + [f"No figure: {pair[0]} and {pair[1]} need finished seed-1 runs.", ""], [], []
    lines, files, chosen = _figure_pair(p, (a_sys, ha), (b_sys, hb))
    return L + lines, files, chosen


def _figure_pair(p: _Page, a: tuple[SystemResults, list[str]], b: tuple[SystemResults, list[str]]
                 ) -> tuple[list[str], list[Path], list[int]]:
    """Attention maps of two systems' seed-1 runs for the sentences :func:`choose_sentences` picks."""
    from scanmt.data.attention_file import AttentionFile

    (a_sys, ha), (b_sys, hb) = a, b
    texts, opts, split = p.texts, p.opts, p.rec["split"]
    ta, tb = _tokenize_all(ha, texts.tgt_lang), _tokenize_all(hb, texts.tgt_lang)
    fa = AttentionFile(p.out / "runs" / a_sys.name / "seed1" / f"{split}.attn.npz")
    fb = AttentionFile(p.out / "runs" / b_sys.name / "seed1" / f"{split}.attn.npz")
    src_tokens = [len(fa[i].src) for i in range(len(fa))]
    chosen = choose_sentences(ta, tb, texts, opts.figures, max_src_words=opts.max_figure_words,
                              src_tokens=src_tokens, max_src_tokens=opts.max_figure_tokens)
    if not chosen:
        return [f"No figure: {md_escape(a_sys.label)} repeats no word (REP sentence score 0) in the test "
                f"sentences of at most {opts.max_figure_words} words and {opts.max_figure_tokens} subwords.", ""], [], []
    L = [f"Test sentences where {md_escape(a_sys.label)} repeats words (REP sentence score σ > 0, those "
         f"{md_escape(b_sys.label)} repeats least first), chosen automatically from the seed-1 outputs "
         f"among sources of at most {opts.max_figure_tokens} subwords. Source subwords on the x axis, "
         "output subwords on the y axis, white is exactly zero.", ""]
    ra, rb = repetition_scores(ta, texts.ref_tok), repetition_scores(tb, texts.ref_tok)
    files = []
    for i in chosen:
        png = p.docs / p.stem / f"attention-{i + 1}.png"
        size = draw_figure(png, [(a_sys.label, fa[i]), (b_sys.label, fb[i])], f"{split} sentence {i + 1}")
        files.append(png)
        L += [
            f"**Sentence {i + 1}** (σ {a_sys.label} = {ra[i]:g}, σ {b_sys.label} = {rb[i]:g}; {size // 1024} KB)",
            "",
            f"![attention maps, sentence {i + 1}]({p.stem}/{png.name})",
            "",
            "| | |", "|---|---|",
            f"| source | {md_escape(texts.src[i])} |",
            f"| reference | {md_escape(texts.ref[i])} |",
            f"| {md_escape(a_sys.label)} | {md_escape(ha[i])} |",
            f"| {md_escape(b_sys.label)} | {md_escape(hb[i])} |",
            "",
        ]
    return L, files, chosen


def _examples(p: _Page, chosen: Sequence[int]) -> list[str]:
    """The Appendix B analogue: the figures' sentences, then those the baseline repeats words in, then short ones."""
    texts, opts = p.texts, p.opts
    L = ["## Translation examples (Appendix B analogue)", ""]
    outputs = {s.name: hyp_lines(p.out, p.rec, s.name, 1) for s in p.systems if s.seed(1) is not None}
    if not outputs or opts.examples <= 0:
        return L + ["No examples: no system has a finished seed-1 run.", ""]
    base_out = outputs.get(p.baseline)
    picks = list(chosen)
    if base_out is not None:
        more = choose_sentences(_tokenize_all(base_out, texts.tgt_lang), None, texts, len(texts.ref),
                                max_src_words=opts.max_figure_words)
        picks += [i for i in more if i not in picks]
    picks += [i for i in range(len(texts.ref)) if i not in picks and len(texts.src[i].split()) <= opts.max_figure_words]
    L += ["Seed-1 outputs; sentences where the baseline repeats words first, then the first short test sentences.", ""]
    for i in picks[: opts.examples]:
        L += [f"**Sentence {i + 1}**", "", "| | |", "|---|---|",
              f"| source | {md_escape(texts.src[i])} |", f"| reference | {md_escape(texts.ref[i])} |"]
        for s in p.systems:
            if s.name in outputs and outputs[s.name] is not None:
                L.append(f"| {md_escape(s.label)} | {md_escape(outputs[s.name][i])} |")
        L.append("")
    return L


def _commands(p: _Page) -> list[str]:
    """Each system's commands, then the runs that are missing or unfinished."""
    L = ["## Commands", "",
         "The exact commands of each system's first finished seed (`command.txt` in its run directory): the grid "
         "command, then one `scanmt` line per step; other seeds differ only in `train.seed` and paths.", ""]
    for s in p.systems:
        if not s.runs:
            continue
        L += [f'<a id="{_anchor(s.name)}"></a>', "", f"### {md_escape(s.label)}", "", "```", s.commands.strip(), "```", ""]
    missing = [(s, u) for s in p.systems for u in s.unfinished]
    L += ["## Missing or unfinished runs", ""]
    if missing:
        L += [f"- {md_escape(s.label)}: {u}" for s, u in missing]
        L += ["", "Rerun the grid command to finish them (finished runs are skipped, interrupted ones resume).", ""]
    else:
        L += ["None: every requested run finished.", ""]
    return L


def render(out: Path, rec: dict[str, Any], docs: Path, stem: str, opts: ReportOptions,
           systems: list[SystemResults] | None = None) -> tuple[str, list[Path]]:
    """The Markdown text and the figure files written for one grid record (``systems``: :func:`collect`'s)."""
    systems = collect(out, rec) if systems is None else systems
    names = [s.name for s in systems]
    baselines = resolve_baselines(rec, names, opts.baseline)
    p = _Page(out, rec, docs, stem, opts, systems, grid_baseline(rec, names, opts.baseline), baselines,
              load_texts(out, rec))
    L = _header(p) + _main_table(p) + extra_split_sections(out, rec, systems, baselines, opts) + _drop_noise(p)
    L += _output_layer(p)
    stress_png = docs / stem / STRESS_FIGURE
    drawn = draw_stress_figure(systems, stress_png)
    L += stress_section(systems, baselines, f"{stem}/{STRESS_FIGURE}" if drawn else None)
    reference = resolve_reference_arm(rec, names, opts.reference_arm)
    contrast_png = docs / stem / CONTRAST_FIGURE
    contrast_drawn = draw_contrast_figure(systems, baselines, reference, contrast_png)
    L += contrast_section(systems, baselines, reference, f"{stem}/{CONTRAST_FIGURE}" if contrast_drawn else None)
    L += _details(p)
    fig_lines, files, chosen = _figures(p)
    L += fig_lines + _examples(p, chosen) + _commands(p)
    return "\n".join(L), ([stress_png] if drawn else []) + ([contrast_png] if contrast_drawn else []) + files


def write_reports(out: Path, docs: Path, *, grid: str | None = None, name: str | None = None,
                  opts: ReportOptions | None = None) -> list[Path]:
    """Write one Markdown report and its JSON per recorded grid (or only ``grid``); returns the files written.

    ``name`` (the files' stem, default ``experiments-GRID``) is a name as a grid's
    (:data:`~scanmt.experiments.grid.NAME_RE`), so that the report and its figure folder stay in ``docs``:
    ``../x`` or ``/abs`` is refused before anything is read.
    """
    if name is not None:
        check_name(name, "--name")
    opts = opts or ReportOptions()
    recs = grid_records(out)
    if grid is not None:
        recs = [r for r in recs if r["name"] == grid]
        if not recs:
            known = ", ".join(r["name"] for r in grid_records(out))
            raise ConfigError(f"--grid {grid}: not recorded in {out} (recorded: {known})")
    if name is not None and len(recs) > 1:
        raise ConfigError(f"--name needs a single grid, but {out} holds {len(recs)}: add --grid NAME")
    stems = [name or f"experiments-{rec['name']}" for rec in recs]
    for stem in stems:  # every report's files, before any report is computed
        check_report_files(docs, stem)
    written = []
    for rec, stem in zip(recs, stems):
        systems = collect(out, rec)
        table = results_table({s.name: s.runs for s in systems}, rec["split"],
                              read_meta_lenient(out / "shared" / "data"),
                              resolve_baselines(rec, [s.name for s in systems], opts.baseline))
        text, files = render(out, rec, docs, stem, opts, systems)
        md = docs / f"{stem}.md"
        stale = stale_figures(md, files)
        with atomic_open(md) as fh:
            fh.write(text)
        for f in stale:
            f.unlink()
            log.info("removed %s: a figure of the previous report that this one no longer shows", f)
        written += [md, write_results_json(docs / f"{stem}.json", table), *files]
    return written


def check_report_files(docs: Path, stem: str) -> None:
    """Refuse a report that could not be written, before it is computed: ``--out`` (``docs``) a file, below one,
    or in a folder this user cannot write; a file where the report's figure folder ``docs/stem`` goes."""
    for f in (docs / f"{stem}.md", docs / f"{stem}.json"):
        check_output_file(f, "--out")
    if (docs / stem).exists() and not (docs / stem).is_dir():
        raise ConfigError(f"{docs / stem}: is a file, but the report puts its figures in a folder of that "
                          "name; move the file away or give another --name")


def stale_figures(md: Path, keep: Sequence[Path]) -> list[Path]:
    """Figures the previous report ``md`` linked in its own folder (``STEM/attention-N.png``) that are not in
    ``keep``.  Only files a report wrote and linked qualify, so nothing a user put there is ever touched."""
    try:
        old = md.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return []
    kept = {f.resolve() for f in keep}
    stem = md.name[: -len(".md")]
    found = {md.parent / stem / name for folder, name in FIGURE_LINK.findall(old) if folder == stem}
    return sorted(f for f in found if f.is_file() and f.resolve() not in kept)


def summary_rows(out: Path, rec: dict[str, Any], split: str | None = None) -> list[list[str]]:
    """Rows for a plain-text summary (system, seeds, BLEU, METEOR, REP, DROP) of the main or an extra split."""
    rows = []
    for s in collect(out, rec):
        s = s.on_split(split) if split is not None and split != rec["split"] else s
        rows.append([s.label, str(len(s.runs)), *[fmt(s.values(k)) for k in ("bleu", "meteor", "rep", "drop")]])
    return rows


def format_rows(head: list[str], rows: list[list[str]], left_columns: int = 1) -> str:
    """A plain-text table: the first ``left_columns`` columns aligned left, the others (numbers) right."""
    widths = [max(len(head[k]), *(len(r[k]) for r in rows)) if rows else len(head[k]) for k in range(len(head))]
    line = lambda cells: "  ".join(  # noqa: E731
        (c.ljust(w) if k < left_columns else c.rjust(w)) for k, (c, w) in enumerate(zip(cells, widths))).rstrip()
    return "\n".join([line(head), line(["-" * w for w in widths]), *[line(r) for r in rows]])

