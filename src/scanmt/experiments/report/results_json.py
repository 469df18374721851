"""Machine-readable results of a grid: ``DOCS/experiments-{grid}.json`` beside the Markdown report.

Shape (one entry per system of the grid, in grid order, for the report's main test set)::

    {
      "softmax":    {"bleu": {"mean": 34.1, "std": 0.42}, "rep": {...}, "drop": {...}, "meteor": {...}, "seeds": 3},
      "csparsemax": {...},
      "test_set": "test_2016_flickr",
      "test_sets": {"test_2016_flickr": {"softmax": {...}, ...}, "test_2017_flickr": {"softmax": {...}, ...}}
    }

- The numbers are the per-seed values the Markdown table aggregates (each finished
  seed's ``metrics.json``): tokenized BLEU, REP, DROP and METEOR.
- ``mean`` is the arithmetic mean over the finished seeds.  ``std`` is the sample
  standard deviation (``ddof=1``) for two or more seeds and ``null`` for one seed
  (a single run has no spread to estimate, and ``0.0`` would claim one; the Markdown
  table shows no ``±`` then).
  A system without finished seeds has ``"seeds": 0`` and ``null`` means and stds.
- ``seeds`` counts the finished seeds of the system.
- ``search`` (only for a system with a finished seed that recorded its searches: ``metrics.json`` ``search``,
  from ``translate --search-stats``): ``{"output_support": {"mean", "std"}, "exact_share": {...},
  "forced": {...}, "seeds": n}``, the mean words of nonzero probability per output step, the share of
  sentences whose beam search was exact (0 to 1) and the outputs ended by a forced ``</s>``, over the ``n``
  seeds that recorded them (runs translated before the option existed did not).
- ``stress`` (only for a system with a finished seed that ran the stress test, ``experiment run
  --stress-k``; main test set only): ``{K: {metric: {"mean", "std", "seeds"}}}`` with K as a string and the
  metrics ``bleu`` (detokenized sacreBLEU), ``rep``, ``drop``, ``dropped_sentences`` (% of joined inputs) and
  ``length_ratio``; ``seeds`` counts the runs that measured the metric at that K
  (:func:`scanmt.experiments.report.stress.stress_summary`).
- ``drop_noise``: DROP's spread split between the aligner and the model, and its difference to the baseline
  (:class:`scanmt.experiments.report.drop_noise.DropNoise`): ``{"seeds", "samples" (the distinct K of the runs),
  "aligner_runs", "mean", "seed_sd", "aligner_sd", "aligner_se", "model_sd", "baseline", "delta",
  "delta_aligner_se", "delta_seed_se", "beyond_aligner", "beyond_seeds"}``; null where undefined (one seed:
  no ``seed_sd``, ``model_sd``, ``delta_seed_se``, ``beyond_seeds``; no run with K×K ``drop_scores``: no aligner
  numbers; the baseline: no ``delta``).
- ``restored`` (only for a system with a finished seed restored from an archive of runs only, ``experiment
  archive --runs-only``): ``{SEED: {"alignments", "predictor", "same_as_folder"}}`` with SEED as a string: the
  digests of the alignments and the fertility predictor (null: none) that seed trained on, and whether they are
  the report folder's own. A seed trained elsewhere took its fertility bounds from another predictor and its DROP
  from another aligner run; in every test set's entry of the system.
- Two extra top-level keys describe the test sets; no system may be named like them
  (:data:`RESERVED`):

  - ``test_set``: the name of the main test set, that of the top-level entries;
  - ``test_sets``: every test set, the main one first, each mapping the systems to the same
    entries.  Further test sets come from a run's ``metrics.json`` key
    ``"test_sets": {SPLIT: {"bleu": ..., "rep": ..., "drop": ..., "meteor": ...}}``, where
    SPLIT is a split of the prepared data (``test2017``).

A report of several grids of one folder (``experiment report --grid A B --name STEM``) merges their tables
(:func:`merge_tables`): every grid's systems at the top level, each entry as its grid's report gives it (its
``drop_noise`` against its own grid's baseline), in the order of ``--grid``; ``test_set`` (the same for every
grid); ``test_sets`` with each test set's systems of every grid that scored it (a test set only some grids have
holds only their systems); and one more reserved key:

  - ``grids``: ``{GRID: [its systems, in order]}``, for the grids in the order of ``--grid``.

Test-set names are the upstream corpus names when the prepared data's ``meta.json``
records them (``test`` of Multi30k is ``test_2016_flickr``, ``test2017`` is
``test_2017_flickr``), else the split names.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any, Mapping, Sequence

from scanmt.errors import ConfigError
from scanmt.experiments.layout import DATA_META
from scanmt.experiments.report.drop_noise import drop_noise
from scanmt.experiments.report.stress import stress_summary
from scanmt.io import atomic_open

#: metrics of every system entry, in this order
METRICS: tuple[str, ...] = ("bleu", "rep", "drop", "meteor")
#: the ``search`` entry's keys and the ``metrics.json`` ``search`` key each is read from
SEARCH_METRICS: tuple[tuple[str, str], ...] = (("output_support", "mean_support"), ("exact_share", "exact_share"),
                                               ("forced", "forced"))
#: the top-level key of a report of several grids that lists each grid's systems
GRIDS_KEY = "grids"
#: top-level keys that are not systems
RESERVED: tuple[str, ...] = ("test_set", "test_sets", GRIDS_KEY)

Runs = Sequence[Mapping[str, Any]]


def mean_std_entry(values: Sequence[float]) -> dict[str, float | None]:
    """``{"mean", "std"}`` of per-seed values: std with ddof=1 for n ≥ 2; None for n = 1 (no spread
    to estimate); both None for n = 0."""
    if not values:
        return {"mean": None, "std": None}
    std = statistics.stdev(values) if len(values) > 1 else None
    return {"mean": statistics.fmean(values), "std": std}


def system_entry(runs: Runs) -> dict[str, Any]:
    """One system's entry from the metric dicts of its finished seeds (missing or null values are skipped), with
    ``search`` when some seed recorded its searches and ``stress`` when some seed ran the stress test."""
    entry: dict[str, Any] = {}
    for key in METRICS:
        entry[key] = mean_std_entry([float(r[key]) for r in runs if r.get(key) is not None])
    entry["seeds"] = len(runs)
    searched = [r["search"] for r in runs if r.get("search")]
    if searched:
        entry["search"] = {name: mean_std_entry([float(s[key]) for s in searched if s.get(key) is not None])
                           for name, key in SEARCH_METRICS}
        entry["search"]["seeds"] = len(searched)
    stress = stress_summary(runs)
    if stress:
        entry["stress"] = {str(k): by_metric for k, by_metric in stress.items()}
    return entry


def split_entries(systems: Mapping[str, Runs], baseline: str | Mapping[str, str] | None) -> dict[str, dict[str, Any]]:
    """Per system, its :func:`system_entry` with ``drop_noise`` (compared with its baseline), for one test set."""
    noise = drop_noise(systems, baseline)
    return {name: {**system_entry(runs), "drop_noise": noise[name].to_json()} for name, runs in systems.items()}


def split_display_name(meta: Mapping[str, Any] | None, split: str) -> str:
    """The upstream name of a prepared split (``test`` -> ``test_2016_flickr``), else the split's name.

    Read from ``meta.json``'s ``sources[split]["src"]``: the file name without ``.gz`` and
    without the ``.{src_lang}`` suffix.
    """
    try:
        src = Path(str(meta["sources"][split]["src"])).name  # type: ignore[index]
        lang = str(meta["src_lang"])  # type: ignore[index]
    except (KeyError, TypeError):
        return split
    if src.endswith(".gz"):
        src = src[: -len(".gz")]
    if src.endswith(f".{lang}") and len(src) > len(lang) + 1:
        return src[: -len(lang) - 1]
    return split


def read_meta_lenient(data_dir: Path) -> dict[str, Any] | None:
    """``meta.json`` of the grid's prepared data, or None when it is missing or unreadable."""
    try:
        meta = json.loads((data_dir / DATA_META).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    return meta if isinstance(meta, dict) else None


def extra_splits(systems: Mapping[str, Runs], main_split: str) -> list[str]:
    """Further test splits named in the runs' ``metrics.json`` ``test_sets``, in order of first appearance."""
    seen: list[str] = []
    for runs in systems.values():
        for r in runs:
            for split in r.get("test_sets") or {}:
                if split != main_split and split not in seen:
                    seen.append(split)
    return seen


def results_table(systems: Mapping[str, Runs], main_split: str, meta: Mapping[str, Any] | None,
                  baseline: str | Mapping[str, str] | None = None,
                  restored: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """The JSON object described in the module docstring.

    Args:
        systems: system name -> the ``metrics.json`` dicts of its finished seeds, in grid order.
        main_split: the prepared split of the report's main test set (``test``).
        meta: the prepared data's ``meta.json`` (for the test-set names), or None.
        baseline: the system ``drop_noise`` compares the others with, or each system's own
            (:data:`scanmt.experiments.baselines.Baselines`), or None (no comparison).
        restored: system name -> its ``restored`` entry (seed -> the shared work it trained on), for the systems
            with seeds restored from an archive of runs only.

    Raises:
        ConfigError: a system is named like a reserved key, or two splits have the same name.
    """
    clash = sorted(set(systems) & set(RESERVED))
    if clash:
        raise ConfigError(f"system name {clash[0]!r} is reserved in the results JSON; rename the system")
    main = split_entries(systems, baseline)
    main_name = split_display_name(meta, main_split)
    sets: dict[str, Any] = {main_name: main}
    for split in extra_splits(systems, main_split):
        name = split_display_name(meta, split)
        if name in sets:
            raise ConfigError(f"test set {split!r} and another split are both named {name!r}")
        sets[name] = split_entries({sys_name: [r["test_sets"][split] for r in runs
                                               if split in (r.get("test_sets") or {})]
                                    for sys_name, runs in systems.items()}, baseline)
    for entries in sets.values():
        for name, entry in (restored or {}).items():
            entries[name]["restored"] = dict(entry)
    return {**main, "test_set": main_name, "test_sets": sets}


def write_results_json(path: Path, table: Mapping[str, Any]) -> Path:
    """Write ``table`` as indented JSON, atomically; returns ``path``."""
    with atomic_open(path) as fh:
        json.dump(table, fh, indent=2)
        fh.write("\n")
    return path


def check_distinct_systems(systems: Mapping[str, Sequence[str]]) -> None:
    """Refuse grids (name -> its systems) that share a system name: their entries would overwrite each other in one
    results JSON."""
    owner: dict[str, str] = {}
    for grid, names in systems.items():
        for name in names:
            if name in owner:
                raise ConfigError(f"grids {owner[name]} and {grid} both have a system {name!r}: one report of both "
                                  "would hold one of them; report them separately (leave out --name)")
            owner[name] = grid


def check_same_test_set(test_sets: Mapping[str, str]) -> None:
    """Refuse grids (name -> its main test set) scored on different test sets: the top-level entries of one results
    JSON are on one test set."""
    if len(set(test_sets.values())) > 1:
        each = ", ".join(f"{grid} on {test_set!r}" for grid, test_set in test_sets.items())
        raise ConfigError(f"one report of several grids needs one test set, but the grids differ: {each}; report "
                          "them separately (leave out --name)")


def merge_tables(tables: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """One results JSON of several grids' :func:`results_table` (grid name -> its table, in report order), as the
    module docstring describes.

    Raises:
        ConfigError: two grids share a system name, or their main test sets differ.
    """
    systems = {grid: [k for k in table if k not in RESERVED] for grid, table in tables.items()}
    check_distinct_systems(systems)
    check_same_test_set({grid: table["test_set"] for grid, table in tables.items()})
    merged: dict[str, Any] = {name: table[name] for grid, table in tables.items() for name in systems[grid]}
    sets: dict[str, dict[str, Any]] = {}
    for table in tables.values():
        for test_set, entries in table["test_sets"].items():
            sets.setdefault(test_set, {}).update(entries)
    return {**merged, "test_set": next(iter(tables.values()))["test_set"], "test_sets": sets, GRIDS_KEY: systems}
