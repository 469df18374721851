"""Fertility files: one line per sentence, one number per source subword (the format, read and written checked).

Fertilities live on the **subword** source tokens (``{split}.bpe.{src}`` of a
prepared data directory), because those are what the model attends to and what
``scanmt align`` aligns.  The model appends the ``<sink>`` token (fertility
∞) itself (:mod:`scanmt.fertility.sink`); fertility files never contain it.
The strategies that produce the values (constant, guided, predicted, actual) and the
cache of a prepared folder's files are :mod:`scanmt.fertility` (:mod:`scanmt.fertility.strategies`,
:mod:`scanmt.fertility.cache`); this module only reads and writes what they compute.

Format: one line per sentence, space-separated numbers, one per source subword,
integers written without a decimal point.  Reading validates everything
(:func:`read_fertility`): every error names the file and 1-based line.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from pathlib import Path
from typing import Sequence

from scanmt.errors import DataError
from scanmt.io import atomic_open, read_lines

Fertilities = list[list[float]]


# --------------------------------------------------------------------------- values


def check_value(x: float, *, where: str = "fertility") -> float:
    """Return ``float(x)`` if it is a finite number > 0, else raise :class:`DataError`."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise DataError(f"{where}: {x!r} is not a number") from None
    if not math.isfinite(v) or v <= 0:
        raise DataError(f"{where}: {x!r} is not allowed, fertilities must be finite and > 0")
    return v


def format_value(x: float) -> str:
    """``2`` for integral values, else up to 6 significant digits (``1.5``, ``0.333333``)."""
    x = float(x)
    if x.is_integer() and abs(x) < 1e15:
        return str(int(x))
    return format(x, ".6g")


# --------------------------------------------------------------------------- files


def write_fertility(path: str | Path, fertilities: Sequence[Sequence[float]]) -> None:
    """Write one line per sentence (atomically), checking every value is finite and > 0."""
    path = Path(path)
    lines = []
    for n, fs in enumerate(fertilities):
        for k, f in enumerate(fs):
            check_value(f, where=f"{path}:{n + 1}: token {k + 1}")
        lines.append(" ".join(format_value(f) for f in fs))
    with atomic_open(path) as fh:
        for ln in lines:
            fh.write(ln + "\n")


def read_fertility(
    path: str | Path,
    *,
    src_lens: Sequence[int] | None = None,
    src_path: str | Path | None = None,
) -> Fertilities:
    """Read and validate a fertility file.

    Args:
        path: the file.
        src_lens: token counts of the source sentences; when given the file must
            have one line per sentence and one number per token.
        src_path: the source file (only used in messages).

    Raises:
        DataError: naming ``path`` and the 1-based line: wrong number of lines,
            a length that does not match the source sentence, a value that is
            not a number, zero, negative, infinite or NaN.
    """
    path = Path(path)
    lines = read_lines(path, allow_empty=True, what="fertility file")
    src_desc = f" ({src_path})" if src_path is not None else ""
    if src_lens is not None and len(src_lens) != len(lines):
        raise DataError(
            f"{path} has {len(lines)} lines but the source{src_desc} has {len(src_lens)} sentences"
        )
    out: Fertilities = []
    for n, line in enumerate(lines):
        fields = line.split()
        where = f"{path}:{n + 1}"
        if src_lens is not None:
            if len(fields) != src_lens[n]:
                raise DataError(
                    f"{where}: {len(fields)} fertilities for a source sentence of {src_lens[n]} tokens{src_desc}"
                )
        elif not fields:
            raise DataError(f"{where}: empty line (no fertilities)")
        vals = []
        for k, f in enumerate(fields):
            try:
                v = float(f)
            except ValueError:
                raise DataError(f"{where}: token {k + 1}: {f!r} is not a number") from None
            if math.isnan(v) or v <= 0:
                raise DataError(f"{where}: token {k + 1}: fertility {f} is not allowed (must be > 0)")
            if math.isinf(v):
                raise DataError(f"{where}: token {k + 1}: fertility {f} is not allowed (must be finite)")
            vals.append(v)
        out.append(vals)
    return out


def fertility_stats(fertilities: Sequence[Sequence[float]]) -> dict:
    """Summary: sentences, tokens, mean, max, share of tokens with fertility 1, histogram of integer values."""
    flat = [f for fs in fertilities for f in fs]
    if not flat:
        return {"sentences": len(fertilities), "tokens": 0, "mean": 0.0, "max": 0.0, "share_1": 0.0, "histogram": {}}
    hist = Counter(format_value(f) if float(f).is_integer() else "other" for f in flat)
    return {
        "sentences": len(fertilities),
        "tokens": len(flat),
        "mean": sum(flat) / len(flat),
        "max": max(flat),
        "share_1": sum(1 for f in flat if f == 1) / len(flat),
        "histogram": dict(sorted(hist.items(), key=lambda kv: (kv[0] == "other", float(kv[0]) if kv[0] != "other" else 0))),
    }


def file_digest(path: str | Path) -> str:
    """SHA-256 (hex) of a file's bytes."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: file not found")
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
