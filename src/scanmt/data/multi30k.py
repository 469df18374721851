"""Locate (and if needed download) Multi30k task-1 raw files.

Lookup order for ``{split}.{lang}.gz``:

1. the mirror directory given by the caller (``--mirror``): when one is given, every file must be
   there (a missing one is an error, never taken from the places below),
2. ``$SCANMT_MULTI30K``,
3. ``../shared/data/multi30k`` next to the current directory or the repository,
4. the upstream URL (github.com/multi30k/dataset, ``data/task1/raw``), downloaded
   into the cache directory ``~/.cache/scanmt/multi30k``.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from pathlib import Path

from scanmt.data.corpus_dirs import corpus_dirs, local_file
from scanmt.errors import DataError
from scanmt.io import atomic_open

UPSTREAM = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/{split}.{lang}.gz"
SPLITS = ("train", "val", "test_2016_flickr", "test_2017_flickr", "test_2017_mscoco", "test_2018_flickr")
LANGS = ("de", "en", "fr", "cs")
#: the names ``prepare`` gives the standard splits
DEFAULT_SPLITS = {"train": "train", "valid": "val", "test": "test_2016_flickr"}


def prepared_splits(src: str, tgt: str) -> dict[str, str]:
    """The splits ``scanmt prepare --corpus multi30k`` writes for a pair: prepared name -> upstream name.

    ``test2017`` (test_2017_flickr) for every pair without Czech, which it has no translation into.
    """
    splits = dict(DEFAULT_SPLITS)
    if "cs" not in (src, tgt):
        splits["test2017"] = "test_2017_flickr"
    return splits


def candidate_dirs(mirror: str | Path | None = None) -> list[Path]:
    """The folders searched before a download (:func:`~scanmt.data.corpus_dirs.corpus_dirs`)."""
    return corpus_dirs("multi30k", "SCANMT_MULTI30K", mirror)


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "scanmt" / "multi30k"


def locate(split: str, lang: str, mirror: str | Path | None = None, *, download: bool = True) -> Path:
    """Path of ``{split}.{lang}.gz``; downloads it only if no local copy exists."""
    found = local_file("Multi30k", split, lang, (SPLITS, LANGS), mirror, candidate_dirs() + [cache_dir()],
                       "the shared copy or a download")
    if found is not None:
        return found
    name = f"{split}.{lang}.gz"
    if not download:
        raise DataError(f"Multi30k file {name} not found in {[str(d) for d in candidate_dirs(mirror)]}")
    url = UPSTREAM.format(split=split, lang=lang)
    target = cache_dir() / name
    try:
        with urllib.request.urlopen(url, timeout=60) as resp, atomic_open(target, "wb") as fh:
            fh.write(resp.read())
    except (urllib.error.URLError, OSError) as exc:
        raise DataError(
            f"Multi30k file {name} is not in any mirror directory and downloading {url} failed ({exc}); "
            f"pass --mirror DIR or set SCANMT_MULTI30K"
        ) from None
    return target
