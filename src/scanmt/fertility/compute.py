"""A split's fertilities for a strategy, computed once and cached next to the prepared data.

:func:`compute_fertility` applies a provider (:mod:`scanmt.fertility.providers`) to the
subword source of one split of a prepared directory and caches the result
(:func:`scanmt.data.fertility.cached_fertility`): ``constant`` and ``guided`` (table
learned from the training alignment, :func:`train_guided`) bound any split; ``actual``
reads the split's own alignment (an oracle); ``predicted`` needs a trained predictor,
given as a function and an id for the cache key (:func:`require_predictor` checks
that one is configured).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable, Sequence

from scanmt.data.fertility import (
    ALIGN_DIR,
    CachedFertility,
    Fertilities,
    alignment_path,
    cached_fertility,
    file_digest,
    read_split_links,
)
from scanmt.data.prepare import read_meta
from scanmt.errors import ConfigError, DataError
from scanmt.fertility.providers import GuidedFertility, actual_fertility, constant
from scanmt.fertility.rules import ORACLE, STRATEGIES
from scanmt.io import read_lines

log = logging.getLogger(__name__)

#: strategies :func:`compute_fertility` computes itself (``predicted`` needs a predictor)
BUILTIN: tuple[str, ...] = ("constant", "guided", ORACLE)


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
    guided = GuidedFertility.train(train, read_split_links(align_dir, "train", train, data_dir))
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

    if strategy == ORACLE:
        split_align = alignment_path(align_dir, split)
        if not split_align.exists():
            raise DataError(f"{split_align}: no alignment for split {split!r}; run `scanmt align --data {data_dir}` first")
        params = {"align": file_digest(split_align)[:16], "rule": "max1"}

        def compute(src: list[list[str]]) -> Fertilities:
            return actual_fertility(src, read_split_links(align_dir, split, src, data_dir))

        return cached_fertility(data_dir, split, strategy, params, src_path, compute, force=force)

    # predicted
    if predictor is None or not predictor_id:
        raise ConfigError(
            "fertility strategy 'predicted' needs a trained fertility predictor, but none was given; "
            "train one first, or use 'constant', 'guided' or 'actual'"
        )
    return cached_fertility(data_dir, split, strategy, {"predictor": predictor_id}, src_path, predictor, force=force)
