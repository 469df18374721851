"""Restoring an archive into its experiment folder (:func:`restore`, ``scanmt experiment restore``): the whole
archive checked first, then unpacked into temporary folders, checked again and renamed into place; on a failure
everything it made is removed."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Callable

from scanmt.errors import ConfigError, DataError
from scanmt.experiments.archive.corpus import (check_left_out, corpus_difference, remake_corpus, remake_run,
                                               source_roots)
from scanmt.experiments.archive.manifest import (ArchiveSummary, _metrics_digest, _run_tar, partial_attention,
                                                 read_manifest)
from scanmt.experiments.archive.shared_work import check_data, compare_shared, mirrored_data
from scanmt.experiments.archive.unpack import check_tarball, unpack
from scanmt.experiments.grid import NAME_RE
from scanmt.experiments.layout import (DONE, MANIFEST, MANIFEST_RUNS, MANIFEST_RUNS_ONLY, MANIFEST_SHARED, METRICS,
                                       SHARED_ORIGIN, SHARED_TAR, SharedPaths, grids_dir, restoring_dir, runs_dir)
from scanmt.io import atomic_open
from scanmt.processes import lock_folder


def restore(dest: Path, out: Path, say: Callable[[str], None] = print,
            train_predictor: Callable[..., object] | None = None, *, mirror: str | None = None,
            prepare: Callable[..., None] | None = None) -> ArchiveSummary:
    """Unpack the archive ``dest`` into the experiment folder ``out`` (its recorded place), prepare the corpus
    again when the archive left its text out (``prepare``, default
    :func:`scanmt.experiments.archive.corpus.prepare_corpus`, reading the corpus from ``mirror`` or as the grid
    did), make the runs' left-out copies of the test set again, and retrain the grid's fertility predictor from
    the archived alignments (``train_predictor``: default :func:`scanmt.experiments.shared.train_predictor`;
    about 40 s on one CPU thread for Multi30k).

    Runs already finished in ``out`` are kept; shared work already in ``out`` must be the archive's.  The whole
    archive is checked before anything is written (:func:`check_archive`); a restore that fails removes all it
    made.

    An archive of runs only restores no shared work: the data is prepared (:func:`_prepare_for_runs`; kept if a
    later step fails), and each run restored gets the record of the shared work it trained on
    (:data:`~scanmt.experiments.layout.SHARED_ORIGIN`), whatever ``out``'s own shared work is.

    Raises:
        DataError: no archive, another folder than the archive's, prepared data missing or changed,
            a damaged or crafted archive, shared work that differs, or an unfinished run where an archived one
            would go.
    """
    manifest = read_manifest(dest)
    if manifest is None:
        raise DataError(f"{dest}: no {MANIFEST}: not an archive of `scanmt experiment archive`")
    out = out.resolve()
    if manifest["out"] != str(out):
        raise ConfigError(f"--out {out}: {dest} archives the experiment {manifest['out']}; its runs name that "
                          f"folder in their commands and specs, so restore it with --out {manifest['out']}")
    if not isinstance(manifest.get(MANIFEST_SHARED), dict):
        raise DataError(f"{dest}/{MANIFEST}: records no shared work")
    if manifest[MANIFEST_SHARED].get("data"):
        check_data(manifest[MANIFEST_SHARED]["data"], str(dest))
    keys = check_archive(dest, manifest)
    out.mkdir(parents=True, exist_ok=True)
    with lock_folder(out, what="--out"):
        return _restore_into(dest, out, manifest, keys, say, train_predictor,
                             lambda tmp: _remake_corpus(dest, manifest, tmp, say, mirror, prepare), mirror)


#: a run's key in the manifest: its system's name (a grid's, :data:`scanmt.experiments.grid.NAME_RE`) and seed
SEED_RE = re.compile(r"seed[0-9]+")


def is_run_key(key: object) -> bool:
    """Whether ``key`` is a run's key in a manifest, ``SYSTEM/seedK`` (a crafted one could name a path outside the
    archive)."""
    system, _, seed = key.partition("/") if isinstance(key, str) else ("", "", "")
    return bool(NAME_RE.fullmatch(system) and SEED_RE.fullmatch(seed))


def check_archive(dest: Path, manifest: dict) -> list[str]:
    """The run keys of the archive ``dest`` (sorted), after reading all of it and writing nothing: each key is
    ``SYSTEM/seedK``, each tarball holds only what :func:`scanmt.experiments.archive.unpack.check_members`
    allows, each run's ``metrics.json`` has the manifest's digest, and the grid records are files.

    Raises:
        DataError: naming the first key, tarball, member or file that is not as ``pack`` writes it.
    """
    runs = manifest.get(MANIFEST_RUNS)
    if not isinstance(runs, dict):
        raise DataError(f"{dest}/{MANIFEST}: no table of runs (a damaged manifest); nothing was restored")
    roots = source_roots(manifest["out"], (manifest.get(MANIFEST_SHARED) or {}).get("data"))
    for key, entry in runs.items():
        if not is_run_key(key):
            raise DataError(f"{dest}/{MANIFEST}: run {key!r} is not SYSTEM/seedK (a damaged or crafted manifest); "
                            "nothing was restored")
        if not isinstance(entry, dict) or not isinstance(entry.get("metrics"), str):
            raise DataError(f"{dest}/{MANIFEST}: run {key!r} records no digest of its metrics.json (a damaged "
                            "manifest); nothing was restored")
        check_left_out(key, entry.get("left_out") or {}, roots, f"{dest}/{MANIFEST}")
    if manifest.get(MANIFEST_RUNS_ONLY):
        for key, entry in runs.items():
            if not isinstance(entry.get(MANIFEST_SHARED), dict) or not isinstance(
                    entry[MANIFEST_SHARED].get("alignments"), str):
                raise DataError(f"{dest}/{MANIFEST}: run {key!r} of an archive of runs only records no shared work "
                                "it trained on (a damaged manifest); nothing was restored")
    else:
        check_tarball(dest / SHARED_TAR, _mirror_links(manifest[MANIFEST_SHARED].get("data")))
    for key in sorted(runs):
        if (check_tarball(_run_tar(dest, key), {}, METRICS) or "") != runs[key]["metrics"]:
            raise DataError(f"{_run_tar(dest, key)}: its metrics.json does not match {MANIFEST} (a tarball of "
                            "another pack?); nothing was restored")
    for grid in sorted(grids_dir(dest).glob("*")):
        if grid.is_symlink() or not grid.is_file():
            raise DataError(f"{grid}: not a file, as a grid record of an archive is; nothing was restored")
    return sorted(runs)


def _mirror_links(data: dict | None) -> dict[str, str]:
    """The symbolic links ``shared.tar.gz`` may hold: ``data/NAME -> DIR/NAME`` for each file NAME of the mirrored
    prepared data ``DIR`` (none when the data was prepared inside the experiment)."""
    if not data:
        return {}
    src = str(data["dir"])
    if not Path(src).is_dir():
        raise DataError(f"{src}: the prepared data that the archive's shared work mirrors is missing, so its links "
                        "cannot be checked: prepare it there first (`scanmt prepare`); nothing was restored")
    return {f"data/{p.name}": os.path.join(src, p.name) for p in Path(src).iterdir() if p.is_file()}


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        path.unlink()


def _unpack_beside(tar_path: Path, final: Path, links: dict[str, str], made: list[Path]) -> Path:
    """Unpack ``tar_path`` into ``.NAME.restoring`` beside ``final`` (one a killed restore left is replaced),
    recorded in ``made``; returns it."""
    tmp = restoring_dir(final)
    _remove(tmp)
    final.parent.mkdir(parents=True, exist_ok=True)
    made.append(tmp)
    unpack(tar_path, tmp, links)
    return tmp


def _remake_corpus(dest: Path, manifest: dict, shared_tmp: Path, say: Callable[[str], None], mirror: str | None,
                   prepare: Callable[..., None] | None) -> str:
    """Prepare the corpus the archive left out into the unpacked shared folder; returns a note ("" if none)."""
    record = manifest[MANIFEST_SHARED].get("corpus")
    if not record:
        return ""
    return remake_corpus(shared_tmp, record, str(dest), mirror=mirror, say=say, prepare=prepare)


def _restore_into(dest: Path, out: Path, manifest: dict, keys: list[str], say: Callable[[str], None],
                  train_predictor: Callable[..., object] | None,
                  remake: Callable[[Path], str], mirror: str | None) -> ArchiveSummary:
    summary = ArchiveSummary()
    todo = []
    for key in keys:
        run = runs_dir(out) / key
        if (run / DONE).exists():
            summary.kept.append(key)
        elif os.path.lexists(run):
            raise DataError(f"{run}: an unfinished run where {dest} has a finished one; move it aside, then restore")
        else:
            todo.append(key)
    shared = SharedPaths(out).root
    runs_only = bool(manifest.get(MANIFEST_RUNS_ONLY))
    if runs_only:
        summary.shared = _prepare_for_runs(out, manifest, dest, say, mirror)
    elif shared.exists():
        difference, _ = compare_shared(shared, manifest[MANIFEST_SHARED], dest)
        if difference is not None:
            raise DataError(f"{shared} differs from the shared work archived in {dest} ({difference}): restore into "
                            "an empty folder (move this one aside)")
        summary.shared = "same"
    made: list[Path] = []  # what this restore wrote, removed if it fails
    try:
        if not runs_only and not shared.exists():
            summary.shared = _restore_shared(dest, out, manifest, made, say, train_predictor, remake)
        unpacked = []
        for key in todo:
            tmp = _unpack_beside(_run_tar(dest, key), runs_dir(out) / key, {}, made)
            remake_run(tmp, manifest[MANIFEST_RUNS][key].get("left_out") or {}, str(_run_tar(dest, key)))
            if _metrics_digest(tmp) != manifest[MANIFEST_RUNS][key]["metrics"]:
                raise DataError(f"{_run_tar(dest, key)}: its metrics.json does not match {MANIFEST} (the archive "
                                "changed during the restore?); nothing was restored")
            if runs_only:
                with atomic_open(tmp / SHARED_ORIGIN) as fh:
                    json.dump({**manifest[MANIFEST_RUNS][key][MANIFEST_SHARED], "archive": str(dest)}, fh, indent=1,
                              sort_keys=True)
                    fh.write("\n")
            unpacked.append((key, tmp))
        for key, tmp in unpacked:
            made.append(runs_dir(out) / key)
            os.replace(tmp, runs_dir(out) / key)
            summary.added.append(key)
            if (partial := partial_attention(manifest[MANIFEST_RUNS][key].get("left_out") or {})) is not None:
                summary.attention[key] = partial
        grids_dir(out).mkdir(parents=True, exist_ok=True)
        for grid in sorted(grids_dir(dest).glob("*")):
            if not os.path.lexists(grids_dir(out) / grid.name):
                made.append(grids_dir(out) / grid.name)
                with atomic_open(grids_dir(out) / grid.name) as fh:
                    fh.write(grid.read_text(encoding="utf-8"))
    except BaseException:
        for path in reversed(made):
            _remove(path)
        raise
    return summary


def _prepare_for_runs(out: Path, manifest: dict, dest: Path, say: Callable[[str], None], mirror: str | None) -> str:
    """An archive of runs only: prepare the data its runs read into ``out/shared/data``, as the grid's ``prepare``
    step does (skipped when done before), and check it against the manifest; returns the summary's ``shared``.
    Alignment and the fertility predictor are left to ``experiment run``.

    Raises:
        DataError: the data prepared is not the data of the archived runs.
    """
    from scanmt.experiments import shared as shared_steps

    record, paths = manifest[MANIFEST_SHARED], SharedPaths(out)
    corpus = record.get("corpus")
    if corpus:
        params = corpus["prepare"]
        shared_steps.prepare_data(paths, str(params["data"]), str(params["pair"]),
                                  mirror=mirror if mirror is not None else params.get("mirror"),
                                  vocab_size=params.get("vocab_size"), say=say)
    elif record.get("data"):
        shared_steps.prepare_data(paths, str(record["data"]["dir"]), None, mirror=None, vocab_size=None, say=say)
    else:
        raise DataError(f"{dest}/{MANIFEST}: records neither the corpus nor the prepared data its runs read (a "
                        "damaged manifest); nothing was restored")
    difference = corpus_difference(paths.root, corpus) or (
        None if mirrored_data(paths.root) == record.get("data") else f"{paths.data} mirrors other prepared data")
    if difference is not None:
        raise DataError(f"{dest}: {difference}; its runs would not be comparable with the archived ones (move "
                        f"{paths.root} aside and restore again); no run was restored")
    return ("not in the archive (runs only): data prepared, alignments and fertility predictor left to "
            "`experiment run`")


def _restore_shared(dest: Path, out: Path, manifest: dict, made: list[Path], say: Callable[[str], None],
                    train_predictor: Callable[..., object] | None, remake: Callable[[Path], str]) -> str:
    """Unpack ``shared.tar.gz`` into ``out/shared`` (recorded in ``made``), prepare the corpus again if it was left
    out, retrain the fertility predictor and check all against the manifest; returns the summary's ``shared``."""
    shared = SharedPaths(out).root
    tmp = _unpack_beside(dest / SHARED_TAR, shared, _mirror_links(manifest[MANIFEST_SHARED].get("data")), made)
    corpus = remake(tmp)
    made.append(shared)
    os.replace(tmp, shared)
    overrides = manifest[MANIFEST_SHARED].get("predictor_set")
    if overrides is not None:
        from scanmt.experiments import shared as shared_steps

        (train_predictor or shared_steps.train_predictor)(shared_steps.SharedPaths(out), overrides, say)
    difference, note = compare_shared(shared, manifest[MANIFEST_SHARED], dest)
    if difference is not None:
        raise DataError(f"{dest}: the alignments unpacked from {SHARED_TAR}, or the fertility predictor retrained "
                        f"from them, differ from those of the archived runs: {difference}; nothing was restored")
    return "restored" + (f", {corpus}" if corpus else "") + (
        f", fertility predictor retrained: {note}" if overrides is not None else "")
