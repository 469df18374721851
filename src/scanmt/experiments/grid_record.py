"""A grid's record, ``OUT/grids/NAME.{yaml,json}``: the grid file as run and what ``report`` and ``status`` need
to know of it (systems, seeds, transforms, data, splits, commands), merged over the invocations into ``OUT``
(:func:`write_record`).  The record is read back by :func:`scanmt.experiments.report.collection.grid_records`.
"""

from __future__ import annotations

import time
from pathlib import Path

from scanmt.experiments.common import read_json, write_json
from scanmt.experiments.layout import grid_file_path, grid_record_path, system_dir
from scanmt.io import atomic_open


#: the keys of a grid record that name the invocation, not the grid: the worktree's preset path, and the
#: overrides (`set`), which an invocation that finds every run finished can change only in the speed settings
#: (any other change would make the runs stale, and the plan refuses that)
_INVOCATION_KEYS = ("command", "commit", "updated", "preset", "commands", "set")


def write_record(out: Path, g, args, ctx, seeds: list[int], specs, work: bool = True) -> None:
    """OUT/grids/NAME.{yaml,json}: the grid file as run and what the report needs to know.  An invocation with
    no ``work`` (every run finished) that would change only the keys naming it (:data:`_INVOCATION_KEYS`)
    leaves the record as it was: it trained and decoded nothing, so the record keeps naming the commands that
    did."""
    path, grid_file = grid_record_path(out, g.name), grid_file_path(out, g.name)
    old = (read_json(path) or {}) if path.exists() else {}
    record = _record_content(out, g, args, ctx, seeds, specs, old)
    same = {k: v for k, v in old.items() if k not in _INVOCATION_KEYS} == \
        {k: v for k, v in record.items() if k not in _INVOCATION_KEYS}
    if not work and same and grid_file.exists() and grid_file.read_text(encoding="utf-8") == g.text:
        return
    with atomic_open(grid_file) as fh:
        fh.write(g.text)
    write_json(path, record)


def _record_content(out: Path, g, args, ctx, seeds: list[int], specs,
                    old: dict) -> dict:
    """The grid record of this invocation, merged with the ``old`` one (seeds, transforms, commands, systems)."""
    # the same preset file, maybe in another worktree of the code (a changed one would make the runs stale)
    same_preset = Path(old.get("preset") or "").name == Path(str(ctx.preset)).name
    all_seeds = sorted(set(seeds) | set(old.get("seeds") or [])) if same_preset else seeds
    record = {
        **g.as_dict(),
        "systems": [s.as_dict() for s in g.systems],
        "transforms": {s.system: s.config["model"]["attention"]["transform"] for s in specs},
        "outputs": {s.system: s.config["model"]["output"] for s in specs},
        "seeds": all_seeds,
        "data": args.data, "pair": f"{ctx.src_lang}-{ctx.tgt_lang}", "src_lang": ctx.src_lang, "tgt_lang": ctx.tgt_lang,
        "split": ctx.split, "extra_splits": list(ctx.extra_splits), "stress_k": list(ctx.stress_k), "preset": str(ctx.preset), "set": list(g.set) + list(args.set),
        "command": ctx.command, "commit": ctx.commit, "updated": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    for key in ("transforms", "outputs"):
        record[key] = {**old.get(key, {}), **record[key]}
    # every distinct invocation into OUT, oldest first (a grid is often continued with other --systems or --workers)
    earlier = [c for c in old.get("commands") or ([old["command"]] if old.get("command") else []) if c != ctx.command]
    record["commands"] = [*earlier, ctx.command]
    # Systems asked for (--systems) by every invocation into OUT; for a record written before this
    # field existed, the systems that have run directories.
    before = old.get("requested") if "requested" in old else \
        [s.name for s in g.systems if system_dir(out, s.name).is_dir()]
    asked = {s.system for s in specs} | set(before)
    record["requested"] = [s.name for s in g.systems if s.name in asked]
    return record
