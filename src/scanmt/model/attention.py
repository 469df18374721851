"""Attention: scores, optional exhaustion bonus, and a transform from the registry.

Scores (``query`` is the decoder state after reading the previous output word,
as in OpenNMT's global attention):

* ``general`` (Luong bilinear): ``z_j = s^T W h_j``; ``W h_j`` is computed once per
  sentence by :meth:`Attention.keys`.
* ``mlp`` (Bahdanau): ``z_j = v^T tanh(W s + U h_j)``; ``U h_j`` precomputed.

With fertility bounds ``u`` (constrained transforms), the exhaustion strategy
adds ``c * u_j`` to the scores of real tokens (never the sink, whose bound is
infinite).

With a coverage model (CovVector, :mod:`scanmt.model.coverage`), the term
``V C_{t-1,j}`` is added to the keys before scoring, for both scores and before
any transform (padding stays masked)::

    general:  z_j = s^T (W h_j + V C_j)                 (the paper, Section 5)
    mlp:      z_j = v^T tanh(W s + U h_j + V C_j)       (Tu et al. 2016, Section 3.2)
"""

from __future__ import annotations

import torch
from torch import nn

from scanmt.model.transforms import get_transform


class Attention(nn.Module):
    def __init__(self, query_size: int, memory_size: int, score: str, transform: str, exhaustion: float = 0.0):
        super().__init__()
        self.score = score
        self.transform = get_transform(transform)
        self.exhaustion = exhaustion
        if score == "general":
            self.W = nn.Linear(memory_size, query_size, bias=False)
        elif score == "mlp":
            self.U = nn.Linear(memory_size, query_size, bias=True)
            self.Wq = nn.Linear(query_size, query_size, bias=False)
            self.v = nn.Linear(query_size, 1, bias=False)
        else:
            from scanmt.errors import ConfigError

            raise ConfigError(f"model.attention.score: unknown score {score!r} (known: general, mlp)")

    def keys(self, memory: torch.Tensor) -> torch.Tensor:
        """``[B, S, Hm]`` -> ``[B, S, Hq]`` projected memory (computed once per sentence)."""
        return self.W(memory) if self.score == "general" else self.U(memory)

    def scores(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """``query [B, Hq]``, ``keys [B, S, Hq]`` -> ``z [B, S]``."""
        if self.score == "general":
            return torch.bmm(keys, query.unsqueeze(2)).squeeze(2)
        return self.v(torch.tanh(keys + self.Wq(query).unsqueeze(1))).squeeze(2)

    def forward(
        self,
        query: torch.Tensor,
        keys: torch.Tensor,
        memory: torch.Tensor,
        mask: torch.Tensor,
        bounds: torch.Tensor | None = None,
        coverage: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One decoder step.

        Args:
            query: ``[B, Hq]``.
            keys: ``[B, S, Hq]`` from :meth:`keys`.
            memory: ``[B, S, Hm]`` encoder states.
            mask: ``[B, S]`` bool, True for real tokens (and the sink).
            bounds: ``[B, S]`` upper bounds ``u = f - beta`` (``inf`` for the sink), or None.
            coverage: ``[B, S, Hq]`` coverage term ``V C_{t-1}`` added to the keys, or None.

        Returns:
            context ``[B, Hm]`` and attention ``[B, S]`` (exactly 0 at padding).
        """
        if coverage is not None:
            keys = keys + coverage
        z = self.scores(query, keys)
        if bounds is not None and self.exhaustion:
            z = z + self.exhaustion * torch.where(torch.isfinite(bounds), bounds, torch.zeros_like(bounds))
        alpha = self.transform.fn(z, bounds if self.transform.constrained else None, mask)
        context = torch.bmm(alpha.unsqueeze(1), memory).squeeze(1)
        return context, alpha
