"""Attention: scores, optional exhaustion bonus, and a transform from the registry.

Scores (``query`` is the decoder state after reading the previous output word,
as in OpenNMT's global attention):

* ``general`` (Luong bilinear): ``z_j = s^T W h_j``; ``W h_j`` is computed once per
  sentence by :meth:`Attention.keys`.
* ``mlp`` (Bahdanau): ``z_j = v^T tanh(W s + U h_j)``; ``U h_j`` precomputed.

Score scaling (``model.attention.scaling``) controls how fast the score gaps
can grow; sparse transforms need this, because a sparsemax row with a support
of one has a zero Jacobian and its scores stop learning (docs/attention-recipe.md):

* ``none``: the scores as above (the paper's OpenNMT-py model);
* ``sqrt``: ``z / sqrt(d)`` with ``d`` the query size (scaled dot product);
* ``learned``: ``g * z`` with a learned scalar ``g = exp(log_g)``, initialised to ``1 / sqrt(d)``;
* ``cosine``: ``g * cos(s, W h_j)`` (normalised queries and keys, ``general`` only), ``g`` learned
  and initialised to 1, so that the score gaps are at most ``2 g``.

With fertility bounds ``u`` (constrained transforms), the exhaustion strategy
adds ``c * u_j`` to the scores of real tokens (never the sink, whose bound is
infinite): :class:`~scanmt.model.bounds.BoundedTransform`, shared with the Transformer.

``entmax`` and ``centmax`` use ``model.attention.alpha``; with ``learn_alpha: model`` the module owns
a :class:`~scanmt.model.bounds.LearnedAlpha` (``self.alpha``, ``alpha = 1 + softplus(raw)``, starting at
``model.attention.alpha``) and passes it to the transform; without it there is no such parameter.

With a CovVector (Tu et al.'s coverage models, :mod:`scanmt.model.lstm.covvector`), the term
``V C_{t-1,j}`` is added to the keys before scoring, for both scores and before
any transform (padding stays masked)::

    general:  z_j = s^T (W h_j + V C_j)                 (the paper, Section 5)
    mlp:      z_j = v^T tanh(W s + U h_j + V C_j)       (Tu et al. 2016, Section 3.2)
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from scanmt.model.bounds import BoundedTransform, LearnedAlpha


class Attention(nn.Module):
    def __init__(
        self,
        query_size: int,
        memory_size: int,
        score: str,
        transform: str,
        exhaustion: float = 0.0,
        scaling: str = "none",
        alpha: float = 1.5,
        learn_alpha: bool = False,
    ):
        super().__init__()
        self.score = score
        #: the transform with the fertility bounds and the exhaustion bonus (scanmt.model.bounds)
        self.bounded = BoundedTransform(transform, exhaustion, alpha)
        #: the learned alpha of entmax / centmax (model.attention.learn_alpha: model), else None
        self.alpha = LearnedAlpha(alpha) if learn_alpha else None
        # score and scaling are among scanmt.choices' (checked when the Config was built)
        self.scaling = scaling
        #: fixed multiplier of the scores (``sqrt``); ``learned`` starts its scale at the same 1/sqrt(d)
        self.fixed_scale = 1.0 / math.sqrt(query_size) if scaling == "sqrt" else 1.0
        self._init_log_scale = -0.5 * math.log(query_size) if scaling == "learned" else 0.0
        if scaling in ("learned", "cosine"):
            self.log_scale = nn.Parameter(torch.tensor(self._init_log_scale))
        #: when a list, every step's scores ``z`` are appended with their gradient retained (diagnostics)
        self.probe: list[torch.Tensor] | None = None
        if score == "general":
            self.W = nn.Linear(memory_size, query_size, bias=False)
        else:  # mlp
            self.U = nn.Linear(memory_size, query_size, bias=True)
            self.Wq = nn.Linear(query_size, query_size, bias=False)
            self.v = nn.Linear(query_size, 1, bias=False)

    def keys(self, memory: torch.Tensor) -> torch.Tensor:
        """``[B, S, Hm]`` -> ``[B, S, Hq]`` projected memory (computed once per sentence)."""
        return self.W(memory) if self.score == "general" else self.U(memory)

    def scores(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """``query [B, Hq]``, ``keys [B, S, Hq]`` -> scaled scores ``z [B, S]``."""
        if self.scaling == "cosine":
            query, keys = F.normalize(query, dim=-1), F.normalize(keys, dim=-1)
        if self.score == "general":
            z = torch.bmm(keys, query.unsqueeze(2)).squeeze(2)
        else:
            z = self.v(torch.tanh(keys + self.Wq(query).unsqueeze(1))).squeeze(2)
        if self.scaling in ("learned", "cosine"):
            return z * self.log_scale.exp()
        return z * self.fixed_scale if self.fixed_scale != 1.0 else z

    def reset_scale(self) -> None:
        """Put the learned scale (and a learned alpha) back at its initial value (after a uniform init of all
        parameters)."""
        if self.scaling in ("learned", "cosine"):
            with torch.no_grad():
                self.log_scale.fill_(self._init_log_scale)
        if self.alpha is not None:
            self.alpha.reset_parameters()

    def forward(
        self,
        query: torch.Tensor,
        keys: torch.Tensor,
        memory: torch.Tensor,
        mask: torch.Tensor,
        fertility: torch.Tensor | None,
        attention_sum: torch.Tensor,
        covvector_term: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One decoder step.

        Args:
            query: ``[B, Hq]``.
            keys: ``[B, S, Hq]`` from :meth:`keys`.
            memory: ``[B, S, Hm]`` encoder states.
            mask: ``[B, S]`` bool, True for real tokens (and the sink).
            fertility: ``[B, S]`` bounds ``f`` (``inf`` for the sink) of a constrained transform, or None.
            attention_sum: ``[B, S]`` cumulative attention before this step.
            covvector_term: ``[B, S, Hq]`` the CovVector's term ``V C_{t-1}`` added to the keys, or None.

        Returns:
            context ``[B, Hm]`` and attention ``[B, S]`` (exactly 0 at padding): the bounded recurrence of one
            position (:meth:`BoundedTransform.step`; the caller adds it to ``attention_sum``).
        """
        if covvector_term is not None:
            keys = keys + covvector_term
        z = self.scores(query, keys)
        if self.probe is not None and z.requires_grad:
            z.retain_grad()
            self.probe.append(z)
        attention = self.bounded.step(z, mask, fertility, attention_sum, self.alpha() if self.alpha is not None else None)
        context = torch.bmm(attention.unsqueeze(1), memory).squeeze(1)
        return context, attention
