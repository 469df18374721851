"""Fertility-bounded attention: the paper's bound bookkeeping, shared by every architecture.

For scores ``z`` over the source columns (the sink last, with bound ``f = inf``), fertilities ``f``
and the attention paid so far ``attention_sum`` (the paper's cumulative attention)::

    u     = max(0, f - attention_sum)        # what each source word may still receive
    z'    = z + c * u                        # the exhaustion bonus, real words only (u is inf at the sink)
    p     = transform(z', u, mask)           # csoftmax / csparsemax: 0 <= p_j <= u_j, sum 1
    attention_sum' = attention_sum + p

The recurrence over target positions is one op, :func:`scanmt.ops.bounded_recurrence`
(:meth:`BoundedTransform.recurrence`): the Transformer's bounded heads call it over all ``T`` positions of
teacher forcing at once, and over one position per step of incremental decoding; the LSTM once per step
(:meth:`BoundedTransform.step`).  On the CPU it loops over the positions with the transform ops, as this
module did before it; on a GPU it runs Triton kernels (``scanmt[gpu]``).

Unconstrained transforms (softmax, sparsemax, entmax15, entmax) take no bounds: ``u`` is None and
``p = transform(z, mask)``.

alpha-entmax (``entmax``) and its constrained form (``centmax``) take an ``alpha`` as well
(:data:`scanmt.choices.ALPHA_TRANSFORMS`): the fixed ``model.attention.alpha`` held here, or a learned
one (:class:`LearnedAlpha`, owned by the model: one per model, or one per Transformer head) passed to
:meth:`BoundedTransform.forward`.
The sink (:mod:`scanmt.fertility.sink`) is appended by the model's ``encode``; its infinite bound
absorbs the attention that the real words' bounds no longer allow.  Leading dimensions are free
(``[B, S]`` for the LSTM's one attention, ``[B, heads, S]`` for a Transformer's heads), as long as
``f``, ``attention_sum`` and ``mask`` broadcast against ``z``.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from scanmt import ops
from scanmt.fertility.rules import check_exhaustion
from scanmt.model.transforms import get_transform


class LearnedAlpha(nn.Module):
    """A learned alpha of ``entmax`` / ``centmax`` (``model.attention.learn_alpha``): ``alpha = 1 + softplus(raw)``,
    never below 1 (softmax's limit, where the ops compute softmax / csoftmax), starting at ``init``
    (``model.attention.alpha``).

    ``shape`` is ``()`` for one alpha per model, ``(layers, heads)`` for one per Transformer cross-attention
    head.  Only models that learn alpha have this module, so the weights of every other model (and
    checkpoints written before it existed) are unchanged.
    """

    def __init__(self, init: float, shape: tuple[int, ...] = ()):
        super().__init__()
        self.init = float(init)
        self.raw = nn.Parameter(torch.empty(shape))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Put alpha back at ``init`` (after a uniform init of all parameters)."""
        # the inverse of softplus: softplus(raw) = init - 1
        with torch.no_grad():
            self.raw.fill_(math.log(math.expm1(self.init - 1.0)))

    def forward(self) -> torch.Tensor:
        """alpha, of the module's shape."""
        return 1.0 + F.softplus(self.raw)


class BoundedTransform(nn.Module):
    """The attention transform of ``model.attention.transform`` with fertility bounds and exhaustion ``c``.

    ``alpha`` is the fixed alpha of the transforms that have one (``entmax``, ``centmax``; ignored by
    the others); a learned alpha is given to :meth:`forward` instead.
    """

    def __init__(self, transform: str, exhaustion: float = 0.0, alpha: float = 1.5):
        super().__init__()
        self.transform = get_transform(transform)
        check_exhaustion(self.transform.name, exhaustion)
        self.exhaustion = exhaustion
        self.alpha = float(alpha)

    @property
    def constrained(self) -> bool:
        return self.transform.constrained

    def forward(
        self, z: torch.Tensor, mask: torch.Tensor, bounds: torch.Tensor | None, alpha: torch.Tensor | None = None
    ) -> torch.Tensor:
        """``z [..., S]`` scores, ``mask [..., S]``, bounds ``u [..., S]`` (or None) -> attention ``[..., S]``
        (exactly 0 at masked columns).  ``alpha``: a learned alpha of an alpha transform (one value per row:
        broadcastable to ``z`` with size 1 along the last dimension), else the fixed one is used."""
        if bounds is not None and self.exhaustion:
            z = z + self.exhaustion * torch.where(torch.isfinite(bounds), bounds, torch.zeros_like(bounds))
        if self.transform.alpha:
            return self.transform.fn(z, bounds if self.transform.constrained else None, mask,
                                     self.alpha if alpha is None else alpha)
        return self.transform.fn(z, bounds if self.transform.constrained else None, mask)

    @staticmethod
    def accumulate(attention_sum: torch.Tensor, attention: torch.Tensor) -> torch.Tensor:
        """``attention_sum + attention``: the cumulative attention after one more output word."""
        return attention_sum + attention

    def recurrence(
        self, z: torch.Tensor, mask: torch.Tensor, fertility: torch.Tensor | None, attention_sum: torch.Tensor,
        alpha: torch.Tensor | None = None, shared: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The bounded transform over ``T`` consecutive positions (:func:`scanmt.ops.bounded_recurrence`).

        Args:
            z: ``[..., T, S]`` scores.
            mask: ``[..., S]`` (broadcastable), True at real tokens and the sink.
            fertility: ``[..., S]`` (broadcastable) bounds ``f`` (``inf`` at the sink, 0 at padding).
            attention_sum: ``[..., S]`` cumulative attention before the first position (``[..., 1, S]``
                with ``shared``: the heads at dimension -3 of ``z`` share it).
            alpha: a learned alpha of an alpha transform (one per row: broadcastable to ``[..., 1]``), else
                the fixed one.

        Returns:
            the attention ``[..., T, S]`` and the cumulative attention after the last position.
        """
        a = (self.alpha if alpha is None else alpha) if self.transform.alpha else None
        return ops.bounded_recurrence(z, fertility, self.transform.name, mask=mask, exhaustion=self.exhaustion,
                                      attention_sum=attention_sum, alpha=a, shared=shared)

    def step(
        self, z: torch.Tensor, mask: torch.Tensor, fertility: torch.Tensor | None, attention_sum: torch.Tensor,
        alpha: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """One position: ``z [..., S]`` -> attention ``[..., S]``: the bounded recurrence with ``T = 1`` for a
        constrained transform with fertilities, else the transform.  The caller adds it to the cumulative
        attention (:meth:`accumulate`) once everything else has used it: the op's own, equal sum would
        change the order in which autograd adds the gradients of the attention's consumers (the LSTM's
        gradients would differ from the loop this replaced by rounding)."""
        if self.constrained and fertility is not None:
            return self.recurrence(z.unsqueeze(-2), mask, fertility, attention_sum, alpha)[0].squeeze(-2)
        return self(z, mask, None, alpha)
