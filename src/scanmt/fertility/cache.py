"""The fertility cache of a prepared folder: a split's fertilities for a strategy, computed once.

``DIR/fertility/{split}.{strategy}-{tag}.fert`` (format: :mod:`scanmt.data.fertility`) with a sidecar
``.fert.json`` recording the parameters and the SHA-256 of the source file (see
:func:`fertility_cache_path` and :func:`cached_fertility`).  A cached file is
reused only if the parameters and the source text are unchanged and it still
validates; otherwise it is recomputed.  Parameters that depend on data (the
alignment files) enter the key through their digests, so re-aligning
invalidates the cache by itself.  Each strategy's parameters are its
:meth:`~scanmt.fertility.strategies.Strategy.cache_params`; file names and keys are the
same as when this module was ``scanmt.data.fertility``, so older caches are reused.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

from scanmt.choices import STRATEGIES
from scanmt.data.fertility import Fertilities, file_digest, fertility_stats, format_value, read_fertility, write_fertility
from scanmt.errors import ConfigError, DataError
from scanmt.io import atomic_open, read_lines

log = logging.getLogger(__name__)

CACHE_DIR = "fertility"


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
