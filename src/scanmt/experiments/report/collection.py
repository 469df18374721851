"""What the report reads from an experiment folder: the grid records (``OUT/grids/*.json``), each system's finished
runs (their ``metrics.json``) and unfinished ones (where they stopped: :func:`scanmt.experiments.state.run_state`),
the test set's text, and the runs' translations.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from scanmt.errors import DataError
from scanmt.experiments.archive.shared_work import folder_trained_on, read_origin
from scanmt.experiments.figure_window import source_word_counts
from scanmt.experiments.layout import (COMMAND, LOG, SharedPaths, grid_record_paths, grids_dir, hyp_name,
                                       raw_name, run_dir, seed_dirs, seed_name, seed_of, system_dir)
from scanmt.experiments.progress import logged_updates
from scanmt.experiments.report.markdown import md_escape
from scanmt.experiments.state import run_state
from scanmt.io import LOCK_FILE, read_lines
from scanmt.processes import lock_held


def grid_records(out: Path) -> list[dict[str, Any]]:
    """The grids recorded in ``OUT/grids/*.json`` by ``scanmt experiment run``."""
    d = grids_dir(out)
    if not out.is_dir():
        raise DataError(f"{out}: experiment directory not found")
    recs = []
    for p in grid_record_paths(out):
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
    unfinished: list[str] = field(default_factory=list)  # "seedK (training)", ...
    commands: str = ""
    #: finished seeds restored from an archive of runs only, with the shared work they trained on (a run's
    #: :data:`~scanmt.experiments.layout.SHARED_ORIGIN`)
    restored: dict[int, dict[str, Any]] = field(default_factory=dict)

    def seed(self, k: int) -> dict[str, Any] | None:
        return next((r for r in self.runs if r["seed"] == k), None)

    def values(self, key: str) -> list[float]:
        return [float(r[key]) for r in self.runs if r.get(key) is not None]

    def on_split(self, split: str) -> "SystemResults":
        """The same system on an extra test split: the finished seeds that scored it (``test_sets``)."""
        runs = [{"seed": r["seed"], **r["test_sets"][split]} for r in self.runs if split in (r.get("test_sets") or {})]
        return SystemResults(self.name, self.label, runs, self.unfinished, self.commands)


def last_log_line(run: Path, width: int = 200) -> str:
    """The last line of ``RUN/log.txt`` with text (at most its last ``width`` characters; a progress bar's
    carriage returns end a line; "": no log)."""
    try:
        text = (run / LOG).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    lines = [ln.strip() for ln in text.replace("\r", "\n").splitlines() if ln.strip() and not ln.startswith("#####")]
    return lines[-1][-width:] if lines else ""


def stopped_where(run: Path) -> str:
    """Where an unfinished run stands: still running (a process holds its folder's lock, as ``experiment status``
    sees it: training with the update it has logged, or a later step), else where it stopped
    (:meth:`scanmt.experiments.state.RunState.stopped_where`) with the last line of its log (often the error)."""
    state = run_state(run)
    if lock_held(run / LOCK_FILE):
        if state.last_stage is None:
            return f"training when this report was written: update {logged_updates(run):,} logged"
        return f"running when this report was written, after {state.last_stage}"
    where = state.stopped_where()
    if last := last_log_line(run):
        where += f"; last log line: {last}"
    return where


def collect(out: Path, rec: dict[str, Any]) -> list[SystemResults]:
    seeds = list(rec.get("seeds") or [])
    res = []
    requested = set(rec.get("requested") or (s["name"] for s in rec["systems"]))
    for s in rec["systems"]:
        if s["name"] not in requested and not system_dir(out, s["name"]).is_dir():
            continue  # left out with --systems: neither a result nor a missing run
        sr = SystemResults(s["name"], s.get("label") or s["name"])
        base = system_dir(out, s["name"])
        found = set()
        for d in seed_dirs(base):
            k = seed_of(d)
            if k is None:
                continue
            found.add(k)
            state = run_state(d)
            if state.finished:
                sr.runs.append(state.metrics)
                if (origin := read_origin(d)) is not None:
                    sr.restored[k] = origin
            else:
                sr.unfinished.append(f"{seed_name(k)} ({md_escape(stopped_where(d))})")
        for k in seeds:
            if k not in found:
                sr.unfinished.append(f"{seed_name(k)} (not started)")
        first = min((r["seed"] for r in sr.runs), default=None)
        if first is not None and (run_dir(out, s["name"], first) / COMMAND).exists():
            sr.commands = (run_dir(out, s["name"], first) / COMMAND).read_text(encoding="utf-8")
        res.append(sr)
    return res


def tokenize_all(lines: Sequence[str], lang: str) -> list[str]:
    from scanmt.data.tokenize import tokenize

    return [tokenize(x, lang) if x.strip() else "" for x in lines]


@dataclass
class Texts:
    """Test-set text shared by all systems: the raw source and reference, the tokenized reference, and each
    source sentence's number of words by the source language's tokenizer (MeCab for Japanese, whose raw text
    has no spaces to count)."""

    src: list[str]
    ref: list[str]
    ref_tok: list[str]
    tgt_lang: str
    src_words: list[int]


def load_texts(out: Path, rec: dict[str, Any]) -> Texts:
    """The source and reference of ``rec['split']`` (raises :class:`DataError` when missing)."""
    data = SharedPaths(out).data
    split, s, t = rec["split"], rec["src_lang"], rec["tgt_lang"]
    src = read_lines(data / raw_name(split, s), what="source file")
    ref = read_lines(data / raw_name(split, t), what="reference file")
    return Texts(src, ref, tokenize_all(ref, t), t, source_word_counts(src, s))


def hyp_lines(out: Path, rec: dict[str, Any], system: str, seed: int) -> list[str] | None:
    p = run_dir(out, system, seed) / hyp_name(rec["split"], rec["tgt_lang"])
    return read_lines(p, allow_empty=True, what="hypothesis file") if p.exists() else None


def run_dir_of(out: Path, system: str, r: dict[str, Any]) -> Path:
    """The folder whose training log belongs to a finished run ``r`` (its ``metrics.json``) of ``system``: the
    trained model's, for a run that reused one."""
    return Path(r["model_from"]) if r.get("model_from") else run_dir(out, system, r["seed"])


def system_outputs(rec: dict[str, Any], systems: Sequence[SystemResults]) -> dict[str, str]:
    """Each system's ``model.output``: the grid record's ``outputs``, else its runs' ``metrics.json`` ``output``,
    else softmax (records and runs from before either was written)."""
    known = rec.get("outputs") or {}
    return {s.name: known.get(s.name) or next((r["output"] for r in s.runs if r.get("output")), "softmax")
            for s in systems}


#: a finished seed restored from an archive of runs only: its system, seed, the shared work it trained on (its
#: :data:`~scanmt.experiments.layout.SHARED_ORIGIN`) and whether that is the folder's (alignments and predictor alike)
RestoredRun = tuple[SystemResults, int, dict[str, Any], bool]
#: the folder's own shared work (None: no seed was restored, nothing hashed) and its restored seeds
Restored = tuple[dict[str, str | None] | None, list[RestoredRun]]


def restored_runs(out: Path, systems: Sequence[SystemResults]) -> Restored:
    """The folder ``out``'s own shared work (:func:`~scanmt.experiments.archive.shared_work.folder_trained_on`) and
    its restored seeds, in grid and seed order; ``(None, [])`` when none was restored (nothing is hashed then)."""
    restored = [(s, k, o) for s in systems for k, o in sorted(s.restored.items())]
    if not restored:
        return None, []
    here = folder_trained_on(SharedPaths(out).root)
    return here, [(s, k, o, (o.get("alignments"), o.get("predictor")) == (here["alignments"], here["predictor"]))
                  for s, k, o in restored]
