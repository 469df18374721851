"""Sparsity and coverage statistics of attention matrices.

Every sentence gives an attention matrix ``[T, S]`` (output step × source
subword, as stored by ``scanmt translate --attention-out``), optionally with a
``<sink>`` column last and fertility upper bounds ``[S]``.

- ``zero_fraction``: share of exactly-zero entries over all matrices (all
  rows and columns, sink included: the model's whole distribution).
- ``mean_attended``: mean over output steps of the number of source positions
  with non-zero weight (sink included): the *support* (:func:`support_sizes`,
  the same definition as the training log's ``attn/support``).
- ``one_hot_share``: share of output steps whose largest weight exceeds
  :data:`ONE_HOT_THRESHOLD` (training log: ``attn/one_hot``).
- ``mean_max_weight``: mean over output steps of the largest weight
  (training log: ``attn/max_weight``).
- ``mean_max_cumulative``: mean over sentences of ``max_j Σ_t a[t, j]``, the
  attention received by the most-attended real source token.
- ``max_fertility_ratio``: ``max Σ_t a[t, j] / f_j`` over all real source
  tokens with fertility (≤ 1 when the constraints hold), and
  ``mean_max_fertility_ratio`` its per-sentence maximum averaged over
  sentences; ``None`` when no fertility is stored.
- ``unattended_share``: share of real source tokens whose total attention is
  below ``threshold`` (0.1: "never attended", coverage analysis).
- ``sink_share``: mean over the output steps of sentences with a sink of the
  weight the sink receives (``None`` when no sentence has one).  The sink's
  bound is infinite, so it takes the attention the real words' bounds no
  longer allow; a share well above what the bounds force means the model
  attends the sink freely, as a "no source word" slot.
- ``saturated_share``: share of real source tokens with a finite fertility
  whose total attention reaches :data:`SATURATED` of their bound (``None``
  when no fertility is stored): how often the bounds actually bind.

"Real" source tokens exclude the sink column.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np

from scanmt.errors import DataError

#: an output step whose largest attention weight exceeds this counts as one-hot
ONE_HOT_THRESHOLD = 0.999
#: a source token whose total attention reaches this share of its fertility bound counts as saturated
SATURATED = 0.99


def support_sizes(attention):
    """Number of source positions with non-zero weight per output step.

    Works on NumPy arrays and torch tensors alike: ``[..., S]`` -> ``[...]``.
    Training logs and ``scanmt evaluate --attention`` both count support with it.
    """
    return (attention != 0).sum(-1)


def one_hot_steps(attention):
    """Boolean ``[...]``: output steps whose largest weight exceeds :data:`ONE_HOT_THRESHOLD` (``[..., S]`` input)."""
    top = attention.amax(-1) if hasattr(attention, "amax") else attention.max(-1)  # torch | NumPy
    return top > ONE_HOT_THRESHOLD


@dataclass(frozen=True)
class AttentionStats:
    """Corpus-level attention statistics (see the module docstring)."""

    sentences: int
    steps: int
    source_tokens: int
    zero_fraction: float
    mean_attended: float
    one_hot_share: float
    mean_max_weight: float
    mean_max_cumulative: float
    max_fertility_ratio: float | None
    mean_max_fertility_ratio: float | None
    unattended_share: float
    threshold: float
    sink_share: float | None = None
    saturated_share: float | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def attention_stats(
    attentions: Sequence[np.ndarray],
    *,
    sink: Sequence[bool] | None = None,
    fertilities: Sequence[np.ndarray | None] | None = None,
    threshold: float = 0.1,
) -> AttentionStats:
    """Compute :class:`AttentionStats`.

    Args:
        attentions: per sentence ``[T, S]``.
        sink: per sentence, whether the last column is the sink (default: none).
        fertilities: per sentence ``[S]`` upper bounds or ``None``.
        threshold: total attention below which a source token counts as never attended.

    Raises:
        DataError: no sentences, mismatched lengths, or a fertility of the wrong size.
    """
    n = len(attentions)
    if n == 0:
        raise DataError("attention statistics: no sentences")
    sink = list(sink) if sink is not None else [False] * n
    fertilities = list(fertilities) if fertilities is not None else [None] * n
    if len(sink) != n or len(fertilities) != n:
        raise DataError(f"attention statistics: {n} matrices but {len(sink)} sink flags and {len(fertilities)} fertilities")
    entries = zeros = steps = attended = src_tokens = unattended = one_hot = 0
    max_weight_sum = 0.0
    max_cum: list[float] = []
    ratios_max: list[float] = []
    sink_steps = bounded = saturated = 0
    sink_weight = 0.0
    for k, (a, has_sink, fert) in enumerate(zip(attentions, sink, fertilities)):
        a = np.asarray(a, dtype=np.float64)
        if a.ndim != 2:
            raise DataError(f"attention statistics: sentence {k}: expected a [T, S] matrix, got shape {a.shape}")
        entries += a.size
        zeros += int((a == 0).sum())
        steps += a.shape[0]
        attended += int(support_sizes(a).sum())
        if a.shape[1]:
            one_hot += int(one_hot_steps(a).sum())
            max_weight_sum += float(a.max(axis=1).sum())
        real = a[:, :-1] if has_sink else a
        if has_sink:
            sink_steps += a.shape[0]
            sink_weight += float(a[:, -1].sum())
        cum = real.sum(axis=0)  # [S_real]
        src_tokens += cum.size
        unattended += int((cum < threshold).sum())
        if cum.size:
            max_cum.append(float(cum.max()))
        if fert is not None:
            f = np.asarray(fert, dtype=np.float64)
            if f.shape != (a.shape[1],):
                raise DataError(f"attention statistics: sentence {k}: fertility shape {f.shape}, expected ({a.shape[1]},)")
            f = f[:-1] if has_sink else f
            finite = np.isfinite(f)
            ok = finite & (f > 0)
            if ok.any():
                ratios_max.append(float((cum[ok] / f[ok]).max()))
            bounded += int(finite.sum())
            saturated += int((cum[finite] >= SATURATED * f[finite]).sum())
    return AttentionStats(
        sentences=n,
        steps=steps,
        source_tokens=src_tokens,
        zero_fraction=zeros / entries if entries else 0.0,
        mean_attended=attended / steps if steps else 0.0,
        one_hot_share=one_hot / steps if steps else 0.0,
        mean_max_weight=max_weight_sum / steps if steps else 0.0,
        mean_max_cumulative=float(np.mean(max_cum)) if max_cum else 0.0,
        max_fertility_ratio=max(ratios_max) if ratios_max else None,
        mean_max_fertility_ratio=float(np.mean(ratios_max)) if ratios_max else None,
        unattended_share=unattended / src_tokens if src_tokens else 0.0,
        threshold=threshold,
        sink_share=sink_weight / sink_steps if sink_steps else None,
        saturated_share=saturated / bounded if bounded else None,
    )
