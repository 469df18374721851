"""``prepare``: tokenize a parallel corpus, learn joint BPE, write the vocabulary and the encoded splits."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from scanmt.api.arguments import check_type
from scanmt.api.requests import CommandRequest, option
from scanmt.config import Range
from scanmt.data import kftt, multi30k
from scanmt.data.prepare import SplitFiles, check_languages, prepare as prepare_splits
from scanmt.errors import DataError


@dataclass(frozen=True)
class PrepareRequest(CommandRequest):
    """``scanmt prepare``: Multi30k or KFTT by name (``corpus="multi30k"``, ``"kftt"``) or your own ``(SRC, TGT)``
    files."""

    COMMAND = "prepare"
    #: language pair SRC-TGT, e.g. ``de-en``
    pair: str
    #: output folder: new, empty, or an earlier preparation
    out: str
    #: a known corpus to fetch by name (``multi30k``, ``kftt``), or None for the files below
    corpus: str | None = None
    #: local folder with the corpus's ``{split}.{lang}.gz`` files
    mirror: str | None = None
    train: tuple[str, str] | None = None
    valid: tuple[str, str] | None = None
    test: tuple[str, str] | None = None
    #: joint BPE vocabulary size; None: :data:`DEFAULT_VOCAB_SIZE` (``kftt``: :data:`~scanmt.data.kftt.VOCAB_SIZE`)
    vocab_size: int | None = option(None, range=Range(1))
    #: keep only training pairs of 1 to this many words on both sides; None: all (``kftt``: 40, the paper's)
    max_train_words: int | None = option(None, range=Range(1))
    #: replace an earlier preparation made with other settings (only its own files)
    force: bool = False


@dataclass(frozen=True)
class PrepareResult:
    """What was prepared: languages, folder, vocabulary sizes and sentence pairs per split."""

    src_lang: str
    tgt_lang: str
    out: str
    vocab: int
    vocab_size: int
    sizes: dict[str, int]
    #: the length filter (``max_train_words``) and the training pairs read before it; None without it
    max_train_words: int | None = None
    train_read: int | None = None


#: the joint BPE vocabulary size of a preparation that names none (Multi30k, the user's files)
DEFAULT_VOCAB_SIZE = 8000


def parse_pair(pair: str) -> tuple[str, str]:
    """``"de-en"`` -> ``("de", "en")``; a :class:`DataError` for anything else: two language codes
    (:data:`~scanmt.data.prepare.LANGUAGE_CODE`, which enter file names) that differ."""
    parts = pair.split("-")
    if len(parts) != 2 or not all(parts):
        raise DataError(f"--pair {pair!r}: expected SRC-TGT such as de-en (a region tag takes _: pt_BR-en)")
    check_languages(parts[0], parts[1])
    return parts[0], parts[1]


def multi30k_splits(src: str, tgt: str, mirror: str | None) -> dict[str, SplitFiles]:
    """The raw files of every Multi30k split prepared for ``src``-``tgt`` (located or downloaded)."""
    return {
        name: SplitFiles(multi30k.locate(upstream, src, mirror), multi30k.locate(upstream, tgt, mirror))
        for name, upstream in multi30k.prepared_splits(src, tgt).items()
    }


def kftt_splits(src: str, tgt: str, mirror: str | None) -> dict[str, SplitFiles]:
    """The raw files of KFTT's train, dev (``valid``) and test splits for ``ja-en`` or ``en-ja`` (located)."""
    kftt.check_pair(src, tgt)
    return {name: SplitFiles(kftt.locate(split, src, mirror), kftt.locate(split, tgt, mirror))
            for name, split in kftt.PREPARED_SPLITS.items()}


def _file_splits(request: PrepareRequest) -> dict[str, SplitFiles]:
    if not (request.train and request.valid):
        raise DataError("give --corpus multi30k or kftt, or at least --train SRC TGT and --valid SRC TGT")
    splits = {"train": SplitFiles(Path(request.train[0]), Path(request.train[1])),
              "valid": SplitFiles(Path(request.valid[0]), Path(request.valid[1]))}
    if request.test:
        splits["test"] = SplitFiles(Path(request.test[0]), Path(request.test[1]))
    return splits


def prepare(request: PrepareRequest) -> PrepareResult:
    """Prepare a corpus into ``request.out`` (reused when prepared before with the same settings).

    Writes ``{split}.raw|tok|bpe.{lang}``, ``spm.model``, ``vocab.txt`` and ``meta.json``
    (see :func:`scanmt.data.prepare.prepare`).
    """
    check_type("prepare", "request", request, PrepareRequest)
    src, tgt = parse_pair(request.pair)
    max_words, vocab_size = request.max_train_words, request.vocab_size
    if request.corpus == "multi30k":
        splits = multi30k_splits(src, tgt, request.mirror)
    elif request.corpus == "kftt":
        splits = kftt_splits(src, tgt, request.mirror)
        max_words = kftt.MAX_TRAIN_WORDS if max_words is None else max_words
        vocab_size = kftt.VOCAB_SIZE if vocab_size is None else vocab_size
    elif request.corpus is None:
        splits = _file_splits(request)
    else:
        raise DataError(f"--corpus {request.corpus!r}: unknown corpus (known: multi30k, kftt)")
    vocab_size = DEFAULT_VOCAB_SIZE if vocab_size is None else vocab_size
    meta = prepare_splits(splits, src, tgt, request.out, vocab_size=vocab_size, max_train_words=max_words,
                          force=request.force)
    read = meta.get("train_filter", {}).get("read")
    return PrepareResult(src, tgt, str(request.out), meta["vocab"], meta["vocab_size"], dict(meta["sizes"]),
                         meta.get("max_train_words"), read)
