"""Joint subword model (sentencepiece BPE) over tokenized text (words: :mod:`scanmt.data.tokenize`).

Pieces carry sentencepiece's word-start marker ``▁`` (U+2581).  A piece that
starts with ``▁`` opens a new tokenized word; :func:`word_index` maps each
piece to the index of the tokenized word it belongs to, which is how subword
attention and alignments are projected to words.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Sequence

import sentencepiece as spm

from scanmt.errors import DataError
from scanmt.io import write_error

WORD_START = "\u2581"


def word_index(pieces: Sequence[str]) -> list[int]:
    """Index of the tokenized word each piece belongs to.

    >>> word_index(["▁ein", "▁Hund", "e", "▁."])
    [0, 1, 1, 2]

    A first piece without ``▁`` still belongs to word 0.
    """
    out: list[int] = []
    w = -1
    for i, p in enumerate(pieces):
        if p.startswith(WORD_START) or i == 0:
            w += 1
        out.append(w)
    return out


def merge_pieces(pieces: Sequence[str]) -> str:
    """Join pieces back into tokenized text (``▁`` becomes a space)."""
    return "".join(pieces).replace(WORD_START, " ").strip()


def train_subword_model(
    texts: Sequence[Path], model_prefix: Path, vocab_size: int, *, character_coverage: float = 1.0, seed: int = 1,
    described_as: str = "",
) -> Path:
    """Learn a joint BPE model on the given tokenized text files.

    Writes ``{model_prefix}.model`` and ``{model_prefix}.vocab`` atomically
    (trained under a temporary prefix, then renamed) and returns the model path.
    Sentencepiece's errors become a :class:`DataError` naming ``described_as`` (the
    user's files; default: ``texts``) and, for a vocabulary size it cannot make, the
    sizes that work.
    """
    if vocab_size < 1:
        raise DataError(f"the vocabulary size (--vocab-size) must be >= 1, got {vocab_size}")
    model_prefix = Path(model_prefix)
    model_prefix.parent.mkdir(parents=True, exist_ok=True)
    tmpdir = tempfile.mkdtemp(dir=model_prefix.parent, prefix=".spm.")
    tmp_prefix = Path(tmpdir) / model_prefix.name
    try:
        spm.SentencePieceTrainer.train(
            input=",".join(str(t) for t in texts),
            model_prefix=str(tmp_prefix),
            vocab_size=vocab_size,
            model_type="bpe",
            character_coverage=character_coverage,
            # the NMT vocabulary adds its own specials; sentencepiece keeps <unk> only
            pad_id=-1,
            bos_id=-1,
            eos_id=-1,
            unk_id=0,
            split_by_whitespace=True,
            input_sentence_size=2_000_000,
            shuffle_input_sentence=True,
            minloglevel=2,
            num_threads=os.cpu_count() or 1,
        )
    except RuntimeError as exc:
        shutil.rmtree(tmpdir, ignore_errors=True)
        if any(marker in str(exc) for marker in WRITE_FAILURES):
            raise write_error(f"{model_prefix}.model", exc, "sentencepiece") from None
        where = described_as or ", ".join(str(t) for t in texts)
        raise DataError(subword_error(str(exc), vocab_size, where)) from None
    try:  # a model cut short by a full disk fails only when read: read it back now, naming the file
        spm.SentencePieceProcessor(model_file=f"{tmp_prefix}.model")
    except (RuntimeError, OSError) as exc:
        shutil.rmtree(tmpdir, ignore_errors=True)
        raise write_error(f"{model_prefix}.model", exc, "sentencepiece") from None
    for ext in (".model", ".vocab"):
        os.replace(f"{tmp_prefix}{ext}", f"{model_prefix}{ext}")
    os.rmdir(tmpdir)
    return Path(f"{model_prefix}.model")


#: sentencepiece's words for a model it could not write (or read back, truncated), e.g. on a full disk
WRITE_FAILURES: tuple[str, ...] = ("ParseFromArray", "No space left", "write failed", "Failed to write", "cannot write",
                                   "output->Write")


def subword_error(message: str, vocab_size: int, where: str) -> str:
    """A one-line explanation of a sentencepiece training error (which quotes its own source and temporary paths)."""
    too_high = re.search(r"Vocabulary size too high \((\d+)\)\. Please set it to a value <= (\d+)", message)
    if too_high:
        return (f"--vocab-size {vocab_size} is too large for the training text ({where}): sentencepiece can make "
                f"at most {too_high.group(2)} subwords from it; use --vocab-size {too_high.group(2)} or less")
    too_low = re.search(r"smaller than required_chars\. (\d+) vs (\d+)", message)
    if too_low:
        return (f"--vocab-size {vocab_size} is too small for the training text ({where}): every distinct "
                f"character needs a subword of its own; use --vocab-size {too_low.group(2)} or more")
    detail = re.sub(r"^\w+: \S+\(\d+\) \[.*?\]\s*", "", message.strip().splitlines()[0] if message.strip() else "")
    return f"sentencepiece could not learn {vocab_size} subwords from {where}" + (f": {detail}" if detail else "")


class SubwordModel:
    """Encode tokenized text into pieces and back.

    ``proto`` holds the model's serialized bytes (what a checkpoint stores); ``path`` the file it
    was read from, or None for a model made from bytes (:meth:`from_bytes`, no file written).
    """

    def __init__(self, model_path: str | Path):
        model_path = Path(model_path)
        if not model_path.exists():
            raise DataError(f"{model_path}: subword model not found")
        self.path: Path | None = model_path
        self.proto = model_path.read_bytes()
        self.sp = spm.SentencePieceProcessor(model_proto=self.proto)

    @classmethod
    def from_bytes(cls, proto: bytes) -> "SubwordModel":
        """The model whose serialized bytes are ``proto`` (as :attr:`proto` holds them)."""
        model = cls.__new__(cls)
        model.path, model.proto = None, bytes(proto)
        model.sp = spm.SentencePieceProcessor(model_proto=model.proto)
        return model

    def encode(self, tokenized: str) -> list[str]:
        return self.sp.encode(tokenized, out_type=str)

    def encode_all(self, lines: Sequence[str]) -> list[list[str]]:
        return self.sp.encode(list(lines), out_type=str)

    @staticmethod
    def decode(pieces: Sequence[str]) -> str:
        return merge_pieces(pieces)
