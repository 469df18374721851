"""Fertility values on disk: the file format, the cache, and counting aligned tokens.

Fertilities live on the **subword** source tokens (``{split}.bpe.{src}`` of a
prepared data directory), because those are what the model attends to and what
``scanmt align`` aligns.  The model appends the ``<sink>`` token (fertility
∞) itself (:mod:`scanmt.fertility.sink`); fertility files never contain it.
The strategies that produce the values (constant, guided, predicted, actual) are
:mod:`scanmt.fertility` (providers; :func:`scanmt.fertility.compute.compute_fertility`
for a split); this module only stores what they compute, and counts alignments
(:func:`alignment_counts`, zeros included, e.g. as supervision for the predictor).

Fertility file format: one line per sentence, space-separated numbers, one per
source subword, integers written without a decimal point.  Reading validates
everything (:func:`read_fertility`): every error names the file and 1-based line.

Cache: ``DIR/fertility/{split}.{strategy}-{tag}.fert`` with a sidecar
``.fert.json`` recording the parameters and the SHA-256 of the source file (see
:func:`fertility_cache_path` and :func:`cached_fertility`).  A cached file is
reused only if the parameters and the source text are unchanged and it still
validates; otherwise it is recomputed.  Parameters that depend on data (the
alignment files) enter the key through their digests, so re-aligning
invalidates the cache by itself.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

from scanmt.data.links import read_links
from scanmt.errors import ConfigError, DataError
from scanmt.fertility.rules import STRATEGIES
from scanmt.io import atomic_open, read_lines

log = logging.getLogger(__name__)

Link = tuple[int, int]
Fertilities = list[list[float]]

CACHE_DIR = "fertility"
ALIGN_DIR = "align"
LEVEL = "subword"


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


# --------------------------------------------------------------------------- alignments


def alignment_counts(links: Iterable[Link], src_len: int) -> list[int]:
    """Number of distinct target tokens aligned to each source position (zeros included).

    Raises:
        DataError: a link whose source index is outside ``0..src_len-1``.
    """
    counts = [0] * src_len
    seen: set[Link] = set()
    for i, j in links:
        if not 0 <= i < src_len:
            raise DataError(f"link {i}-{j}: source index {i} out of range for {src_len} source tokens")
        if (i, j) not in seen:
            seen.add((i, j))
            counts[i] += 1
    return counts



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


# --------------------------------------------------------------------------- cache

_SAFE = re.compile(r"[A-Za-z0-9.+_]{1,24}")


def _param_tag(params: Mapping[str, object]) -> str:
    if len(params) == 1:
        (v,) = params.values()
        s = format_value(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)
        if _SAFE.fullmatch(s):
            return s
    blob = json.dumps(params, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:10]


def fertility_cache_path(data_dir: str | Path, split: str, strategy: str, params: Mapping[str, object]) -> Path:
    """Where the fertilities of ``split`` for a strategy and its parameters are cached.

    ``DIR/fertility/{split}.{strategy}-{tag}.fert``: ``tag`` is the value itself
    for a single simple parameter (``train.constant-2.fert``), otherwise the
    first 10 hex digits of the SHA-256 of the parameters as sorted JSON
    (``train.guided-3f9a1c2b7d.fert``).  The sidecar ``.fert.json`` spells the
    parameters out.
    """
    if strategy not in STRATEGIES:
        raise ConfigError(f"unknown fertility strategy {strategy!r}; choose one of: {', '.join(STRATEGIES)}")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", split):
        raise ConfigError(f"bad split name {split!r}")
    return Path(data_dir) / CACHE_DIR / f"{split}.{strategy}-{_param_tag(params)}.fert"


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


@dataclass
class CachedFertility:
    """Result of :func:`cached_fertility`."""

    path: Path
    values: Fertilities
    reused: bool


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".json")


def cached_fertility(
    data_dir: str | Path,
    split: str,
    strategy: str,
    params: Mapping[str, object],
    src_path: str | Path,
    compute: Callable[[list[list[str]]], Sequence[Sequence[float]]],
    *,
    force: bool = False,
) -> CachedFertility:
    """Fertilities of ``split`` from the cache, computing and caching them on a miss.

    Args:
        data_dir: the prepared data directory (the cache is ``data_dir/fertility``).
        split, strategy, params: the cache key (:func:`fertility_cache_path`).
        src_path: the subword source file of the split; its digest is checked on reuse.
        compute: called with the source token lists on a miss; returns fertilities.
        force: recompute even if a valid cache entry exists.
    """
    path = fertility_cache_path(data_dir, split, strategy, params)
    src_path = Path(src_path)
    src = [ln.split() for ln in read_lines(src_path, what="source file")]
    src_lens = [len(s) for s in src]
    src_sha = file_digest(src_path)
    meta = {"strategy": strategy, "params": dict(params), "split": split,
            "source": {"path": src_path.name, "sha256": src_sha}}
    side = _sidecar(path)
    if not force and path.exists() and side.exists():
        try:
            old = json.loads(side.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            old = None
        if isinstance(old, dict) and all(old.get(k) == json.loads(json.dumps(v, default=str)) for k, v in meta.items()):
            values = read_fertility(path, src_lens=src_lens, src_path=src_path)
            log.info("reusing cached fertilities %s", path)
            return CachedFertility(path, values, True)
        log.info("cached fertilities %s are stale (parameters or source changed); recomputing", path)
    values = [list(map(float, fs)) for fs in compute(src)]
    if len(values) != len(src):
        raise DataError(f"{strategy} fertility for {split}: {len(values)} sentences for {len(src)} source sentences")
    for n, (fs, s) in enumerate(zip(values, src)):
        if len(fs) != len(s):
            raise DataError(
                f"{strategy} fertility for {src_path}:{n + 1}: {len(fs)} values for a sentence of {len(s)} tokens"
            )
    write_fertility(path, values)
    with atomic_open(side) as fh:
        json.dump({**meta, "stats": fertility_stats(values)}, fh, indent=2, sort_keys=True, default=str)
        fh.write("\n")
    return CachedFertility(path, values, False)


# --------------------------------------------------------------------------- prepared data


def alignment_path(align_dir: str | Path, split: str, level: str = LEVEL) -> Path:
    """``ALIGN_DIR/{split}.{level}.align`` as written by ``scanmt align``."""
    return Path(align_dir) / f"{split}.{level}.align"


def read_split_links(align_dir: Path, split: str, src: list[list[str]], data_dir: Path) -> list[set[Link]]:
    """The sure links of ``split``'s subword alignment in ``align_dir``, checked against the source ``src``."""
    path = alignment_path(align_dir, split)
    if not path.exists():
        raise DataError(f"{path}: no {LEVEL} alignment for split {split!r}; run `scanmt align --data {data_dir}` first")
    return [sure for sure, _ in read_links(path, src_lens=[len(s) for s in src])]
