"""Writing a grid's report: the page rendered section by section (:func:`render`), its Markdown, JSON and figures
written (:func:`write_reports`), alone or with other grids' in one report (:mod:`scanmt.experiments.report.combined`).
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any, Sequence

from scanmt.errors import ConfigError
from scanmt.experiments.baselines import grid_baseline, resolve_baselines, resolve_reference_arm
from scanmt.experiments.grid import check_name
from scanmt.experiments.layout import (SharedPaths, report_figure, report_figure_dir, report_json, report_markdown,
                                      report_stem)
from scanmt.experiments.report.collection import (Restored, RestoredRun, SystemResults, collect, grid_records,
                                                   hyp_lines, load_texts, restored_runs, tokenize_all)
from scanmt.experiments.report.combined import check_combinable, combined_page
from scanmt.experiments.report.curves import FIGURE as CURVES_FIGURE
from scanmt.experiments.report.curves import curves_section, draw_curves_figure, learning_curves
from scanmt.experiments.report.drop_noise import drop_noise, drop_noise_section, has_aligner_samples
from scanmt.experiments.report.figures import examples, figures
from scanmt.experiments.report.lengths import has_length_counts, length_section, source_words
from scanmt.experiments.report.markdown import anchor, code_span, md_escape
from scanmt.experiments.report.page import Page, ReportOptions
from scanmt.experiments.report.results_json import (extra_splits, read_meta_lenient, results_table,
                                                    merge_tables, split_display_name, write_results_json)
from scanmt.experiments.report.stress import CONTRAST_FIGURE
from scanmt.experiments.report.stress import FIGURE as STRESS_FIGURE
from scanmt.experiments.report.stress import (contrast_section, draw_contrast_figure, draw_stress_figure,
                                              stress_section)
from scanmt.experiments.report.tables import (details, extra_split_sections, header, main_table, output_layer,
                                              system_labels)
from scanmt.io import atomic_open, check_output_file

log = logging.getLogger("scanmt.experiment")


#: a figure link as the report writes it: ``](STEM/attention-N.png)``, ``](STEM/stress.png)``; in a report of several
#: grids, with the grid's name in front: ``](STEM/GRID-stress.png)``
FIGURE_LINK = re.compile(r"\]\(([^()/]+)/((?:[A-Za-z0-9][A-Za-z0-9_.-]*-)?"
                         r"(?:attention-\d+\.png|stress\.png|stress-contrast\.png|curves\.png))\)")


def _drop_noise(p: Page) -> list[str]:
    """DROP's spread split between the aligner and the model, on the main and each extra test split
    (:mod:`scanmt.experiments.report.drop_noise`)."""
    meta = read_meta_lenient(SharedPaths(p.out).data)
    splits = [(p.rec["split"], p.systems)]
    splits += [(split, [s.on_split(split) for s in p.systems]) for split in extra_splits(
        {s.name: s.runs for s in p.systems}, p.rec["split"])]
    tables = [(code_span(split_display_name(meta, split)), drop_noise({s.name: s.runs for s in views}, p.baselines))
              for split, views in splits]
    sampled = has_aligner_samples([s.runs for _, views in splits for s in views])
    return drop_noise_section(tables, system_labels(p.systems), sampled)


def _by_length(p: Page) -> list[str]:
    """BLEU, REP and DROP by source length (:mod:`scanmt.experiments.report.lengths`); [] when no run has a stress
    test at K = 1."""
    if not has_length_counts(p.systems):  # before tokenizing every run's translation
        return []
    sentences = len(p.texts.ref)
    words = source_words(p.systems, sentences) or p.texts.src_words
    hyps: dict[str, dict[int, list[str]]] = {}
    for s in p.systems:
        for r in s.runs:
            lines = hyp_lines(p.out, p.rec, s.name, r["seed"])
            if lines is not None and len(lines) == sentences:
                hyps.setdefault(s.name, {})[r["seed"]] = tokenize_all(lines, p.texts.tgt_lang)
    trained = (read_meta_lenient(SharedPaths(p.out).data) or {}).get("max_train_words")
    trained = trained if isinstance(trained, int) and not isinstance(trained, bool) and trained > 0 else None
    return length_section(p.systems, p.baselines, p.baseline, words, hyps, p.texts.ref_tok, trained)


def _commands(p: Page) -> list[str]:
    """Each system's commands, then the runs that are missing or unfinished."""
    L = ["## Commands", "",
         "The exact commands of each system's first finished seed (`command.txt` in its run directory): the grid "
         "command, then one `scanmt` line per step; other seeds differ only in `train.seed` and paths.", ""]
    for s in p.systems:
        if not s.runs:
            continue
        L += [f'<a id="{anchor(s.name)}"></a>', "", f"### {md_escape(s.label)}", "", "```", s.commands.strip(), "```", ""]
    missing = [(s, u) for s in p.systems for u in s.unfinished]
    L += ["## Missing or unfinished runs", ""]
    if missing:
        L += [f"- {md_escape(s.label)}: {u}" for s, u in missing]
        L += ["", "Rerun the grid command to finish them (finished runs are skipped, interrupted ones resume).", ""]
    else:
        L += ["None: every requested run finished.", ""]
    return L + _restored(p)


def restored_entries(runs: Sequence[RestoredRun]) -> dict[str, dict[str, dict[str, Any]]]:
    """The results JSON's ``restored`` entries: system -> seed (a string) -> ``{"alignments", "predictor",
    "same_as_folder"}``."""
    entries: dict[str, dict[str, dict[str, Any]]] = {}
    for s, k, o, same in runs:
        entries.setdefault(s.name, {})[str(k)] = {"alignments": o.get("alignments"), "predictor": o.get("predictor"),
                                                 "same_as_folder": same}
    return entries


def _restored(p: Page) -> list[str]:
    """The runs that trained on other shared work than the folder's (restored from an archive of runs only), with
    the alignments and fertility predictor each trained on; [] when none."""
    here, restored = p.restored
    if here is None:
        return []
    L = ["## Runs restored from an archive of runs only", "",
         "These runs were trained on another machine and restored without their shared work (`scanmt experiment "
         "archive --runs-only`): each trained with the alignments and fertility predictor below, and its DROP was "
         "scored by that machine's aligner (eflomal cannot be seeded). Their scores are those they had there. "
         f"This folder's shared work: alignments `{_short(here['alignments'])}`, predictor "
         f"`{_short(here['predictor'])}`.", "",
         "| system | seed | alignments | predictor | the same as this folder's |", "| --- | --- | --- | --- | --- |"]
    for s, k, o, same in restored:
        L.append(f"| {md_escape(s.label)} | {k} | `{_short(o.get('alignments'))}` | `{_short(o.get('predictor'))}` "
                 f"| {'yes' if same else 'no'} |")
    return L + [""]


def _short(digest: str | None) -> str:
    return digest[:12] if digest else "none"


def render(out: Path, rec: dict[str, Any], docs: Path, stem: str, opts: ReportOptions,
           systems: list[SystemResults] | None = None, figure_grid: str | None = None,
           restored: Restored | None = None) -> tuple[str, list[Path]]:
    """The Markdown text and the figure files written for one grid record (``systems``: :func:`collect`'s;
    ``figure_grid``: the grid's name in front of its figures' file names, in a report of several grids;
    ``restored``: :func:`~scanmt.experiments.report.collection.restored_runs` of ``systems``, found when None)."""
    systems = collect(out, rec) if systems is None else systems
    restored = restored_runs(out, systems) if restored is None else restored
    names = [s.name for s in systems]
    baselines = resolve_baselines(rec, names, opts.baseline)
    p = Page(out, rec, docs, stem, opts, systems, grid_baseline(rec, names, opts.baseline), baselines,
              load_texts(out, rec), figure_grid, restored)
    L = header(p) + main_table(p) + extra_split_sections(out, rec, systems, baselines, opts) + _drop_noise(p)
    L += output_layer(p)
    stress_png = report_figure(docs, stem, STRESS_FIGURE, figure_grid)
    drawn = draw_stress_figure(systems, stress_png)
    L += stress_section(systems, baselines, f"{stem}/{stress_png.name}" if drawn else None)
    reference = resolve_reference_arm(rec, names, opts.reference_arm)
    contrast_png = report_figure(docs, stem, CONTRAST_FIGURE, figure_grid)
    contrast_drawn = draw_contrast_figure(systems, baselines, reference, contrast_png)
    L += contrast_section(systems, baselines, reference, f"{stem}/{contrast_png.name}" if contrast_drawn else None)
    L += _by_length(p)
    L += details(p)
    curves_png = report_figure(docs, stem, CURVES_FIGURE, figure_grid)
    run_curves = learning_curves(out, systems)
    curves_drawn = draw_curves_figure(run_curves, curves_png)
    L += curves_section(run_curves, f"{stem}/{curves_png.name}" if curves_drawn else None)
    fig_lines, files, chosen = figures(p)
    L += fig_lines + examples(p, chosen) + _commands(p)
    drawn_files = [f for f, ok in ((stress_png, drawn), (contrast_png, contrast_drawn), (curves_png, curves_drawn)) if ok]
    return "\n".join(L), drawn_files + files


def write_reports(out: Path, docs: Path, *, grids: Sequence[str] | None = None, name: str | None = None,
                  opts: ReportOptions | None = None) -> list[Path]:
    """Write one Markdown report and its JSON per recorded grid (or per grid of ``grids``); with ``name`` and
    several ``grids``, one report of them all (:mod:`scanmt.experiments.report.combined`).  Returns the files
    written.

    ``name`` (the files' stem, default ``experiments-GRID``) is a name as a grid's
    (:data:`~scanmt.experiments.grid.NAME_RE`), so that the report and its figure folder stay in ``docs``:
    ``../x`` or ``/abs`` is refused before anything is read.  Every report's files are checked, and grids that
    cannot share a report refused, before any report is computed.
    """
    if name is not None:
        check_name(name, "--name")
    opts = opts or ReportOptions()
    recs = _chosen_records(out, grids)
    if name is not None and len(recs) > 1 and not grids:
        raise ConfigError(f"--name needs a single grid, but {out} holds {len(recs)}: add --grid NAME")
    if name is not None and len(recs) > 1:
        check_combinable(out, recs)
        reports = [(name, recs)]
    else:
        reports = [(name or f"experiments-{rec['name']}", [rec]) for rec in recs]
    for stem, _ in reports:  # every report's files, before any report is computed
        check_report_files(docs, stem)
    written = []
    for stem, group in reports:
        written += _write_report(out, docs, stem, group, opts)
    return written


def _chosen_records(out: Path, grids: Sequence[str] | None) -> list[dict[str, Any]]:
    """The records of ``grids`` (each once, in that order), else of every grid recorded in ``out``; an unknown
    grid is refused, naming the recorded ones."""
    recs = grid_records(out)
    if not grids:
        return recs
    by_name = {r["name"]: r for r in recs}
    for grid in grids:
        if grid not in by_name:
            raise ConfigError(f"--grid {grid}: not recorded in {out} (recorded: {', '.join(by_name)})")
    return [by_name[grid] for grid in dict.fromkeys(grids)]


def _write_report(out: Path, docs: Path, stem: str, recs: Sequence[dict[str, Any]], opts: ReportOptions
                  ) -> list[Path]:
    """Write the report ``DOCS/STEM`` of the grids ``recs`` (one, or several in one report); returns its files."""
    several = len(recs) > 1
    tables: dict[str, dict[str, Any]] = {}
    pages, files = [], []
    for rec in recs:
        systems = collect(out, rec)
        restored = restored_runs(out, systems)  # the folder's shared work hashed once, for the page and the JSON
        tables[rec["name"]] = results_table({s.name: s.runs for s in systems}, rec["split"],
                                            read_meta_lenient(SharedPaths(out).data),
                                            resolve_baselines(rec, [s.name for s in systems], opts.baseline),
                                            restored_entries(restored[1]))
        text, drawn = render(out, rec, docs, stem, opts, systems, rec["name"] if several else None, restored)
        pages.append(text)
        files += drawn
    text = combined_page(out, stem, opts.command, recs, pages) if several else pages[0]
    table = merge_tables(tables) if several else tables[recs[0]["name"]]
    md = report_markdown(docs, stem)
    stale = stale_figures(md, files)
    with atomic_open(md) as fh:
        fh.write(text)
    for f in stale:
        f.unlink()
        log.info("removed %s: a figure of the previous report that this one no longer shows", f)
    return [md, write_results_json(report_json(docs, stem), table), *files]


def check_report_files(docs: Path, stem: str) -> None:
    """Refuse a report that could not be written, before it is computed: ``--out`` (``docs``) a file, below one,
    or in a folder this user cannot write; a file where the report's figure folder ``docs/stem`` goes."""
    for f in (report_markdown(docs, stem), report_json(docs, stem)):
        check_output_file(f, "--out")
    figures_dir = report_figure_dir(docs, stem)
    if figures_dir.exists() and not figures_dir.is_dir():
        raise ConfigError(f"{figures_dir}: is a file, but the report puts its figures in a folder of that "
                          "name; move the file away or give another --name")


def stale_figures(md: Path, keep: Sequence[Path]) -> list[Path]:
    """Figures the previous report ``md`` linked in its own folder (``STEM/attention-N.png``) that are not in
    ``keep``.  Only files a report wrote and linked qualify, so nothing a user put there is ever touched."""
    try:
        old = md.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return []
    kept = {f.resolve() for f in keep}
    stem = report_stem(md)
    found = {report_figure_dir(md.parent, stem) / name for folder, name in FIGURE_LINK.findall(old) if folder == stem}
    return sorted(f for f in found if f.is_file() and f.resolve() not in kept)
