"""Where a known corpus's raw files are looked for: ``--mirror``, an environment variable, ``shared/data``.

Used by :mod:`scanmt.data.multi30k` and :mod:`scanmt.data.kftt`, whose files are ``{split}.{lang}.gz``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

from scanmt.errors import DataError


def corpus_dirs(folder: str, env_var: str, mirror: str | Path | None = None) -> list[Path]:
    """The folders searched for corpus ``folder``'s files, in order: ``mirror``, ``$env_var``, then
    ``../shared/data/FOLDER`` and ``shared/data/FOLDER`` beside the current directory and the repository."""
    dirs: list[Path] = []
    if mirror:
        dirs.append(Path(mirror))
    if os.environ.get(env_var):
        dirs.append(Path(os.environ[env_var]))
    repo = Path(__file__).resolve().parents[3]
    for base in (Path.cwd(), repo):
        dirs.append(base / ".." / "shared" / "data" / folder)
        dirs.append(base / "shared" / "data" / folder)
    return dirs


def local_file(corpus: str, split: str, lang: str, known: tuple[Sequence[str], Sequence[str]],
               mirror: str | Path | None, dirs: Sequence[Path], otherwise: str) -> Path | None:
    """``{split}.{lang}.gz`` of ``corpus`` (a name for messages): from ``mirror`` when one is given (it must be
    there: :func:`mirror_file`), else the first of ``dirs`` holding it, else None.  ``known``: the corpus's
    (splits, languages), anything else a :class:`DataError`; ``otherwise``: what is used without ``--mirror``."""
    for what, value, names in (("split", split, known[0]), ("language", lang, known[1])):
        if value not in names:
            raise DataError(f"unknown {corpus} {what} {value!r} (known: {', '.join(names)})")
    name = f"{split}.{lang}.gz"
    if mirror:  # the user's own copy: all of it, never a file of it from elsewhere
        return mirror_file(mirror, name, otherwise)
    for d in dirs:
        if (d / name).is_file():
            return (d / name).resolve()
    return None


def mirror_file(mirror: str | Path, name: str, otherwise: str) -> Path:
    """``mirror/name``, which must exist: a mirror given by the user holds every file, none is taken from elsewhere
    (``otherwise``: what is used without ``--mirror``, for the message)."""
    path = Path(mirror) / name
    if not path.is_file():
        raise DataError(f"--mirror {mirror}: {name} is not there (a mirror must hold every file of the pair; "
                        f"without --mirror {otherwise} is used)")
    return path.resolve()
