"""Trimming an archive in place (``scanmt experiment trim``): the attention files that no report of its grids
draws, left out of its run tarballs without the run folders.

An archive packed before the packer left them out (:func:`scanmt.experiments.archive.packing.kept_attention`:
seed 1's attention of the main split, of the systems of the grids' figure pairs only) carries one dense attention
file per system's seed 1, a megabyte or more each, which no report reads.  Its run folders may be gone with their
machine, so :func:`trim` works on the archive alone: each tarball holding such a file is written again without it
(its other members as they were, byte for byte, with their times), and its manifest entry loses the file's
``left_out`` record (the source tokens restore would have added back) and records its new size.  The runs'
``metrics.json`` and its digest are not touched, so a later pack from the run folders keeps the trimmed runs.
The archive is replaced as a whole (:func:`scanmt.folder_swap.replacing_folder`), as a pack replaces it.
"""

from __future__ import annotations

import json
import shutil
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from scanmt.errors import DataError
from scanmt.experiments.archive.manifest import _run_tar, _write_manifest, read_manifest
from scanmt.experiments.archive.packing import (_check_archive_folder, _deterministic_tar, _files, figure_systems,
                                                kept_attention)
from scanmt.experiments.archive.restoring import is_run_key
from scanmt.experiments.archive.unpack import check_members, unpack
from scanmt.experiments.layout import ATTENTION_SUFFIX, MANIFEST, MANIFEST_RUNS, SPEC, stripped_dir
from scanmt.folder_swap import replacing_folder


@dataclass
class TrimSummary:
    """What one trim did: for each run written again, the files it left out and its tarball's sizes (bytes)."""

    trimmed: dict[str, tuple[list[str], int, int]] = field(default_factory=dict)
    runs: int = 0


def _undrawn(tar_path: Path, key: str, figure: frozenset[str] | None) -> list[str]:
    """The attention files of the run tarball ``tar_path`` (run ``key``, ``SYSTEM/seedK``) that no report of the
    archive's grids draws (:func:`kept_attention`, the split from the run's ``spec.json``).

    Raises:
        DataError: the tarball is unreadable, holds an unexpected member, or its ``spec.json`` is not a JSON
            object.
    """
    system, seed = key.split("/")
    try:
        with tarfile.open(tar_path, "r:gz") as tar:
            members = tar.getmembers()
            check_members(tar_path, members, {})
            attention = [m.name for m in members if m.name.endswith(ATTENTION_SUFFIX)]
            if not attention:
                return []
            spec_member = next((m for m in members if m.name == SPEC), None)
            spec = json.loads(tar.extractfile(spec_member).read()) if spec_member is not None else {}  # type: ignore[union-attr]
    except (tarfile.TarError, EOFError, OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{tar_path}: cannot be read ({type(exc).__name__}: {exc})") from None
    if not isinstance(spec, dict):
        raise DataError(f"{tar_path}: its {SPEC} is not a JSON object")
    kept = kept_attention(system, seed, spec.get("split") or "test", figure)
    return [name for name in attention if name != kept]


def _plan(dest: Path) -> tuple[dict, dict[str, list[str]]]:
    """The manifest of the archive ``dest`` and, by run key, the attention files :func:`trim` leaves out.

    Raises:
        DataError: ``dest`` is not an archive (no manifest.json), a run's key is not ``SYSTEM/seedK``, or as
            :func:`_undrawn`.
    """
    manifest = read_manifest(dest)
    if manifest is None:
        raise DataError(f"{dest}: not an archive of `scanmt experiment archive` (no {MANIFEST})")
    if not isinstance(manifest.get(MANIFEST_RUNS), dict):
        raise DataError(f"{dest}/{MANIFEST}: no table of runs (a damaged manifest); nothing was trimmed")
    crafted = next((key for key in manifest[MANIFEST_RUNS] if not is_run_key(key)), None)
    if crafted is not None:
        raise DataError(f"{dest}/{MANIFEST}: run {crafted!r} is not SYSTEM/seedK (a damaged or crafted manifest); "
                        "nothing was trimmed")
    figure = figure_systems(dest)
    plan = {key: drop for key in sorted(manifest[MANIFEST_RUNS])
            if (drop := _undrawn(_run_tar(dest, key), key, figure))}
    return manifest, plan


def trim(dest: Path, *, dry_run: bool = False) -> TrimSummary:
    """Leave out of the archive ``dest`` the attention files no report of its grids draws (module docstring);
    with ``dry_run`` only say which (the summary's sizes after are then 0), writing nothing.  An archive with
    none is left as it is.

    Raises:
        DataError: ``dest`` is not an archive (no manifest.json), a run's key is not ``SYSTEM/seedK``, a run
            tarball is unreadable or lists an unexpected member, or the archive holds a symbolic link.
        BusyError: another process has been packing an archive beside ``dest`` for 10 minutes.
    """
    manifest, plan = _plan(dest)
    summary = TrimSummary(runs=len(manifest[MANIFEST_RUNS]))
    if dry_run or not plan:
        summary.trimmed = {key: (drop, _run_tar(dest, key).stat().st_size, 0) for key, drop in plan.items()}
        return summary
    with replacing_folder(dest, what="archive", check=_check_archive_folder) as staging:
        manifest, plan = _plan(dest)  # (again under the lock: a pack may have changed the archive since)
        for key, drop in plan.items():
            archived, tar_path = _run_tar(dest, key), _run_tar(staging, key)  # (read in dest, for its errors)
            before = archived.stat().st_size
            scratch = stripped_dir(staging, key)
            try:
                unpack(archived, scratch, {})
                _deterministic_tar(tar_path, _files(scratch, lambda rel: rel.as_posix() in drop))
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
            entry = manifest[MANIFEST_RUNS][key]
            entry["size"] = tar_path.stat().st_size
            entry["left_out"] = {name: how for name, how in entry.get("left_out", {}).items() if name not in drop}
            entry["trimmed"] = time.strftime("%Y-%m-%d %H:%M:%S")
            summary.trimmed[key] = (drop, before, entry["size"])
        if summary.trimmed:
            _write_manifest(staging, manifest)
    return summary
