"""``scanmt experiment archive``, ``restore`` and ``trim``: pack, restore or trim, then say what was done."""

from __future__ import annotations

import time
from pathlib import Path

from scanmt.experiments.archive.packing import pack
from scanmt.experiments.archive.restoring import restore
from scanmt.experiments.archive.trimming import trim
from scanmt.experiments.figure_window import FigureWindow
from scanmt.experiments.layout import SHARED_ORIGIN


def archive_command(folder: str | Path, dest: str | Path, *, runs_only: bool = False,
                    window: FigureWindow | None = None) -> int:
    """Pack the finished runs of the experiment folder ``folder`` into the archive ``dest`` (a new one of runs only
    with ``runs_only``; with ``window``, the attention of the sentences within it only) and print what was added,
    packed again, kept and left out; exit status 0."""
    folder, dest = Path(folder), Path(dest)
    t0 = time.time()
    s = pack(folder, dest, runs_only=runs_only, window=window)
    shared = s.shared.replace("same", "already archived, unchanged", 1) if s.shared.startswith("same") else s.shared
    print(f"archive {dest}: shared work {shared}; runs added {len(s.added)}, packed again {len(s.updated)}, "
          f"unchanged {len(s.kept)}; {len(s.unfinished)} unfinished left out ({time.time() - t0:.0f} s)")
    for what, keys in (("added", s.added), ("packed again", s.updated), ("unfinished", s.unfinished)):
        if keys:
            print(f"  {what}: {', '.join(keys)}")
    if s.window is not None:
        kept = _sentences_kept(s.attention)
        print(f"  attention kept for the {s.window.describe()} (the figure window)" + (f": {kept}" if kept else ""))
    return 0


def restore_command(archive: str | Path, out: str | Path, *, mirror: str | None = None) -> int:
    """Restore the archive ``archive`` into its experiment folder ``out`` (the corpus, if it was left out,
    prepared again from ``mirror`` or where the grid read it) and print what was restored; exit status 0."""
    archive, out = Path(archive), Path(out).resolve()
    s = restore(archive, out, mirror=mirror)
    print(f"restore {archive} -> {out}: shared work {s.shared}; runs restored {len(s.added)}, "
          f"already there {len(s.kept)}")
    if s.added and s.shared.startswith("not in the archive"):
        print(f"  each restored run records the shared work it trained on in RUN/{SHARED_ORIGIN}; `experiment run` "
              "aligns afresh and trains the missing runs")
    if s.added:
        print(f"  restored: {', '.join(s.added)}")
    if s.attention:
        print(f"  attention restored for the archive's figure window only (the sentences a report's maps may "
              f"draw): {_sentences_kept(s.attention)}")
    return 0


def trim_command(archive: str | Path, *, dry_run: bool = False) -> int:
    """Leave out of the archive ``archive`` the attention files no report of its grids draws (with ``dry_run``,
    only list them) and print each run written again with its sizes; exit status 0."""
    archive = Path(archive)
    s = trim(archive, dry_run=dry_run)
    before = sum(b for _, b, _ in s.trimmed.values())
    after = sum(a for _, _, a in s.trimmed.values())
    done = (f"; a dry run, nothing written: {_kib(before)} of run tarballs would be written again without it"
            if dry_run else f"; written again without it, {_kib(before)} -> {_kib(after)}")
    print(f"trim {archive}: {len(s.trimmed)} of {s.runs} runs held attention that no report of its grids draws"
          + (done if s.trimmed else "; nothing to do"))
    for key, (names, b, a) in s.trimmed.items():
        print(f"  {key}: {', '.join(names)} " + (f"to leave out ({_kib(b)} now)" if dry_run
                                                  else f"left out, {_kib(b)} -> {_kib(a)}"))
    return 0


def _kib(size: int) -> str:
    return f"{size / 1024:,.0f} KiB"


def _sentences_kept(attention: dict[str, tuple[int, int]]) -> str:
    """``"csparsemax/seed1 203 of 1160; softmax/seed1 203 of 1160"``: each run's sentences whose attention is kept."""
    return "; ".join(f"{key} {rows} of {n}" for key, (rows, n) in sorted(attention.items()))
