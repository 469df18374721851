"""Fertility upper bounds for the source tokens (paper Section 4), files and cache.

Fertilities live on the **subword** source tokens (``{split}.bpe.{src}`` of a
prepared data directory), because those are what the model attends to and what
``scanmt align`` aligns.  The model appends the ``<sink>`` token (fertility
∞) itself; fertility files never contain it.

Strategies (:data:`STRATEGIES`):

- ``constant`` *f*: every token gets *f* (any finite number > 0; the paper uses integers).
- ``guided``: per source token *type*, the largest number of target tokens any
  of its occurrences is aligned to in the training alignments; **1 if the type
  is unseen or was never aligned** (the paper's "or 1 if no alignment was
  observed").  Hence ``max(1, table.get(token, 0))``.
- ``actual``: an oracle for analysis, from the alignment of the sentence pair
  itself: the number of target tokens the source token is aligned to, **with a
  floor of 1**: ``max(1, count)``.  An unaligned token therefore gets 1, not 0.
  Rationale: fertility files must hold positive numbers (a zero bound would
  forbid any attention to the token, and a sentence of zeros would make the
  constrained problem infeasible without the sink), and the floor matches
  ``guided``'s rule for never-aligned words.  The raw counts (zeros included)
  are available from :func:`alignment_counts`, e.g. as supervision for the
  predicted-fertility tagger.
- ``predicted``: a trained BiLSTM tagger (built elsewhere); this module only
  caches its output (:func:`cached_fertility`) and checks that a predictor is
  configured (:func:`require_predictor`).

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

from scanmt.errors import ConfigError, DataError
from scanmt.data.prepare import read_meta
from scanmt.io import atomic_open, read_lines

log = logging.getLogger(__name__)

Link = tuple[int, int]
Fertilities = list[list[float]]

STRATEGIES: tuple[str, ...] = ("constant", "guided", "predicted", "actual")
#: strategies :func:`compute_fertility` computes itself (``predicted`` needs a predictor)
BUILTIN: tuple[str, ...] = ("constant", "guided", "actual")
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


# --------------------------------------------------------------------------- strategies


@dataclass(frozen=True)
class ConstantFertility:
    """Every source token gets ``value``."""

    value: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", check_value(self.value, where="constant fertility"))

    name = "constant"

    @property
    def params(self) -> dict:
        return {"value": self.value}

    def apply(self, src: Sequence[Sequence[str]]) -> Fertilities:
        return [[self.value] * len(s) for s in src]


def constant(value: float) -> ConstantFertility:
    """The ``constant`` strategy with fertility ``value`` (> 0)."""
    return ConstantFertility(value)


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


class GuidedFertility:
    """Per source type: the largest aligned-target count seen in training; 1 if unseen/never aligned.

    Attributes:
        table: type -> max count observed (0 for types seen but never aligned).
    """

    name = "guided"

    def __init__(self, table: Mapping[str, int]):
        self.table: dict[str, int] = dict(table)

    @classmethod
    def train(cls, src: Sequence[Sequence[str]], links: Sequence[Iterable[Link]]) -> "GuidedFertility":
        """Learn the table from training source sentences and their (symmetrized) alignments."""
        if len(src) != len(links):
            raise DataError(f"{len(src)} source sentences but {len(links)} alignment lines")
        table: dict[str, int] = {}
        for n, (sent, ls) in enumerate(zip(src, links)):
            try:
                counts = alignment_counts(ls, len(sent))
            except DataError as exc:
                raise DataError(f"alignment of sentence {n + 1}: {exc}") from None
            for tok, c in zip(sent, counts):
                if c > table.get(tok, -1):
                    table[tok] = c
        return cls(table)

    def fertility(self, token: str) -> int:
        return max(1, self.table.get(token, 0))

    def apply(self, src: Sequence[Sequence[str]]) -> Fertilities:
        return [[float(self.fertility(t)) for t in s] for s in src]


def actual_fertility(src: Sequence[Sequence[str]], links: Sequence[Iterable[Link]]) -> Fertilities:
    """Oracle fertilities from each pair's own alignment: ``max(1, count)`` per source token."""
    if len(src) != len(links):
        raise DataError(f"{len(src)} source sentences but {len(links)} alignment lines")
    out: Fertilities = []
    for n, (sent, ls) in enumerate(zip(src, links)):
        try:
            counts = alignment_counts(ls, len(sent))
        except DataError as exc:
            raise DataError(f"alignment of sentence {n + 1}: {exc}") from None
        out.append([float(max(1, c)) for c in counts])
    return out


def require_predictor(predictor: str | Path | None, *, key: str = "attention.fertility") -> Path:
    """Check that the ``predicted`` strategy has a trained predictor; return its path.

    Raises:
        ConfigError: ``predictor`` is unset (names the config key and how to train
            one) or points to nothing.
    """
    if predictor is None or str(predictor).strip() == "":
        raise ConfigError(
            f"{key}: strategy 'predicted' needs a trained fertility predictor, but none is configured; "
            "train one first and set its path, or use 'constant', 'guided' or 'actual'"
        )
    path = Path(predictor)
    if not path.exists():
        raise ConfigError(f"{key}: fertility predictor {str(path)!r} not found (train it first)")
    return path


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

_SAFE = re.compile(r"^[A-Za-z0-9.+_]{1,24}$")


def _param_tag(params: Mapping[str, object]) -> str:
    if len(params) == 1:
        (v,) = params.values()
        s = format_value(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)
        if _SAFE.match(s):
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
    if not re.match(r"^[A-Za-z0-9_.-]+$", split):
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


def _read_split_links(align_dir: Path, split: str, src: list[list[str]], data_dir: Path) -> list[set[Link]]:
    from scanmt.data.links import read_links

    path = alignment_path(align_dir, split)
    if not path.exists():
        raise DataError(f"{path}: no {LEVEL} alignment for split {split!r}; run `scanmt align --data {data_dir}` first")
    return [sure for sure, _ in read_links(path, src_lens=[len(s) for s in src])]


def train_guided(data_dir: str | Path, align_dir: str | Path | None = None) -> GuidedFertility:
    """The guided table learned from ``data_dir``'s training source and its subword alignment."""
    data_dir = Path(data_dir)
    meta = read_meta(data_dir)
    align_dir = Path(align_dir) if align_dir else data_dir / ALIGN_DIR
    train_src = data_dir / f"train.bpe.{meta['src_lang']}"
    train_align = alignment_path(align_dir, "train")
    if not train_align.exists():
        raise DataError(f"{train_align}: no training alignment; run `scanmt align --data {data_dir}` first")
    train = [ln.split() for ln in read_lines(train_src, what="source file")]
    guided = GuidedFertility.train(train, _read_split_links(align_dir, "train", train, data_dir))
    log.info("guided fertility: %d source types from %d training pairs", len(guided.table), len(train))
    return guided


def compute_fertility(
    data_dir: str | Path,
    split: str,
    strategy: str,
    *,
    value: float | None = None,
    align_dir: str | Path | None = None,
    predictor: Callable[[list[list[str]]], Sequence[Sequence[float]]] | None = None,
    predictor_id: str | None = None,
    force: bool = False,
) -> CachedFertility:
    """Fertilities of one split of a prepared directory, cached (computed once).

    Args:
        data_dir: prepared data (``meta.json``, ``{split}.bpe.{src_lang}``).
        split: e.g. ``train``, ``valid``, ``test``.
        strategy: one of :data:`STRATEGIES`.
        value: the constant (``constant`` only).
        align_dir: where ``scanmt align`` wrote ``{split}.subword.align``
            (default ``data_dir/align``); ``guided`` reads the train split's,
            ``actual`` the split's own.
        predictor: ``predicted`` only: maps source token lists to fertilities.
        predictor_id: ``predicted`` only: identifies the trained predictor in
            the cache key (e.g. its checkpoint's SHA-256).
        force: recompute even if cached.
    """
    data_dir = Path(data_dir)
    if strategy not in STRATEGIES:
        raise ConfigError(f"unknown fertility strategy {strategy!r}; choose one of: {', '.join(STRATEGIES)}")
    if strategy != "constant" and value is not None:
        raise ConfigError(f"fertility strategy {strategy!r} takes no value (only 'constant' does)")
    meta = read_meta(data_dir)
    src_path = data_dir / f"{split}.bpe.{meta['src_lang']}"
    if not src_path.exists():
        raise DataError(f"{src_path}: no subword source for split {split!r} in {data_dir}")
    align_dir = Path(align_dir) if align_dir is not None else data_dir / ALIGN_DIR

    if strategy == "constant":
        if value is None:
            raise ConfigError("fertility strategy 'constant' needs a value (e.g. --value 2)")
        strat = constant(value)
        return cached_fertility(data_dir, split, strategy, strat.params, src_path, strat.apply, force=force)

    if strategy == "guided":
        train_align = alignment_path(align_dir, "train")
        train_src = data_dir / f"train.bpe.{meta['src_lang']}"
        if not train_align.exists():
            raise DataError(f"{train_align}: no training alignment; run `scanmt align --data {data_dir}` first")
        params = {"align": file_digest(train_align)[:16], "train_src": file_digest(train_src)[:16]}

        def compute(src: list[list[str]]) -> Fertilities:
            return train_guided(data_dir, align_dir).apply(src)

        return cached_fertility(data_dir, split, strategy, params, src_path, compute, force=force)

    if strategy == "actual":
        split_align = alignment_path(align_dir, split)
        if not split_align.exists():
            raise DataError(f"{split_align}: no alignment for split {split!r}; run `scanmt align --data {data_dir}` first")
        params = {"align": file_digest(split_align)[:16], "rule": "max1"}

        def compute(src: list[list[str]]) -> Fertilities:
            return actual_fertility(src, _read_split_links(align_dir, split, src, data_dir))

        return cached_fertility(data_dir, split, strategy, params, src_path, compute, force=force)

    # predicted
    if predictor is None or not predictor_id:
        raise ConfigError(
            "fertility strategy 'predicted' needs a trained fertility predictor, but none was given; "
            "train one first, or use 'constant', 'guided' or 'actual'"
        )
    return cached_fertility(data_dir, split, strategy, {"predictor": predictor_id}, src_path, predictor, force=force)
