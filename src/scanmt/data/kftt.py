"""Locate KFTT's (the Kyoto Free Translation Task's, Japanese-English) raw files.

Lookup order for ``{split}.{lang}.gz`` (``split`` one of ``train``, ``dev``, ``test``; ``lang`` ``ja`` or ``en``):

1. the mirror directory given by the caller (``--mirror``): when one is given, every file must be
   there (a missing one is an error, never taken from the places below),
2. ``$SCANMT_KFTT``,
3. ``../shared/data/kftt`` next to the current directory or the repository.

Nothing is downloaded: KFTT has no stable upstream for these files (KFTT 1.0's ``data/orig``, gzipped).
``scanmt prepare --corpus kftt`` keeps the paper's cleaning, training pairs of 1 to
:data:`MAX_TRAIN_WORDS` words on both sides, and learns :data:`VOCAB_SIZE` joint subwords.
"""

from __future__ import annotations

from pathlib import Path

from scanmt.data.corpus_dirs import corpus_dirs, local_file
from scanmt.errors import DataError

SPLITS = ("train", "dev", "test")
LANGS = ("ja", "en")
#: the names ``prepare`` gives the splits: prepared name -> KFTT's name
PREPARED_SPLITS = {"train": "train", "valid": "dev", "test": "test"}
#: the paper's (KFTT's own) cleaning: training pairs of at most this many words on both sides
MAX_TRAIN_WORDS = 40
#: the joint sentencepiece vocabulary size (docs/japanese.md measures 8k, 16k and 32k: 16k is the knee)
VOCAB_SIZE = 16000


def candidate_dirs(mirror: str | Path | None = None) -> list[Path]:
    """The folders searched (:func:`~scanmt.data.corpus_dirs.corpus_dirs`)."""
    return corpus_dirs("kftt", "SCANMT_KFTT", mirror)


def check_pair(src: str, tgt: str) -> None:
    """A :class:`DataError` unless ``src``-``tgt`` is ``ja-en`` or ``en-ja``."""
    if {src, tgt} != set(LANGS):
        raise DataError(f"--corpus kftt --pair {src}-{tgt}: KFTT is Japanese-English; use --pair ja-en or en-ja")


def locate(split: str, lang: str, mirror: str | Path | None = None) -> Path:
    """Path of ``{split}.{lang}.gz``; a :class:`DataError` naming the folders searched when none has it."""
    dirs = candidate_dirs()
    found = local_file("KFTT", split, lang, (SPLITS, LANGS), mirror, dirs, "$SCANMT_KFTT or ../shared/data/kftt")
    if found is not None:
        return found
    raise DataError(f"KFTT file {split}.{lang}.gz not found in {', '.join(str(d) for d in dirs)} (KFTT is not downloaded: "
                    "pass --mirror DIR or set SCANMT_KFTT to a folder with {train,dev,test}.{ja,en}.gz)")
