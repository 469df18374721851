"""Fertility-bounded attention: the paper's bound bookkeeping, shared by every architecture.

For scores ``z`` over the source columns (the sink last, with bound ``f = inf``), fertilities ``f``
and the attention paid so far ``attention_sum`` (the paper's cumulative attention beta)::

    u     = max(0, f - attention_sum)        # what each source word may still receive
    z'    = z + c * u                        # the exhaustion bonus, real words only (u is inf at the sink)
    p     = transform(z', u, mask)           # csoftmax / csparsemax: 0 <= p_j <= u_j, sum 1
    attention_sum' = attention_sum + p

Unconstrained transforms (softmax, sparsemax) take no bounds: ``u`` is None and ``p = transform(z, mask)``.
The sink (:mod:`scanmt.fertility.sink`) is appended by the model's ``encode``; its infinite bound
absorbs the attention that the real words' bounds no longer allow.  Leading dimensions are free
(``[B, S]`` for the LSTM's one attention, ``[B, heads, S]`` for a Transformer's heads), as long as
``f``, ``attention_sum`` and ``mask`` broadcast against ``z``.
"""

from __future__ import annotations

import torch
from torch import nn

from scanmt.fertility.rules import check_exhaustion
from scanmt.model.transforms import get_transform


class BoundedTransform(nn.Module):
    """The attention transform of ``model.attention.transform`` with fertility bounds and exhaustion ``c``."""

    def __init__(self, transform: str, exhaustion: float = 0.0):
        super().__init__()
        self.transform = get_transform(transform)
        check_exhaustion(self.transform.name, exhaustion)
        self.exhaustion = exhaustion

    @property
    def constrained(self) -> bool:
        return self.transform.constrained

    def bounds(self, fertility: torch.Tensor | None, attention_sum: torch.Tensor) -> torch.Tensor | None:
        """``u = max(0, f - attention_sum)``, or None without fertilities."""
        if fertility is None:
            return None
        return (fertility - attention_sum).clamp_min(0.0)

    def forward(self, z: torch.Tensor, mask: torch.Tensor, bounds: torch.Tensor | None) -> torch.Tensor:
        """``z [..., S]`` scores, ``mask [..., S]``, ``bounds`` from :meth:`bounds` -> attention ``[..., S]``
        (exactly 0 at masked columns)."""
        if bounds is not None and self.exhaustion:
            z = z + self.exhaustion * torch.where(torch.isfinite(bounds), bounds, torch.zeros_like(bounds))
        return self.transform.fn(z, bounds if self.transform.constrained else None, mask)

    @staticmethod
    def accumulate(attention_sum: torch.Tensor, attention: torch.Tensor) -> torch.Tensor:
        """``attention_sum + attention``: the cumulative attention after one more output word."""
        return attention_sum + attention
