"""Packing a grid's finished runs into an archive (:func:`pack`, ``scanmt experiment archive``).

The archive, by concept: :mod:`.manifest`, :mod:`.shared_work` (the shared work's identity), :mod:`.packing`,
:mod:`.restoring` and :mod:`.unpack` (tarballs read safely).

A grid's finished runs packed small enough for git, and restored on a fresh machine.

A grid of 3 seeds x 4 systems runs for longer than a machine may live: a cloud instance, a scratch
folder that is wiped, a session that ends.  Checkpoints are too large to keep, but what the report
reads is small.  ``scanmt experiment archive OUT --to DEST`` packs into ``DEST``::

    manifest.json          the experiment folder it came from, the digests of the prepared data it
                           mirrors, the identity of its shared work, the digests of the corpus text it leaves
                           out, and each archived run's digest
    shared.tar.gz          OUT/shared/: the alignments (eflomal cannot be seeded, so they cannot be made
                           again), the aligner models and the step markers; not the fertility predictor, a
                           model, which restore retrains from those alignments, nor the fertility caches,
                           which `run` recomputes; a mirrored data folder travels as its symbolic links,
                           checked by digest; a corpus the grid prepared itself travels without its text
                           (the subword model, vocabulary and meta.json only), which restore prepares again
    predictor-fertility.npy  what the predictor decides: its expected fertility of every source token of
                           the valid split.  Retraining is deterministic on one machine (the same weights)
                           but not across processors, whose arithmetic differs in the last bits; a
                           retrained predictor counts as the archived one when its fertilities are within
                           PREDICTOR_TOLERANCE of these
    grids/NAME.{yaml,json} the grid records
    runs/SYSTEM/seedK.tar.gz   each finished run (DONE) without its checkpoints (*.pt): spec, commands,
                           logs, metrics.csv, translations, metrics, stress test, and of the attention
                           files only seed 1's of the main split, of the systems the grids' figures
                           draw (their ``figure`` pairs; every system's for a grid that names none), as
                           decoded (float16 would make a dense map's smallest weights exact zeros, and no
                           lossless encoding saves more than 5%: ``benchmarks/attention_storage.py``), and
                           with a figure window (``--max-figure-words`` ..., recorded in the manifest) only
                           for the test sentences within it, those the report's maps may draw (KFTT's 30-50
                           words: 203 of 1,160 sentences, softmax seed 1's run 5.4 MB -> 1.9 MB); no
                           copy of the test set (the joined stress inputs, the attention file's source
                           tokens), which restore makes again (:mod:`scanmt.experiments.archive.corpus`)

``scanmt experiment restore DEST --out OUT`` unpacks it into an empty (or partly restored) ``OUT``, so that
``experiment run`` skips the restored runs, trains the missing ones with the same alignments and the same
fertility predictor, and ``experiment report`` reads all of them.  Runs store absolute paths (their
commands, the data they read), so ``OUT`` and the prepared data must sit where they sat when packed.

Packing again adds the runs finished since, and packs a run again only when its ``metrics.json``
changed (a new test split, a stress test, a redecode).  Packing runs whose shared work differs from the
archive's (another session aligned afresh, since eflomal cannot be seeded, or its predictor predicts other
fertilities) is refused, since their fertilities, and the DROP aligner, would not be those of the archived
runs.  ``DEST`` must be missing, empty or an archive: a folder with other files is refused, since packing
replaces them.  A pack writes the new archive beside ``DEST`` (hard links of its unchanged files, so an
unchanged run keeps its bytes) and swaps it in as a whole (:func:`scanmt.folder_swap.replacing_folder`), so a
pack interrupted at any point, ``kill -9`` included, leaves the archive as it was or complete, never a new run
tarball beside the old manifest.

Restore checks the whole archive before it writes anything: the run keys of the manifest (``SYSTEM/seedK``),
every tarball's members (:mod:`scanmt.experiments.archive.unpack`: relative regular files, and in
``shared.tar.gz`` only the mirrored data links ``data/NAME -> DIR/NAME``, so nothing is written outside
``OUT``), and each run's ``metrics.json`` against its digest.  It unpacks into temporary folders, checks them
again, renames them into place, and on a failure removes all it made: no run it unpacked is left ``DONE``.

**An archive of runs only** (``archive --runs-only``) packs no ``shared.tar.gz``: for a grid whose alignments are
data too large for git (KFTT's: 20 MB packed), on a machine that may not outlive its runs.  Its manifest records
the shared work's identity and data, and each run's entry the alignments and fertility predictor it trained on.
Restore prepares the data again, unpacks the runs and writes that record into each (``RUN/shared-origin.json``);
``experiment run`` then aligns afresh and trains the missing runs on the new alignments; packing again adds them,
each with its own shared work, and the report lists the runs that trained on other shared work than their
folder's.  So seeds trained on two machines meet in one report, their fertility bounds from two predictors and
their DROP scored by two aligners (eflomal cannot be seeded): a source of variation beside the seed's, which an
archive of all the shared work avoids.  The data a restore prepares stays when it fails later (a finished
shared step, which ``experiment run`` reuses).
"""

from __future__ import annotations

import gzip
import os
import shutil
import tarfile
import time
from pathlib import Path
from typing import Callable

from scanmt.errors import ConfigError, DataError
from scanmt.experiments.archive.manifest import (FORMAT, RUNS_ONLY_FORMAT, ArchiveSummary, _metrics_digest, _run_tar,
                                                 _write_manifest, partial_attention, read_manifest)
from scanmt.experiments.archive.corpus import corpus_difference, shared_skip, source_roots, strip_run
from scanmt.experiments.archive.shared_work import (_shared_left_behind, compare_shared, folder_trained_on,
                                                     mirrored_data, predictor_added, read_origin, shared_record,
                                                     trained_on)
from scanmt.experiments.common import read_json
from scanmt.experiments.figure_window import FigureWindow
from scanmt.experiments.layout import (ATTENTION_SUFFIX, CHECKPOINT_SUFFIX, DONE, GRID_FILE_SUFFIXES, LOCK_FILE,
                                       MANIFEST, MANIFEST_FIGURE_WINDOW, MANIFEST_RUNS, MANIFEST_RUNS_ONLY,
                                       MANIFEST_SHARED, SHARED_ORIGIN, SHARED_TAR, SPEC, SharedPaths, attention_name,
                                       grid_record_paths, grids_dir, run_dirs, run_key, runs_dir, seed_name,
                                       stripped_dir)
from scanmt.folder_swap import replacing_folder
from scanmt.io import atomic_open


def _deterministic_tar(dest: Path, members: list[tuple[str, Path, os.stat_result]]) -> None:
    """Write ``dest`` (gzip, atomically) holding ``members``: (name, file or symbolic link, its lstat).

    No time in the gzip header, members sorted, owners dropped, file times in whole seconds, symbolic links
    with time 0 (extracting one cannot set its own time, so a restored link has the time of its restore): the
    same files (content and times) give the same bytes, so packing a restored, unchanged run again changes
    nothing in git."""
    with atomic_open(dest, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, item, st in sorted(members, key=lambda m: m[0]):
            info = tarfile.TarInfo(name)
            info.mtime = int(st.st_mtime)
            info.mode = 0o644
            if item.is_symlink():
                info.type = tarfile.SYMTYPE
                info.linkname = os.readlink(item)
                info.mode = 0o777
                info.mtime = 0
                tar.addfile(info)
            else:
                info.size = item.stat().st_size
                with open(item, "rb") as fh:
                    tar.addfile(info, fh)


def _files(root: Path, skip: Callable[[Path], bool]) -> list[tuple[str, Path, os.stat_result]]:
    out = []
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if skip(rel) or not (p.is_symlink() or p.is_file()):
            continue
        out.append((rel.as_posix(), p, p.lstat()))
    return out


def finished_runs(out: Path) -> list[Path]:
    """The run folders of ``out`` that finished (``DONE``), as ``runs/SYSTEM/seedK``."""
    base = runs_dir(out)
    return [run for run in run_dirs(base) if (run / DONE).exists()] if base.is_dir() else []


def figure_systems(out: Path) -> frozenset[str] | None:
    """The systems whose seed-1 attention the reports of ``out``'s grids draw: the union of the ``figure`` pairs
    of its grid records (``grids/NAME.json``); None, meaning every system, when a record names no pair or cannot
    be read, since its report then picks the pair among the systems that finished
    (:func:`scanmt.experiments.report.figures.figure_systems`)."""
    names: set[str] = set()
    for path in grid_record_paths(out):
        pair = (read_json(path) or {}).get("figure")
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(n, str) for n in pair)):
            return None
        names.update(pair)
    return frozenset(names)


def kept_attention(system: str, seed: str, split: str, figure: frozenset[str] | None) -> str | None:
    """The name of the one attention file an archive keeps of the run ``system``/``seed`` (``seedK``) whose main
    split is ``split``: seed 1's, of a system in ``figure`` (:func:`figure_systems`), the one the report draws its
    figures from; None for every other run.  A dense attention file is large (KFTT's softmax test attention: 5.1 MB
    of a 5.4 MB run), and no report reads another system's (a figure window then trims the one kept:
    :func:`strip_run`)."""
    drawn = seed == seed_name(1) and (figure is None or system in figure)
    return attention_name(split) if drawn else None


def _left_behind(run: Path, figure: frozenset[str] | None) -> Callable[[Path], bool]:
    """What of a run folder is not packed: checkpoints, lock files, and every attention file but the one
    :func:`kept_attention` names."""
    spec = read_json(run / SPEC) or {}
    kept = kept_attention(run.parent.name, run.name, spec.get("split") or "test", figure)

    def skip(rel: Path) -> bool:
        if rel.suffix == CHECKPOINT_SUFFIX or rel.name == LOCK_FILE:
            return True
        return rel.name.endswith(ATTENTION_SUFFIX) and rel.as_posix() != kept

    return skip


def _run_key(run: Path) -> str:
    return run_key(run)


def pack(out: Path, dest: Path, *, runs_only: bool = False, window: FigureWindow | None = None) -> ArchiveSummary:
    """Add the finished runs of the experiment folder ``out`` to the archive ``dest`` (made if missing), as a
    whole: the new archive is written beside ``dest`` and swapped in (:func:`scanmt.folder_swap.replacing_folder`).

    ``runs_only`` makes a new archive of runs only (:func:`_record_shared_work`); an archive keeps its kind, so
    packing into one of runs only needs no flag.  ``window`` keeps the attention of only the test sentences a
    report's maps may draw (:mod:`scanmt.experiments.figure_window`); the archive records it, later packs use
    it, and a pack with another one packs again the runs whose attention it keeps (from their folders).

    Raises:
        ConfigError: ``dest`` is not a folder, or a folder with files that is not an archive (no manifest.json).
        DataError: ``out`` is not an experiment folder, its shared work differs from the archive's (runs only: its
            prepared data), it was packed from another folder than the archive's, ``runs_only`` for an archive
            with its shared work, or the archive holds a symbolic link.
        BusyError: another process has been packing an archive beside ``dest`` for 10 minutes.
    """
    out = out.resolve()
    shared = SharedPaths(out).root
    if not shared.is_dir() or not grids_dir(out).is_dir():
        raise DataError(f"{out}: not a scanmt experiment folder (no shared/ and grids/)")
    with replacing_folder(dest, what="--to", check=_check_archive_folder) as staging:
        return _pack_into(out, dest, staging, runs_only, window)


def _pack_shared_work(shared: Path, manifest: dict, dest: Path, staging: Path, summary: ArchiveSummary) -> None:
    """Check ``shared`` against the archive's shared work (packed: ``shared.tar.gz`` when new) and record it in
    ``manifest``; says what was done in ``summary.shared``."""
    old = manifest.get(MANIFEST_SHARED)
    added_predictor = old is not None and predictor_added(shared, old)
    if old is None:
        summary.shared = "packed"
    elif added_predictor:
        summary.shared = "same, with the fertility predictor trained since the last pack"
    else:
        difference, note = compare_shared(shared, old, dest)
        if difference is not None:
            raise DataError(
                f"{shared} differs from the shared work archived in {dest}: {difference}; runs trained on it "
                "are not comparable with the archived ones. Restore the archive into an empty folder first "
                f"(`scanmt experiment restore {dest} --out {shared.parent}`)")
        summary.shared = "same" + (f" (fertility predictor: {note})" if note.startswith("other") else "")
    upgrade = old is not None and manifest["format"] != FORMAT
    if old is None or upgrade or added_predictor:  # (re)write the record; shared.tar.gz when new or upgraded
        record = shared_record(shared, staging)
        if upgrade and "identity" in old:  # format 1, the same shared work: its mirrored data as recorded
            record["data"] = old["data"]
        if old is None or upgrade:  # (a predictor added since changes nothing that the tarball holds)
            skip_corpus = shared_skip(record["corpus"])
            _deterministic_tar(staging / SHARED_TAR,
                               list(_files(shared, lambda rel: _shared_left_behind(rel) or skip_corpus(rel))))
        manifest[MANIFEST_SHARED] = record
        if upgrade:
            manifest["format"] = FORMAT
            summary.shared += f", manifest upgraded to format {FORMAT}" + (
                ", the corpus text left out" if record["corpus"] else "")


def _record_shared_work(shared: Path, manifest: dict, dest: Path) -> str:
    """An archive of runs only: record ``shared``'s identity in ``manifest`` (its data, for restore to prepare
    again; each run's entry records the alignments and predictor it trained on) and pack none of it; returns the
    summary's ``shared``.

    Where an archive of all the shared work refuses other alignments (its runs would not be comparable with those
    trained on the restored ones), one of runs only takes them: it exists for the machine that loses its shared
    work with its runs, and each run says which shared work it trained on.  Its data must be the same.

    Raises:
        DataError: ``shared`` prepared other data than the archived runs read.
    """
    old = manifest.get(MANIFEST_SHARED)
    if old is None:
        manifest[MANIFEST_SHARED] = shared_record(shared, None)
        return "not packed (an archive of runs only), recorded"
    difference = corpus_difference(shared, old.get("corpus")) or (
        None if mirrored_data(shared) == old.get("data") else "it mirrors other prepared data")
    if difference is not None:
        raise DataError(f"{shared} differs from the data of the runs archived in {dest}: {difference}; runs "
                        "trained on it would not be comparable with the archived ones")
    if folder_trained_on(shared) == trained_on(old):  # (the queue packs every 10 minutes: no second corpus hash)
        return "not packed (runs only), the same as at the last pack"
    manifest[MANIFEST_SHARED] = shared_record(shared, None)
    return "not packed (runs only), other than at the last pack (aligned afresh): new runs record theirs"


def _check_archive_folder(dest: Path) -> None:
    """Refuse to pack into ``dest`` unless it is missing, an empty folder, or an archive (a readable manifest)
    without symbolic links (the new archive's files would be written through them)."""
    if not dest.is_dir():
        if os.path.lexists(dest):
            raise ConfigError(f"--to {dest}: not a folder")
        return
    if not (dest / MANIFEST).exists():
        if any(dest.iterdir()):
            raise ConfigError(f"--to {dest}: a folder with files but no {MANIFEST}, so not an archive of `scanmt "
                              f"experiment archive`; packing would replace what it holds ({SHARED_TAR}, grids/, "
                              "runs/): name a new or an empty folder")
        return
    read_manifest(dest)
    for root, dirs, files in os.walk(dest):
        for name in (n for n in dirs + files if os.path.islink(os.path.join(root, n))):
            raise DataError(f"{os.path.join(root, name)}: a symbolic link in the archive {dest}, which holds none "
                            "(packing would write through it): remove it")


def _figure_window(manifest: dict, given: FigureWindow | None, dest: Path) -> FigureWindow | None:
    """The figure window of this pack: ``given`` (then recorded in ``manifest``), else the one the archive
    recorded, else None (every sentence's attention)."""
    if given is not None:
        manifest[MANIFEST_FIGURE_WINDOW] = given.as_record()
        return given
    recorded = manifest.get(MANIFEST_FIGURE_WINDOW)
    return None if recorded is None else FigureWindow.from_record(recorded, str(dest / MANIFEST))


def _same_window(known: dict, window: FigureWindow | None) -> bool:
    """Whether an archived run's entry ``known`` needs no new pack for ``window``: it keeps no attention file
    stripped by the archive, or one stripped to the same window."""
    kept = [how["attention_sources"] for how in known["left_out"].values()
            if isinstance(how, dict) and isinstance(how.get("attention_sources"), dict)]
    return all(how.get("window") == (window.as_record() if window is not None else None) for how in kept)


def _pack_into(out: Path, dest: Path, staging: Path, runs_only: bool, window: FigureWindow | None
               ) -> ArchiveSummary:
    """:func:`pack`, reading the archive ``dest`` and writing its new version into ``staging`` (a copy of it)."""
    shared = SharedPaths(out).root
    manifest = read_manifest(dest) or {"format": RUNS_ONLY_FORMAT if runs_only else FORMAT, "out": str(out),
                                       MANIFEST_RUNS: {}, **({MANIFEST_RUNS_ONLY: True} if runs_only else {})}
    if manifest["out"] != str(out):
        raise DataError(f"{dest} archives the experiment {manifest['out']}, not {out}: its runs name that folder "
                        "in their files; restore it there (`scanmt experiment restore`) and run the grid there")
    if runs_only and not manifest.get(MANIFEST_RUNS_ONLY):
        raise DataError(f"--runs-only: {dest} is an archive with its shared work ({SHARED_TAR}); pack into it "
                        "without --runs-only, or name a new folder for an archive of runs only")
    summary = ArchiveSummary()
    if manifest.get(MANIFEST_RUNS_ONLY):
        summary.shared = _record_shared_work(shared, manifest, dest)
    else:
        _pack_shared_work(shared, manifest, dest, staging, summary)
    for grid in sorted(grids_dir(out).glob("*")):
        if grid.suffix in GRID_FILE_SUFFIXES:
            grids_dir(staging).mkdir(parents=True, exist_ok=True)
            with atomic_open(grids_dir(staging) / grid.name) as fh:
                fh.write(grid.read_text(encoding="utf-8"))
    roots = source_roots(str(out), manifest[MANIFEST_SHARED].get("data"))
    figure = figure_systems(out)
    window = _figure_window(manifest, window, dest)
    summary.window = window
    for run in finished_runs(out):
        key = _run_key(run)
        digest = _metrics_digest(run)
        origin = read_origin(run)
        if origin is not None and not manifest.get(MANIFEST_RUNS_ONLY):
            raise DataError(f"{run}: trained on other shared work than {out}/shared (its {SHARED_ORIGIN}: restored "
                            f"from an archive of runs only), so it cannot join {dest}, whose runs all trained on the "
                            "shared work it packs: pack it into an archive of runs only (--runs-only)")
        known = manifest[MANIFEST_RUNS].get(key)
        if known is not None and known["metrics"] == digest and "left_out" in known and _same_window(known, window):
            summary.kept.append(key)
            continue
        tar = _run_tar(staging, key)
        tar.parent.mkdir(parents=True, exist_ok=True)
        scratch = stripped_dir(staging, key)
        try:
            members, left_out = strip_run(run, _files(run, _left_behind(run, figure)), scratch, roots, window)
            _deterministic_tar(tar, members)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        manifest[MANIFEST_RUNS][key] = {"metrics": digest, "size": tar.stat().st_size, "left_out": left_out,
                                        "packed": time.strftime("%Y-%m-%d %H:%M:%S")}
        if manifest.get(MANIFEST_RUNS_ONLY):  # the shared work it trained on: restored with it, or this folder's
            manifest[MANIFEST_RUNS][key][MANIFEST_SHARED] = (
                {k: origin.get(k) for k in ("alignments", "predictor")} if origin is not None
                else trained_on(manifest[MANIFEST_SHARED]))
        (summary.updated if known is not None else summary.added).append(key)
        if (partial := partial_attention(left_out)) is not None:
            summary.attention[key] = partial
    summary.unfinished = sorted(_run_key(p) for p in run_dirs(runs_dir(out))
                                if p.is_dir() and not (p / DONE).exists()) if runs_dir(out).is_dir() else []
    _write_manifest(staging, manifest)
    return summary
