"""The identity of an experiment folder's shared work, as an archive records and checks it: the digests of the
alignments and of the fertility predictor, the predictor's expected fertilities on the valid split, the prepared
data a mirrored data folder links to, the corpus text a grid prepared itself, and the overrides the predictor was
trained with."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from scanmt.data.fertility import file_digest
from scanmt.errors import DataError
from scanmt.experiments.archive.corpus import corpus_difference, corpus_record
from scanmt.experiments.layout import (DATA_META, IDENTITY_DIRS, LEFT_OUT_SHARED, LOCK_FILE, MANIFEST, MIRROR_ORIGIN,
                                       PREDICTOR, PREDICTOR_FERTILITIES, SHARED_ORIGIN, bpe_name, shared_data,
                                       shared_marker)
from scanmt.io import atomic_open


#: the largest difference between the archived predictor's expected fertilities on the valid split and a
#: retrained one's for the two to count as one predictor.  Retrained on another processor the weights differ
#: in their last bits: at most 7.2e-7 apart on test2016's 14,294 tokens (Intel Xeon against AMD EPYC,
#: Multi30k De-En); a fertility bound 1e-3 higher moves at most 1e-3 of a token's attention
PREDICTOR_TOLERANCE = 1e-3


def finished_predictor(shared: Path) -> Path | None:
    """``shared``'s fertility predictor (``OUT/shared/predictor/best.pt``) once its step finished, else None.

    The trainer writes ``best.pt`` at each validation and the step marker only at its end, so a predictor
    without its marker is a step still running (a queue packs every 10 minutes) or one that was killed: no run
    trained on it, since the runs that need a predictor start after its step, and its weights are not the ones
    the grid will use.  Packing treats it as absent."""
    path = shared / PREDICTOR
    return path if path.exists() and shared_marker(shared, "predictor").exists() else None


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
    if (predictor := finished_predictor(shared)) is not None:
        h.update(f"{PREDICTOR}\0{predictor_digest(predictor)}\n".encode())
    return h.hexdigest()


def predictor_fertilities(shared: Path) -> "np.ndarray":
    """The fertility predictor's expected fertility (no ``add``) of every source token of the valid split,
    ``[N]`` float32, sentence after sentence: what a grid's bounds follow from."""
    import numpy as np
    import torch

    from scanmt.fertility.providers import PredictedFertility

    data = shared_data(shared)
    try:
        src_lang = json.loads((data / DATA_META).read_text(encoding="utf-8"))["src_lang"]
        lines = (data / bpe_name("valid", src_lang)).read_text(encoding="utf-8").splitlines()
    except (OSError, KeyError, TypeError, json.JSONDecodeError) as exc:
        raise DataError(f"{data}: the valid split's source, on which the fertility predictor is checked, cannot be "
                        f"read ({type(exc).__name__}: {exc})") from None
    ckpt = torch.load(shared / PREDICTOR, map_location="cpu", weights_only=False)
    provider = PredictedFertility.from_checkpoint_state(ckpt, add=0.0)
    expected = provider.expected([line.split() for line in lines if line.strip()])
    return np.asarray([e for sentence in expected for e in sentence], dtype=np.float32)


def shared_record(shared: Path, dest: Path | None) -> dict[str, object]:
    """The manifest's ``shared`` entry of ``shared``, writing the predictor's fertilities into ``dest``: the
    alignments' digest, the predictor's, the mirrored data's files, the predictor's overrides, and the corpus text
    the archive leaves out (:func:`scanmt.experiments.archive.corpus.corpus_record`).  With ``dest`` None (an
    archive of runs only, which restores no shared work and so checks no predictor) the predictor's entry is its
    digest alone."""
    import numpy as np

    record: dict[str, object] = {"alignments": alignments_digest(shared), "predictor": None,
                                 "data": mirrored_data(shared), "predictor_set": predictor_overrides(shared),
                                 "corpus": corpus_record(shared)}
    predictor = finished_predictor(shared)
    if predictor is not None and dest is None:
        record["predictor"] = {"weights": predictor_digest(predictor)}
    elif predictor is not None:
        fertilities = predictor_fertilities(shared)
        with atomic_open(dest / PREDICTOR_FERTILITIES, "wb") as fh:
            np.save(fh, fertilities)
        record["predictor"] = {"weights": predictor_digest(predictor), "fertilities": PREDICTOR_FERTILITIES,
                               "tokens": int(fertilities.size), "tolerance": PREDICTOR_TOLERANCE}
    return record


def trained_on(record: dict) -> dict[str, str | None]:
    """The identity of the shared work of a ``shared`` record (:func:`shared_record`), as an archive of runs only
    records it for each run and :data:`~scanmt.experiments.layout.SHARED_ORIGIN` holds it: the alignments' digest
    and the fertility predictor's (None: no predictor)."""
    predictor = record.get("predictor")
    return {"alignments": str(record["alignments"]),
            "predictor": str(predictor["weights"]) if isinstance(predictor, dict) else None}


def folder_trained_on(shared: Path) -> dict[str, str | None]:
    """:func:`trained_on` of the shared work in the folder ``shared`` (``OUT/shared``), read from its files."""
    predictor = finished_predictor(shared)
    return {"alignments": alignments_digest(shared),
            "predictor": predictor_digest(predictor) if predictor is not None else None}


def read_origin(run: Path) -> dict[str, str | None] | None:
    """The shared work a restored run trained on (:data:`~scanmt.experiments.layout.SHARED_ORIGIN`, with the
    archive it came from), None when the run has no such record (it trained on its folder's shared work).

    Raises:
        DataError: the record cannot be read.
    """
    path = run / SHARED_ORIGIN
    if not path.exists():
        return None
    try:
        origin = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(origin, dict) or not isinstance(origin.get("alignments"), str):
            raise TypeError("no alignments digest")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, TypeError) as exc:
        raise DataError(f"{path}: not a readable record of the shared work this run trained on ({exc})") from None
    return origin


def predictor_added(shared: Path, recorded: dict) -> bool:
    """Whether ``shared`` is the archived shared work with a fertility predictor trained since it was packed: the
    archive recorded none, and the alignments and the mirrored data are the same.  The grid went on (a queue packs
    every few minutes, and the predictor's step comes after the runs that need none); nothing that the archived
    runs read changed."""
    return ("identity" not in recorded and recorded.get("predictor") is None
            and finished_predictor(shared) is not None and alignments_digest(shared) == recorded["alignments"]
            and mirrored_data(shared) == recorded.get("data"))


def compare_shared(shared: Path, recorded: dict, dest: Path) -> tuple[str | None, str]:
    """``(difference, note)``: what makes ``shared`` another shared work than the archived one (None: none):
    its alignments, its corpus text (:func:`~scanmt.experiments.archive.corpus.corpus_difference`) or its
    fertility predictor; and how the predictor matched ("the same weights", or the largest fertility
    difference)."""
    import numpy as np

    if "identity" in recorded:  # format 1: one digest, bitwise
        same = shared_identity(shared) == recorded["identity"]
        return (None if same else "the alignments or the fertility predictor's weights differ"), "the same weights"
    if alignments_digest(shared) != recorded["alignments"]:
        return "the alignments differ (aligned afresh? eflomal cannot be seeded)", ""
    corpus = corpus_difference(shared, recorded.get("corpus"))
    if corpus is not None:
        return corpus, ""
    predictor, have = recorded.get("predictor"), finished_predictor(shared) is not None
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
    origin = shared_data(shared) / MIRROR_ORIGIN
    if not origin.exists():
        return None
    src = Path(origin.read_text(encoding="utf-8").strip())
    files = {}
    for link in sorted(shared_data(shared).iterdir()):
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


def _shared_left_behind(rel: Path) -> bool:
    return rel.name == LOCK_FILE or rel.as_posix().startswith(LEFT_OUT_SHARED)


def predictor_overrides(shared: Path) -> list[str] | None:
    """The ``--set`` overrides the grid trained its fertility predictor with (its step marker's command line),
    None when it has no finished predictor (:func:`finished_predictor`).

    Raises:
        DataError: a finished predictor whose step marker cannot be read (it could not be retrained the same way).
    """
    if finished_predictor(shared) is None:
        return None
    marker = shared_marker(shared, "predictor")
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
