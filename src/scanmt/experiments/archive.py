"""A grid's finished runs packed small enough for git, and restored on a fresh machine.

A grid of 3 seeds x 4 systems runs for longer than a machine may live: a cloud instance, a scratch
folder that is wiped, a session that ends.  Checkpoints are too large to keep, but what the report
reads is small.  ``scanmt experiment archive OUT --to DEST`` packs into ``DEST``::

    manifest.json          the experiment folder it came from, the digests of the prepared data it
                           mirrors, the identity of its shared work, and each archived run's digest
    shared.tar.gz          OUT/shared/: the alignments (eflomal cannot be seeded, so they cannot be made
                           again), the aligner models and the step markers; not the fertility predictor, a
                           model, which restore retrains from those alignments, nor the fertility caches,
                           which `run` recomputes; a mirrored data folder travels as its symbolic links,
                           checked by digest
    predictor-fertility.npy  what the predictor decides: its expected fertility of every source token of
                           the valid split.  Retraining is deterministic on one machine (the same weights)
                           but not across processors, whose arithmetic differs in the last bits; a
                           retrained predictor counts as the archived one when its fertilities are within
                           PREDICTOR_TOLERANCE of these
    grids/NAME.{yaml,json} the grid records
    runs/SYSTEM/seedK.tar.gz   each finished run (DONE) without its checkpoints (*.pt): spec, commands,
                           logs, metrics.csv, translations, metrics, stress test, and of the attention
                           files only seed 1's of the main split (the report's figures)

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
every tarball's members (:mod:`scanmt.experiments.archive_unpack`: relative regular files, and in
``shared.tar.gz`` only the mirrored data links ``data/NAME -> DIR/NAME``, so nothing is written outside
``OUT``), and each run's ``metrics.json`` against its digest.  It unpacks into temporary folders, checks them
again, renames them into place, and on a failure removes all it made: no run it unpacked is left ``DONE``.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import shutil
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from scanmt.data.fertility import file_digest
from scanmt.errors import ConfigError, DataError
from scanmt.experiments.archive_unpack import check_tarball, unpack
from scanmt.experiments.grid import NAME_RE
from scanmt.folder_swap import replacing_folder
from scanmt.io import LOCK_FILE, atomic_open
from scanmt.processes import lock_folder

FORMAT = 2
#: format 1 (session 19) recorded one digest of the alignments and the predictor's weights; it is read, and
#: upgraded by the next pack of the same shared work
READ_FORMATS = (1, 2)
MANIFEST = "manifest.json"
SHARED_TAR = "shared.tar.gz"
PREDICTOR_FERTILITIES = "predictor-fertility.npy"
#: the largest difference between the archived predictor's expected fertilities on the valid split and a
#: retrained one's for the two to count as one predictor.  Retrained on another processor the weights differ
#: in their last bits: at most 7.2e-7 apart on test2016's 14,294 tokens (Intel Xeon against AMD EPYC,
#: Multi30k De-En); a fertility bound 1e-3 higher moves at most 1e-3 of a token's attention
PREDICTOR_TOLERANCE = 1e-3
#: what of shared/ stays behind: the fertility predictor (a model, retrained from the archived alignments
#: on restore: its training is deterministic) and the fertility caches (recomputed from it by `run`), with
#: their step markers, so that `run` and `restore` redo them
LEFT_OUT_SHARED = ("predictor/", "data/fertility/", ".done/predictor.json", ".done/fertility-")
#: what shared/ holds that decides results: alignments and aligner models (the fertility caches follow
#: from them and the predictor)
IDENTITY_DIRS = ("data/align",)
PREDICTOR = "predictor/best.pt"


@dataclass
class ArchiveSummary:
    """What one pack or restore did."""

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    unfinished: list[str] = field(default_factory=list)
    shared: str = ""


# --------------------------------------------------------------------------- digests


def predictor_digest(path: Path) -> str:
    """Digest of a predictor checkpoint's weights and config (not of the file: its optimizer state may be gone)."""
    import torch

    ckpt = torch.load(path, map_location="cpu", weights_only=False)
    h = hashlib.sha256(json.dumps(ckpt.get("config"), sort_keys=True, default=str).encode())
    for name in sorted(ckpt["model"]):
        tensor = ckpt["model"][name]
        h.update(name.encode())
        h.update(tensor.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def _hash_alignments(h: "hashlib._Hash", shared: Path) -> None:
    for rel in IDENTITY_DIRS:
        base = shared / rel
        for p in sorted(base.rglob("*")) if base.is_dir() else []:
            if p.is_file() and not p.is_symlink() and p.name != LOCK_FILE:
                h.update(f"{p.relative_to(shared)}\0{file_digest(p)}\n".encode())


def alignments_digest(shared: Path) -> str:
    """Digest of every file under ``data/align`` (the alignments and the DROP aligner's models)."""
    h = hashlib.sha256()
    _hash_alignments(h, shared)
    return h.hexdigest()


def shared_identity(shared: Path) -> str:
    """Format 1's single digest of the alignments and the fertility predictor's weights (to read old archives)."""
    h = hashlib.sha256()
    _hash_alignments(h, shared)
    if (shared / PREDICTOR).exists():
        h.update(f"{PREDICTOR}\0{predictor_digest(shared / PREDICTOR)}\n".encode())
    return h.hexdigest()


def predictor_fertilities(shared: Path) -> "np.ndarray":
    """The fertility predictor's expected fertility (no ``add``) of every source token of the valid split,
    ``[N]`` float32, sentence after sentence: what a grid's bounds follow from."""
    import numpy as np
    import torch

    from scanmt.fertility.providers import PredictedFertility

    data = shared / "data"
    try:
        src_lang = json.loads((data / "meta.json").read_text(encoding="utf-8"))["src_lang"]
        lines = (data / f"valid.bpe.{src_lang}").read_text(encoding="utf-8").splitlines()
    except (OSError, KeyError, TypeError, json.JSONDecodeError) as exc:
        raise DataError(f"{data}: the valid split's source, on which the fertility predictor is checked, cannot be "
                        f"read ({type(exc).__name__}: {exc})") from None
    ckpt = torch.load(shared / PREDICTOR, map_location="cpu", weights_only=False)
    provider = PredictedFertility.from_checkpoint_state(ckpt, add=0.0)
    expected = provider.expected([line.split() for line in lines if line.strip()])
    return np.asarray([e for sentence in expected for e in sentence], dtype=np.float32)


def shared_record(shared: Path, dest: Path) -> dict[str, object]:
    """The manifest's ``shared`` entry of ``shared``, writing the predictor's fertilities into ``dest``."""
    import numpy as np

    record: dict[str, object] = {"alignments": alignments_digest(shared), "predictor": None,
                                 "data": mirrored_data(shared), "predictor_set": predictor_overrides(shared)}
    if (shared / PREDICTOR).exists():
        fertilities = predictor_fertilities(shared)
        with atomic_open(dest / PREDICTOR_FERTILITIES, "wb") as fh:
            np.save(fh, fertilities)
        record["predictor"] = {"weights": predictor_digest(shared / PREDICTOR), "fertilities": PREDICTOR_FERTILITIES,
                               "tokens": int(fertilities.size), "tolerance": PREDICTOR_TOLERANCE}
    return record


def compare_shared(shared: Path, recorded: dict, dest: Path) -> tuple[str | None, str]:
    """``(difference, note)``: what makes ``shared`` another shared work than the archived one (None: none),
    and how its predictor matched ("the same weights", or the largest fertility difference)."""
    import numpy as np

    if "identity" in recorded:  # format 1: one digest, bitwise
        same = shared_identity(shared) == recorded["identity"]
        return (None if same else "the alignments or the fertility predictor's weights differ"), "the same weights"
    if alignments_digest(shared) != recorded["alignments"]:
        return "the alignments differ (aligned afresh? eflomal cannot be seeded)", ""
    predictor, have = recorded.get("predictor"), (shared / PREDICTOR).exists()
    if predictor is None or not have:
        return (None, "") if predictor is None and not have else (
            "one has a fertility predictor and the other none", "")
    if predictor_digest(shared / PREDICTOR) == predictor["weights"]:
        return None, "the same weights"
    try:
        archived = np.load(dest / predictor["fertilities"])
    except (OSError, ValueError) as exc:
        raise DataError(f"{dest / predictor['fertilities']}: the archived predictor's fertilities cannot be read "
                        f"({type(exc).__name__}: {exc})") from None
    here = predictor_fertilities(shared)
    if here.shape != archived.shape:
        return (f"the fertility predictor scores {here.size} valid tokens, the archived one {archived.size} "
                "(other prepared data?)"), ""
    gap = float(np.abs(here.astype(np.float64) - archived).max(initial=0.0))
    tolerance = float(predictor.get("tolerance", PREDICTOR_TOLERANCE))
    note = f"other weights, the same fertilities: largest difference {gap:.1e} over {here.size} valid tokens"
    if gap > tolerance:
        return (f"the fertility predictor's expected fertilities on the valid split differ by up to {gap:.3g} "
                f"(tolerance {tolerance:g})"), ""
    return None, note


def mirrored_data(shared: Path) -> dict[str, object] | None:
    """``{"dir": prepared data folder, "files": {name: sha256}}`` of a mirrored data folder (``--data PATH``),
    None when the data was prepared inside the experiment (its files then travel in ``shared.tar.gz``).

    ``spm.model`` is left out: sentencepiece writes the paths of its training files into it, so two
    preparations of the same data differ there only (the pieces and scores are equal; checked on Multi30k
    De-En); the subword files themselves are compared."""
    origin = shared / "data" / ".mirror-of"
    if not origin.exists():
        return None
    src = Path(origin.read_text(encoding="utf-8").strip())
    files = {}
    for link in sorted((shared / "data").iterdir()):
        if link.is_symlink() and link.name != "spm.model":
            target = Path(os.readlink(link))
            if target.is_file():
                files[link.name] = file_digest(target)
    return {"dir": str(src), "files": files}


def check_data(recorded: dict[str, object], where: str) -> None:
    """Raise :class:`DataError` unless the prepared data the archive mirrors is there, unchanged."""
    src, files = Path(str(recorded.get("dir"))), recorded.get("files")
    if not isinstance(files, dict):
        raise DataError(f"{where}/{MANIFEST}: its prepared data has no file digests (a damaged manifest)")
    if not src.is_dir():
        raise DataError(f"{where}: its runs read the prepared data in {src}, which is missing: prepare it there "
                        f"first (`scanmt prepare ... --out {src}`, as in the runs' command.txt)")
    for name, digest in files.items():
        p = src / name
        if not p.is_file():
            raise DataError(f"{where}: {p} is missing from the prepared data its runs read")
        if file_digest(p) != digest:
            raise DataError(f"{where}: {p} differs from the file its runs read (sha256 {digest[:12]}…): the data "
                            "was prepared with other settings or another corpus version")


# --------------------------------------------------------------------------- tar files


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


def _shared_left_behind(rel: Path) -> bool:
    return rel.name == LOCK_FILE or rel.as_posix().startswith(LEFT_OUT_SHARED)


def predictor_overrides(shared: Path) -> list[str] | None:
    """The ``--set`` overrides the grid trained its fertility predictor with (its step marker's command line),
    None when it has none.

    Raises:
        DataError: a predictor without a readable step marker (it could not be retrained the same way).
    """
    marker = shared / ".done" / "predictor.json"
    if not marker.exists():
        if (shared / PREDICTOR).exists():
            raise DataError(f"{shared / PREDICTOR}: no step marker {marker}, so it cannot be retrained on restore")
        return None
    try:
        argv = json.loads(marker.read_text(encoding="utf-8"))["params"]["argv"]
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as exc:
        raise DataError(f"{marker}: not a readable step marker ({exc})") from None
    overrides, in_set = [], False
    for word in argv:  # `--set A B C` (the request's tuple), up to the next option
        if word.startswith("--"):
            in_set = word == "--set"
        elif in_set:
            overrides.append(word)
    return overrides


def _files(root: Path, skip: Callable[[Path], bool]) -> list[tuple[str, Path, os.stat_result]]:
    out = []
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if skip(rel) or not (p.is_symlink() or p.is_file()):
            continue
        out.append((rel.as_posix(), p, p.lstat()))
    return out


# --------------------------------------------------------------------------- manifest


def read_manifest(dest: Path) -> dict | None:
    p = dest / MANIFEST
    if not p.exists():
        return None
    try:
        m = json.loads(p.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"{p}: not a readable archive manifest ({exc})") from None
    if not isinstance(m, dict) or m.get("format") not in READ_FORMATS:
        raise DataError(f"{p}: not a scanmt experiment archive of format {' or '.join(map(str, READ_FORMATS))}")
    return m


def _write_manifest(dest: Path, manifest: dict) -> None:
    with atomic_open(dest / MANIFEST) as fh:
        json.dump(manifest, fh, indent=1, sort_keys=True)
        fh.write("\n")


def finished_runs(out: Path) -> list[Path]:
    """The run folders of ``out`` that finished (``DONE``), as ``runs/SYSTEM/seedK``."""
    base = out / "runs"
    return sorted(p.parent for p in base.glob("*/seed*/DONE")) if base.is_dir() else []


def _left_behind(run: Path) -> Callable[[Path], bool]:
    """What of a run folder is not packed: checkpoints, lock files, and every attention file but seed 1's of
    the main split, the one the report draws its figures from (1.5-1.8 MB each for a Transformer)."""
    from scanmt.experiments.runner import read_json

    spec = read_json(run / "spec.json") or {}
    figure = f"{spec.get('split') or 'test'}.attn.npz" if run.name == "seed1" else None

    def skip(rel: Path) -> bool:
        if rel.suffix == ".pt" or rel.name == LOCK_FILE:
            return True
        return rel.name.endswith(".attn.npz") and rel.as_posix() != figure

    return skip


def _run_key(run: Path) -> str:
    return f"{run.parent.name}/{run.name}"


# --------------------------------------------------------------------------- pack


def pack(out: Path, dest: Path) -> ArchiveSummary:
    """Add the finished runs of the experiment folder ``out`` to the archive ``dest`` (made if missing), as a
    whole: the new archive is written beside ``dest`` and swapped in (:func:`scanmt.folder_swap.replacing_folder`).

    Raises:
        ConfigError: ``dest`` is not a folder, or a folder with files that is not an archive (no manifest.json).
        DataError: ``out`` is not an experiment folder, its shared work differs from the archive's, it was packed
            from another folder than the archive's, or the archive holds a symbolic link.
        BusyError: another process has been packing an archive beside ``dest`` for 10 minutes.
    """
    out = out.resolve()
    shared = out / "shared"
    if not shared.is_dir() or not (out / "grids").is_dir():
        raise DataError(f"{out}: not a scanmt experiment folder (no shared/ and grids/)")
    with replacing_folder(dest, what="--to", check=_check_archive_folder) as staging:
        return _pack_into(out, dest, staging)


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


def _pack_into(out: Path, dest: Path, staging: Path) -> ArchiveSummary:
    """:func:`pack`, reading the archive ``dest`` and writing its new version into ``staging`` (a copy of it)."""
    shared = out / "shared"
    manifest = read_manifest(dest) or {"format": FORMAT, "out": str(out), "runs": {}}
    if manifest["out"] != str(out):
        raise DataError(f"{dest} archives the experiment {manifest['out']}, not {out}: its runs name that folder "
                        "in their files; restore it there (`scanmt experiment restore`) and run the grid there")
    summary = ArchiveSummary()
    if manifest.get("shared") is None:
        _deterministic_tar(staging / SHARED_TAR, list(_files(shared, _shared_left_behind)))
        manifest["shared"] = shared_record(shared, staging)
        summary.shared = "packed"
    else:
        difference, note = compare_shared(shared, manifest["shared"], dest)
        if difference is not None:
            raise DataError(
                f"{out}/shared differs from the shared work archived in {dest}: {difference}; runs trained on it "
                "are not comparable with the archived ones. Restore the archive into an empty folder first "
                f"(`scanmt experiment restore {dest} --out {out}`)")
        summary.shared = "same" + (f" (fertility predictor: {note})" if note.startswith("other") else "")
        if manifest["format"] != FORMAT:  # format 1, the same shared work: record it the new way
            record = shared_record(shared, staging)
            manifest["shared"] = {**record, "data": manifest["shared"]["data"]}
            manifest["format"] = FORMAT
            summary.shared += f", manifest upgraded to format {FORMAT}"
    for grid in sorted((out / "grids").glob("*")):
        if grid.suffix in (".json", ".yaml"):
            (staging / "grids").mkdir(parents=True, exist_ok=True)
            with atomic_open(staging / "grids" / grid.name) as fh:
                fh.write(grid.read_text(encoding="utf-8"))
    for run in finished_runs(out):
        key = _run_key(run)
        digest = _metrics_digest(run)
        known = manifest["runs"].get(key)
        if known is not None and known["metrics"] == digest:
            summary.kept.append(key)
            continue
        tar = _run_tar(staging, key)
        tar.parent.mkdir(parents=True, exist_ok=True)
        _deterministic_tar(tar, list(_files(run, _left_behind(run))))
        manifest["runs"][key] = {"metrics": digest, "size": tar.stat().st_size,
                                 "packed": time.strftime("%Y-%m-%d %H:%M:%S")}
        (summary.updated if known is not None else summary.added).append(key)
    summary.unfinished = sorted(_run_key(p) for p in (out / "runs").glob("*/seed*")
                                if p.is_dir() and not (p / "DONE").exists()) if (out / "runs").is_dir() else []
    _write_manifest(staging, manifest)
    return summary


def _metrics_digest(run: Path) -> str:
    """The digest of a run folder's ``metrics.json`` ("" when it has none), as the manifest records it."""
    return file_digest(run / "metrics.json") if (run / "metrics.json").exists() else ""


def _run_tar(dest: Path, key: str) -> Path:
    system, seed = key.split("/")
    return dest / "runs" / system / f"{seed}.tar.gz"


# --------------------------------------------------------------------------- restore


def restore(dest: Path, out: Path, say: Callable[[str], None] = print,
            train_predictor: Callable[..., object] | None = None) -> ArchiveSummary:
    """Unpack the archive ``dest`` into the experiment folder ``out`` (its recorded place), and retrain the
    grid's fertility predictor from the archived alignments (``train_predictor``: default
    :func:`scanmt.experiments.shared.train_predictor`; about 40 s on one CPU thread for Multi30k).

    Runs already finished in ``out`` are kept; shared work already in ``out`` must be the archive's.  The whole
    archive is checked before anything is written (:func:`check_archive`); a restore that fails removes all it
    made.

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
    if not isinstance(manifest.get("shared"), dict):
        raise DataError(f"{dest}/{MANIFEST}: records no shared work")
    if manifest["shared"].get("data"):
        check_data(manifest["shared"]["data"], str(dest))
    keys = check_archive(dest, manifest)
    out.mkdir(parents=True, exist_ok=True)
    with lock_folder(out, what="--out"):
        return _restore_into(dest, out, manifest, keys, say, train_predictor)


#: a run's key in the manifest: its system's name (a grid's, :data:`scanmt.experiments.grid.NAME_RE`) and seed
SEED_RE = re.compile(r"seed[0-9]+")


def check_archive(dest: Path, manifest: dict) -> list[str]:
    """The run keys of the archive ``dest`` (sorted), after reading all of it and writing nothing: each key is
    ``SYSTEM/seedK``, each tarball holds only what :func:`scanmt.experiments.archive_unpack.check_members`
    allows, each run's ``metrics.json`` has the manifest's digest, and the grid records are files.

    Raises:
        DataError: naming the first key, tarball, member or file that is not as ``pack`` writes it.
    """
    runs = manifest.get("runs")
    if not isinstance(runs, dict):
        raise DataError(f"{dest}/{MANIFEST}: no table of runs (a damaged manifest); nothing was restored")
    for key, entry in runs.items():
        system, _, seed = key.partition("/")
        if not (NAME_RE.fullmatch(system) and SEED_RE.fullmatch(seed)):
            raise DataError(f"{dest}/{MANIFEST}: run {key!r} is not SYSTEM/seedK (a damaged or crafted manifest); "
                            "nothing was restored")
        if not isinstance(entry, dict) or not isinstance(entry.get("metrics"), str):
            raise DataError(f"{dest}/{MANIFEST}: run {key!r} records no digest of its metrics.json (a damaged "
                            "manifest); nothing was restored")
    check_tarball(dest / SHARED_TAR, _mirror_links(manifest["shared"].get("data")))
    for key in sorted(runs):
        if (check_tarball(_run_tar(dest, key), {}, "metrics.json") or "") != runs[key]["metrics"]:
            raise DataError(f"{_run_tar(dest, key)}: its metrics.json does not match {MANIFEST} (a tarball of "
                            "another pack?); nothing was restored")
    for grid in sorted((dest / "grids").glob("*")):
        if grid.is_symlink() or not grid.is_file():
            raise DataError(f"{grid}: not a file, as a grid record of an archive is; nothing was restored")
    return sorted(runs)


def _mirror_links(data: dict | None) -> dict[str, str]:
    """The symbolic links ``shared.tar.gz`` may hold: ``data/NAME -> DIR/NAME`` for each file NAME of the mirrored
    prepared data ``DIR`` (none when the data was prepared inside the experiment)."""
    if not data:
        return {}
    src = str(data["dir"])
    return {f"data/{p.name}": os.path.join(src, p.name) for p in Path(src).iterdir() if p.is_file()}


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        path.unlink()


def _unpack_beside(tar_path: Path, final: Path, links: dict[str, str], made: list[Path]) -> Path:
    """Unpack ``tar_path`` into ``.NAME.restoring`` beside ``final`` (one a killed restore left is replaced),
    recorded in ``made``; returns it."""
    tmp = final.parent / f".{final.name}.restoring"
    _remove(tmp)
    final.parent.mkdir(parents=True, exist_ok=True)
    made.append(tmp)
    unpack(tar_path, tmp, links)
    return tmp


def _restore_into(dest: Path, out: Path, manifest: dict, keys: list[str], say: Callable[[str], None],
                  train_predictor: Callable[..., object] | None) -> ArchiveSummary:
    summary = ArchiveSummary()
    todo = []
    for key in keys:
        run = out / "runs" / key
        if (run / "DONE").exists():
            summary.kept.append(key)
        elif os.path.lexists(run):
            raise DataError(f"{run}: an unfinished run where {dest} has a finished one; move it aside, then restore")
        else:
            todo.append(key)
    shared = out / "shared"
    if shared.exists():
        difference, _ = compare_shared(shared, manifest["shared"], dest)
        if difference is not None:
            raise DataError(f"{shared} differs from the shared work archived in {dest} ({difference}): restore into "
                            "an empty folder (move this one aside)")
        summary.shared = "same"
    made: list[Path] = []  # what this restore wrote, removed if it fails
    try:
        if not shared.exists():
            summary.shared = _restore_shared(dest, out, manifest, made, say, train_predictor)
        unpacked = []
        for key in todo:
            tmp = _unpack_beside(_run_tar(dest, key), out / "runs" / key, {}, made)
            if _metrics_digest(tmp) != manifest["runs"][key]["metrics"]:
                raise DataError(f"{_run_tar(dest, key)}: its metrics.json does not match {MANIFEST} (the archive "
                                "changed during the restore?); nothing was restored")
            unpacked.append((key, tmp))
        for key, tmp in unpacked:
            made.append(out / "runs" / key)
            os.replace(tmp, out / "runs" / key)
            summary.added.append(key)
        (out / "grids").mkdir(parents=True, exist_ok=True)
        for grid in sorted((dest / "grids").glob("*")):
            if not os.path.lexists(out / "grids" / grid.name):
                made.append(out / "grids" / grid.name)
                with atomic_open(out / "grids" / grid.name) as fh:
                    fh.write(grid.read_text(encoding="utf-8"))
    except BaseException:
        for path in reversed(made):
            _remove(path)
        raise
    return summary


def _restore_shared(dest: Path, out: Path, manifest: dict, made: list[Path], say: Callable[[str], None],
                    train_predictor: Callable[..., object] | None) -> str:
    """Unpack ``shared.tar.gz`` into ``out/shared`` (recorded in ``made``), retrain the fertility predictor and
    check both against the manifest; returns the summary's ``shared``."""
    shared = out / "shared"
    tmp = _unpack_beside(dest / SHARED_TAR, shared, _mirror_links(manifest["shared"].get("data")), made)
    made.append(shared)
    os.replace(tmp, shared)
    overrides = manifest["shared"].get("predictor_set")
    if overrides is not None:
        from scanmt.experiments import shared as shared_steps

        (train_predictor or shared_steps.train_predictor)(shared_steps.SharedPaths(out), overrides, say)
    difference, note = compare_shared(shared, manifest["shared"], dest)
    if difference is not None:
        raise DataError(f"{dest}: the alignments unpacked from {SHARED_TAR}, or the fertility predictor retrained "
                        f"from them, differ from those of the archived runs: {difference}; nothing was restored")
    return "restored" + (f", fertility predictor retrained: {note}" if overrides is not None else "")
