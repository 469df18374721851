"""``scanmt prepare``: raw parallel text -> tokenized text, joint BPE, vocabulary, encoded splits.

Output directory layout (all files written atomically; the directory itself is
built under a temporary name and renamed into place, so an interrupted run
leaves nothing behind)::

    meta.json                {"src_lang", "tgt_lang", "vocab_size", "splits": [...], "sources": {...}}
    spm.model, spm.vocab     joint sentencepiece BPE model (learned on train, both sides)
    vocab.txt                NMT vocabulary (specials first), shared by both sides
    {split}.raw.{lang}       the original lines
    {split}.tok.{lang}       Moses-tokenized
    {split}.bpe.{lang}       space-separated subword pieces
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from scanmt.data.subword import SubwordModel, train_subword_model
from scanmt.data.tokenize import tokenize
from scanmt.data.vocab import Vocab
from scanmt.errors import DataError
from scanmt.io import atomic_open, check_parallel, read_json, read_lines, write_lines

log = logging.getLogger(__name__)


@dataclass
class SplitFiles:
    """Raw source and target files of one split."""

    src: Path
    tgt: Path


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


def _tokenize_file(lines: list[str], lang: str, desc: str) -> list[str]:
    return [tokenize(ln, lang) for ln in tqdm(lines, desc=desc, unit="sent", leave=False, mininterval=1.0)]


def prepare(
    splits: dict[str, SplitFiles],
    src_lang: str,
    tgt_lang: str,
    out_dir: str | Path,
    *,
    vocab_size: int = 8000,
    force: bool = False,
) -> dict:
    """Prepare ``splits`` (must include ``train``) into ``out_dir``; returns meta.

    Raises DataError for missing files, unequal line counts, empty lines or bad
    UTF-8 before any heavy work starts.  If ``out_dir`` already holds a
    preparation with the same inputs and settings it is reused.
    """
    out_dir = Path(out_dir)
    if "train" not in splits:
        raise DataError("prepare needs a train split")
    sources = {k: {"src": str(v.src), "tgt": str(v.tgt)} for k, v in splits.items()}
    wanted = {"src_lang": src_lang, "tgt_lang": tgt_lang, "vocab_size": vocab_size, "sources": sources}
    if (out_dir / "meta.json").exists() and not force:
        meta = read_meta(out_dir)
        if all(meta.get(k) == v for k, v in wanted.items()):
            log.info("reusing prepared data in %s", out_dir)
            return meta
        raise DataError(
            f"{out_dir} already holds data prepared with other settings; use another --out or --force"
        )

    # 1. read + validate everything first (cheap), so bad input fails before heavy work
    raw: dict[str, tuple[list[str], list[str]]] = {}
    for name, f in splits.items():
        s = read_lines(f.src, what="source file")
        t = read_lines(f.tgt, what="target file")
        check_parallel(s, t, f.src, f.tgt)
        raw[name] = (s, t)

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}.tmp."))
    try:
        tok: dict[str, tuple[list[str], list[str]]] = {}
        for name, (s, t) in raw.items():
            ts = _tokenize_file(s, src_lang, f"tokenize {name}.{src_lang}")
            tt = _tokenize_file(t, tgt_lang, f"tokenize {name}.{tgt_lang}")
            tok[name] = (ts, tt)
            write_lines(work / f"{name}.raw.{src_lang}", s)
            write_lines(work / f"{name}.raw.{tgt_lang}", t)
            write_lines(work / f"{name}.tok.{src_lang}", ts)
            write_lines(work / f"{name}.tok.{tgt_lang}", tt)
        log.info("learning a joint BPE model with %d pieces", vocab_size)
        train_subword_model(
            [work / f"train.tok.{src_lang}", work / f"train.tok.{tgt_lang}"], work / "spm", vocab_size
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
        meta = {**wanted, "splits": list(splits), "sizes": {k: len(v[0]) for k, v in raw.items()}, "vocab": len(vocab)}
        with atomic_open(work / "meta.json") as fh:
            json.dump(meta, fh, indent=2)
        if out_dir.exists():
            shutil.rmtree(out_dir)
        os.chmod(work, 0o755)
        os.replace(work, out_dir)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return meta
