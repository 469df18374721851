"""The sink convention: whether a model appends the ``<sink>`` source token, and where.

A model with a sink appends one ``<sink>`` token (id ``SINK_ID``, fertility bound ``+inf``)
right after the last real token of every source sentence: at position ``src_len`` of the
padded batch (:func:`sink_index`), so a sentence of ``S`` subwords is attended over
``S + 1`` columns (:func:`columns`), the sink last.  Attention matrices, their labels
(:func:`source_labels`), bounds (:func:`column_bounds`) and attention files follow that
order.  With ``model.attention.sink: null`` (the default) a model has a sink exactly when
its transform is constrained (:func:`uses_sink`): the sink absorbs the attention that the
bounds of the real tokens no longer allow.
"""

from __future__ import annotations

from typing import Sequence

import torch

from scanmt.data.vocab import PAD_ID, SINK, SINK_ID
from scanmt.fertility.rules import is_constrained

__all__ = ["SINK", "uses_sink", "sink_index", "columns", "append_sink", "source_labels", "column_bounds"]


def uses_sink(transform: str, sink: bool | None) -> bool:
    """Whether a model appends the sink: ``model.attention.sink``, or (null) whether ``transform`` is constrained."""
    return is_constrained(transform) if sink is None else bool(sink)


def sink_index(src_len: torch.Tensor) -> torch.Tensor:
    """Where the sink sits: ``[B]`` source lengths without it -> its position ``[B]`` (right after the last token)."""
    return src_len


def columns(n_src: int, sink: bool) -> int:
    """Attention columns of a sentence of ``n_src`` subwords: the sink adds one."""
    return n_src + int(sink)


def append_sink(
    src: torch.Tensor, src_len: torch.Tensor, fertility: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Append the sink: ``src [B, S]`` -> ``[B, S + 1]``, ``src_len + 1``, fertility ``[B, S + 1]`` (``inf`` at the sink)."""
    B = src.size(0)
    at = sink_index(src_len).unsqueeze(1)
    src = torch.cat([src, src.new_full((B, 1), PAD_ID)], dim=1).scatter(1, at, SINK_ID)
    if fertility is not None:
        fertility = torch.cat([fertility, fertility.new_zeros(B, 1)], dim=1).scatter(1, at, float("inf"))
    return src, src_len + 1, fertility


def source_labels(src_pieces: Sequence[str], sink: bool) -> list[str]:
    """The labels of a sentence's attention columns: its subwords, then ``<sink>`` if the model has one."""
    return list(src_pieces) + ([SINK] if sink else [])


def column_bounds(fertility: Sequence[float], sink: bool) -> list[float]:
    """The bound of every attention column: the subwords' ``fertility``, then ``inf`` for the sink."""
    return [float(f) for f in fertility] + ([float("inf")] if sink else [])
