"""``scanmt prepare``: raw parallel text -> tokenized text, joint BPE, vocabulary, encoded splits.

Output directory layout (all files written atomically; they are built in a temporary folder,
``.NAME.tmp.PID.*`` beside it, and moved in, ``meta.json`` last; a later run removes the temporary
folder of a killed one).  A prepare holds the folder's lock (``.lock``, :func:`scanmt.processes.lock_folder`)
from the end of its input checks until its files are in place, so that a second one into the same
folder, or one that would reuse the preparation being written, fails naming it::

    meta.json                {"src_lang", "tgt_lang", "vocab_size", "splits": [...], "sources": {...},
                              "files": [every file name written here]}; with --max-train-words also
                              "max_train_words" and "train_filter": {"read", "kept"}; for a language
                              not tokenized by Moses "tokenizers": {lang: name}
    spm.model, spm.vocab     joint sentencepiece BPE model (learned on train, both sides)
    vocab.txt                NMT vocabulary (specials first), shared by both sides
    {split}.raw.{lang}       the original lines (train: the pairs the filter kept)
    {split}.tok.{lang}       words (:mod:`scanmt.data.tokenize`: Moses, or the language's own tokenizer)
    {split}.bpe.{lang}       space-separated subword pieces (never across words)
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from scanmt.data.subword import SubwordModel, train_subword_model
from scanmt.data.tokenize import tokenize, tokenizer_name
from scanmt.data.vocab import Vocab
from scanmt.errors import DataError
from scanmt.processes import check_unlocked, lock_folder
from scanmt.io import (at_destination, atomic_open, check_output_dir, check_parallel, make_temp_dir, read_json,
                       read_lines, remove_stale_temp_dirs, write_lines)

log = logging.getLogger(__name__)


@dataclass
class SplitFiles:
    """Raw source and target files of one split."""

    src: Path
    tgt: Path


#: a language code, as it enters file names (``train.bpe.de``): letters, optionally ``_`` and a region or script
#: tag of letters and digits (``pt_BR``, ``zh_Hans``); no ``-`` (it separates the pair ``de-en``), ``.`` or ``/``
LANGUAGE_CODE = re.compile(r"[A-Za-z]{1,8}(?:_[A-Za-z0-9]{1,8})?")


def check_languages(src_lang: str, tgt_lang: str, option: str = "--pair") -> None:
    """Raise :class:`DataError` naming ``option`` unless both are language codes (:data:`LANGUAGE_CODE`) and
    differ (ignoring case: one folder holds ``train.bpe.de`` and ``train.bpe.DE``, the same file on some disks)."""
    for code in (src_lang, tgt_lang):
        if not isinstance(code, str) or not LANGUAGE_CODE.fullmatch(code):
            raise DataError(f"{option} {src_lang}-{tgt_lang}: {code!r} is not a language code (letters, optionally "
                            "_ and a region tag of letters and digits, such as de, en, pt_BR)")
    if src_lang.lower() == tgt_lang.lower():
        raise DataError(f"{option} {src_lang}-{tgt_lang}: the source and target language are the same; their files "
                        f"would be one (train.raw.{src_lang})")


def read_meta(data_dir: str | Path) -> dict:
    """``meta.json`` of a prepared data directory, validated."""
    path = Path(data_dir) / "meta.json"
    meta = read_json(
        path, missing=f"{data_dir}: not a prepared data directory (no meta.json); run `scanmt prepare` first"
    )
    for key in ("src_lang", "tgt_lang"):
        if not isinstance(meta.get(key), str):
            raise DataError(f"{path}: missing {key!r}")
    return meta


def training_digest(data_dir: str | Path, src_lang: str, tgt_lang: str) -> str:
    """SHA-256 over the prepared files an NMT run trains and validates on (the same data in another folder
    has the same digest)."""
    names = ["vocab.txt", "spm.model", f"train.bpe.{src_lang}", f"train.bpe.{tgt_lang}", f"valid.bpe.{src_lang}",
             f"valid.bpe.{tgt_lang}", f"valid.raw.{tgt_lang}"]
    h = hashlib.sha256()
    for name in names:
        path = Path(data_dir) / name
        if not path.is_file():
            raise DataError(f"{path}: file not found (prepare the data again)")
        h.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def _tokenize_file(lines: list[str], lang: str, desc: str) -> list[str]:
    return [tokenize(ln, lang) for ln in tqdm(lines, desc=desc, unit="sent", leave=False, mininterval=1.0)]


def prepare(
    splits: dict[str, SplitFiles],
    src_lang: str,
    tgt_lang: str,
    out_dir: str | Path,
    *,
    vocab_size: int = 8000,
    max_train_words: int | None = None,
    force: bool = False,
) -> dict:
    """Prepare ``splits`` (must include ``train``) into ``out_dir``; returns meta.

    ``out_dir`` must be absent, empty or an earlier preparation (checked first, so
    that ``--out`` naming a file or someone else's folder fails before any work).  An
    earlier preparation with the same inputs and settings is reused; one with other
    settings is replaced with ``force`` (only the files it lists; anything else in the
    folder, such as ``align/``, is kept).  Raises DataError for missing or empty
    files, unequal line counts, empty lines or bad UTF-8 before any heavy work starts.

    ``max_train_words``: keep only the training pairs with 1 to that many words (tokenized) on both
    sides; empty training lines are then dropped with the rest instead of being an error.
    """
    if "train" not in splits:
        raise DataError("prepare needs a train split")
    check_languages(src_lang, tgt_lang)
    out_dir = check_output_dir(out_dir, ours=_is_preparation, holds="a scanmt preparation (meta.json)")
    sources = {k: {"src": str(v.src), "tgt": str(v.tgt)} for k, v in splits.items()}
    wanted = {"src_lang": src_lang, "tgt_lang": tgt_lang, "vocab_size": vocab_size, "sources": sources}
    # keys that earlier preparations lack enter only when they differ from those preparations' behaviour,
    # so that an earlier preparation with the same settings is still recognized (and reused)
    if max_train_words is not None:
        if max_train_words < 1:
            raise DataError(f"--max-train-words must be >= 1, got {max_train_words}")
        wanted["max_train_words"] = max_train_words
    tokenizers = {lang: tokenizer_name(lang) for lang in (src_lang, tgt_lang)}
    if set(tokenizers.values()) != {"moses"}:
        wanted["tokenizers"] = tokenizers
    reused = _earlier_preparation(out_dir, wanted, force)
    if reused is not None:
        return reused
    raw = _read_splits(splits, allow_empty_train=max_train_words is not None)
    with lock_folder(out_dir, what="--out"):  # a second prepare into the same folder fails naming this one
        reused = _earlier_preparation(out_dir, wanted, force)  # one that ended between the first look and the lock
        if reused is not None:
            return reused
        _report_leftovers(out_dir)
        work = make_temp_dir(out_dir.parent, _work_prefix(out_dir), "prepare")
        try:
            meta = _build(raw, src_lang, tgt_lang, vocab_size, work, wanted,
                          f"{splits['train'].src} and {splits['train'].tgt}", max_train_words)
            _install(work, out_dir)
        except BaseException as exc:
            shutil.rmtree(work, ignore_errors=True)
            if isinstance(exc, OSError):  # a full disk names the file of --out, not of the work folder
                raise at_destination(exc, {work: out_dir}) from None
            raise
    return meta


def _earlier_preparation(out_dir: Path, wanted: dict, force: bool) -> dict | None:
    """The meta of the preparation in ``out_dir`` when it has the settings ``wanted`` (it is reused); None when
    there is none, or with ``force``.  Raises :class:`DataError` for one with other settings, and
    :class:`~scanmt.errors.BusyError` naming the prepare that is writing it (its files may be half replaced)."""
    if force or not (out_dir / "meta.json").exists():
        return None
    check_unlocked(out_dir, what="--out")
    meta = read_meta(out_dir)
    if all(meta.get(k) == v for k, v in wanted.items()):
        log.info("reusing prepared data in %s", out_dir)
        return meta
    raise DataError(f"{out_dir} already holds data prepared with other settings; use another --out or --force")


def _read_splits(splits: dict[str, SplitFiles], *, allow_empty_train: bool = False
                 ) -> dict[str, tuple[list[str], list[str]]]:
    """Every split's lines, validated (cheap), so that bad input fails before the heavy work
    (``allow_empty_train``: empty training lines are let through, for the length filter to drop)."""
    raw: dict[str, tuple[list[str], list[str]]] = {}
    for name, f in splits.items():
        allow_empty = allow_empty_train and name == "train"
        s = read_lines(f.src, allow_empty=allow_empty, what="source file")
        t = read_lines(f.tgt, allow_empty=allow_empty, what="target file")
        if not s:
            raise DataError(f"{f.src}: the {name} source file is empty (no sentences)")
        check_parallel(s, t, f.src, f.tgt)
        raw[name] = (s, t)
    return raw


def _build(raw: dict[str, tuple[list[str], list[str]]], src_lang: str, tgt_lang: str, vocab_size: int, work: Path,
           wanted: dict, train_files: str, max_train_words: int | None = None) -> dict:
    """Write the whole preparation into the empty folder ``work``; returns its meta (``train_files``: for messages)."""
    tok: dict[str, tuple[list[str], list[str]]] = {}
    train_filter: dict[str, int] = {}
    for name, (s, t) in list(raw.items()):
        ts = _tokenize_file(s, src_lang, f"tokenize {name}.{src_lang}")
        tt = _tokenize_file(t, tgt_lang, f"tokenize {name}.{tgt_lang}")
        if name == "train" and max_train_words is not None:
            keep = [i for i in range(len(ts)) if _words_within(ts[i], tt[i], max_train_words)]
            train_filter = {"read": len(ts), "kept": len(keep)}
            log.info("kept %d of %d training pairs with 1 to %d words on both sides", len(keep), len(ts), max_train_words)
            if not keep:
                raise DataError(f"{train_files}: no training pair has 1 to {max_train_words} words on both sides "
                                "(--max-train-words)")
            s, t, ts, tt = ([xs[i] for i in keep] for xs in (s, t, ts, tt))
            raw[name] = (s, t)
        tok[name] = (ts, tt)
        write_lines(work / f"{name}.raw.{src_lang}", s)
        write_lines(work / f"{name}.raw.{tgt_lang}", t)
        write_lines(work / f"{name}.tok.{src_lang}", ts)
        write_lines(work / f"{name}.tok.{tgt_lang}", tt)
    log.info("learning a joint BPE model with %d pieces", vocab_size)
    train_subword_model(
        [work / f"train.tok.{src_lang}", work / f"train.tok.{tgt_lang}"], work / "spm", vocab_size,
        described_as=train_files,
    )
    sp = SubwordModel(work / "spm.model")
    train_pieces: list[list[str]] = []
    for name, (ts, tt) in tok.items():
        ps, pt = sp.encode_all(ts), sp.encode_all(tt)
        if name == "train":
            train_pieces = ps + pt
        write_lines(work / f"{name}.bpe.{src_lang}", [" ".join(p) for p in ps])
        write_lines(work / f"{name}.bpe.{tgt_lang}", [" ".join(p) for p in pt])
    vocab = Vocab.build(train_pieces)
    vocab.save(work / "vocab.txt")
    meta = {**wanted, "splits": list(raw), "sizes": {k: len(v[0]) for k, v in raw.items()}, "vocab": len(vocab)}
    if train_filter:
        meta["train_filter"] = train_filter
    meta["files"] = sorted([p.name for p in work.iterdir()] + ["meta.json"])
    with atomic_open(work / "meta.json") as fh:
        json.dump(meta, fh, indent=2)
    return meta


def _words_within(src_tok: str, tgt_tok: str, max_words: int) -> bool:
    """Whether both tokenized sides have 1 to ``max_words`` words."""
    return 1 <= len(src_tok.split()) <= max_words and 1 <= len(tgt_tok.split()) <= max_words


# --------------------------------------------------------------------------- the output folder

#: present in a preparation folder while ``--force`` replaces its files (lists the names it may replace)
PARTIAL = ".prepare-partial"


def _is_preparation(d: Path) -> bool:
    """Whether ``d`` holds a preparation (or one whose replacement was interrupted)."""
    return (d / "meta.json").is_file() or (d / PARTIAL).is_file()


def owned_files(meta: dict) -> set[str]:
    """The names of the files a preparation wrote (its ``meta.json`` lists them; older ones by the layout)."""
    if isinstance(meta.get("files"), list):
        return {str(f) for f in meta["files"]}
    langs = (meta.get("src_lang"), meta.get("tgt_lang"))
    names = {"meta.json", "spm.model", "spm.vocab", "vocab.txt"}
    return names | {f"{s}.{k}.{lang}" for s in meta.get("splits", []) for k in ("raw", "tok", "bpe") for lang in langs}


def _install(work: Path, out_dir: Path) -> None:
    """Move the files of the finished preparation ``work`` into ``out_dir`` (the folder this prepare has locked),
    replacing only what a preparation wrote there; ``meta.json`` last, as it marks a complete preparation, and
    under the :data:`PARTIAL` marker, so that a rerun finishes a move that was interrupted."""
    marker = out_dir / PARTIAL
    old = _previous_files(out_dir)
    new = {p.name for p in work.iterdir()}
    with atomic_open(marker) as fh:  # first, so that an interrupted replacement can be finished by a rerun
        json.dump(sorted(old | new), fh)
    with contextlib.suppress(FileNotFoundError):
        (out_dir / "meta.json").unlink()
    for name in sorted(old - new):
        with contextlib.suppress(FileNotFoundError):
            (out_dir / name).unlink()
    for name in sorted(new - {"meta.json"}) + ["meta.json"]:  # meta.json last: it marks a complete preparation
        os.replace(work / name, out_dir / name)
    marker.unlink()
    work.rmdir()
    if old:
        log.info("replaced the earlier preparation in %s", out_dir)


def _previous_files(out_dir: Path) -> set[str]:
    """Names written by the earlier (possibly half-replaced) preparation in ``out_dir``."""
    names: set[str] = set()
    if (out_dir / PARTIAL).is_file():
        names |= set(json.loads((out_dir / PARTIAL).read_text(encoding="utf-8")))
    if (out_dir / "meta.json").is_file():
        names |= owned_files(read_meta(out_dir))
    return {n for n in names if "/" not in n and n not in ("", ".", "..")} - {PARTIAL}


def _work_prefix(out_dir: Path) -> str:
    return f".{out_dir.name}.tmp."


def _report_leftovers(out_dir: Path) -> None:
    """Remove the temporary folders of prepare runs into ``out_dir`` that were killed; report others."""
    for d, pid in remove_stale_temp_dirs(out_dir.parent, _work_prefix(out_dir), "prepare"):
        if pid:
            log.warning("%s belongs to a prepare still running (process %s) into the same folder", d, pid)
        else:
            log.warning("%s looks left behind by an interrupted prepare of an older scanmt; delete it", d)
