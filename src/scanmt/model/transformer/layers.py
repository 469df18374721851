"""The Transformer's layers (:mod:`scanmt.model.transformer.model` composes them): self-attention, the
cross-attention with fertility-bounded heads, the position-wise feed-forward, encoder and decoder layers, and
their helpers (sinusoidal positions, head splitting, Xavier initialisation of fused projections).

See :mod:`scanmt.model.transformer.model` for the attention's heads, bounds and alpha.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from scanmt.errors import ConfigError
from scanmt.fertility.rules import is_constrained
from scanmt.model.bounds import BoundedTransform
from scanmt.model.transformer.fused_attention import fused_attention

#: the unconstrained transform of a constrained transform's family (the heads without bounds)
FAMILY: dict[str, str] = {"csoftmax": "softmax", "csparsemax": "sparsemax", "centmax": "entmax"}


def unconstrained(transform: str) -> str:
    """The transform of the heads that take no bounds: ``transform`` itself, or its family's unconstrained one."""
    if not is_constrained(transform):
        return transform
    if transform not in FAMILY:
        raise ConfigError(
            f"model.attention.transform={transform}: the transformer does not know the unconstrained transform "
            f"of its family (known: {', '.join(f'{k} -> {v}' for k, v in FAMILY.items())})"
        )
    return FAMILY[transform]


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """At least float32: the dtype of explicit scores, transforms and cumulative attention."""
    return torch.promote_types(dtype, torch.float32)


def sinusoids(n: int, d: int) -> torch.Tensor:
    """``[n, d]`` sinusoidal position encodings (sin on even, cos on odd dimensions)."""
    pos = torch.arange(n, dtype=torch.float64).unsqueeze(1)
    freq = torch.exp(torch.arange(0, d, 2, dtype=torch.float64) * (-math.log(10000.0) / d))
    pe = torch.zeros(n, d, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(pos * freq)
    pe[:, 1::2] = torch.cos(pos * freq)[:, : d // 2]
    return pe.float()


def split_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    """``[N, T, d]`` -> ``[N, heads, T, d / heads]``."""
    N, T, d = x.shape
    return x.view(N, T, heads, d // heads).transpose(1, 2)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """``[N, heads, T, d_head]`` -> ``[N, T, heads * d_head]``."""
    N, h, T, dh = x.shape
    return x.transpose(1, 2).reshape(N, T, h * dh)


def xavier_blocks(linear: nn.Linear, d: int) -> None:
    """Xavier-uniform init of every ``[d, in]`` block of a fused projection; zero bias."""
    for block in linear.weight.data.split(d, dim=0):
        nn.init.xavier_uniform_(block)
    if linear.bias is not None:
        nn.init.zeros_(linear.bias)


# ---------------------------------------------------------------------- attention
class SelfAttention(nn.Module):
    """Multi-head self-attention (fused ``scaled_dot_product_attention``), with a key/value cache."""

    def __init__(self, d: int, heads: int, dropout: float):
        super().__init__()
        self.d, self.heads, self.dropout = d, heads, dropout
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)

    def reset_parameters(self) -> None:
        xavier_blocks(self.qkv, self.d)
        xavier_blocks(self.out, self.d)

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        causal: bool = False,
        past: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """``x [N, T, d]``; ``mask [N, 1, 1, S]`` (True = may be attended; encoder) or ``causal`` (decoder)
        with ``past`` keys/values ``[N, h, P, d_head]`` -> output ``[N, T, d]`` and keys/values
        ``[N, h, P+T, d_head]``."""
        q, k, v = (split_heads(t, self.heads) for t in self.qkv(x).chunk(3, dim=-1))
        if past is not None:
            k = torch.cat([past[0].to(k.dtype), k], dim=2)
            v = torch.cat([past[1].to(v.dtype), v], dim=2)
        is_causal = False
        if causal:
            T, P = q.size(2), k.size(2) - q.size(2)
            if T > 1 and P == 0:
                is_causal = True
            elif T > 1:  # a block of new positions after a cache
                mask = torch.ones(T, P + T, dtype=torch.bool, device=x.device).tril(P)
        ctx = fused_attention(
            q, k, v, attn_mask=mask, dropout_p=self.dropout if self.training else 0.0, is_causal=is_causal
        )
        return self.out(merge_heads(ctx)), (k, v)


class CrossAttention(nn.Module):
    """Multi-head attention over the source, its heads split into bounded ones (first ``n_bounded``) and free ones.

    Attributes:
        n_bounded: how many heads (the first ones) take fertility bounds: 0, 1 or all.
        shared: the bounded heads share one cumulative attention (the running sum of the heads' mean).
        explicit: the scores are materialised and the weights returned (else fused softmax).
        probe: when a list, the scores ``z [N, h, T, S']`` are appended with their gradient retained.
    """

    def __init__(
        self, d: int, heads: int, dropout: float, transform: str, exhaustion: float,
        n_bounded: int, shared: bool, reported: bool, alpha: float = 1.5, cosine: bool = False,
    ):
        super().__init__()
        self.d, self.heads = d, heads
        self.scale = 1.0 / math.sqrt(d // heads)
        #: cosine scores g_h * cos(q, k) (model.attention.scaling=cosine): one learned scale per head, 1 at first
        self.cosine = cosine
        self.log_scale = nn.Parameter(torch.zeros(heads)) if cosine else None
        self.q = nn.Linear(d, d)
        self.kv = nn.Linear(d, 2 * d)
        self.out = nn.Linear(d, d)
        self.dropout_p = dropout
        self.dropout = nn.Dropout(dropout)
        self.n_bounded = n_bounded
        self.shared = shared
        self.bounded = BoundedTransform(transform, exhaustion, alpha) if n_bounded else None
        self.free = BoundedTransform(unconstrained(transform), alpha=alpha)
        self.explicit = reported or n_bounded > 0 or self.free.transform.name != "softmax"
        self.probe: list[torch.Tensor] | None = None

    def reset_parameters(self) -> None:
        for lin in (self.q, self.kv, self.out):
            xavier_blocks(lin, self.d)
        if self.log_scale is not None:
            with torch.no_grad():
                self.log_scale.zero_()

    def keys_values(self, memory: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``memory [B, S', d]`` -> keys, values ``[B, h, S', d_head]`` (once per sentence; the keys of cosine
        scores are unit vectors)."""
        k, v = self.kv(memory).chunk(2, dim=-1)
        k = split_heads(k, self.heads)
        if self.cosine:
            k = F.normalize(k, dim=-1)
        return k, split_heads(v, self.heads)

    def queries(self, x: torch.Tensor) -> tuple[torch.Tensor, float]:
        """``x [N, T, d]`` -> queries ``[N, h, T, d_head]`` and the factor of ``q·k`` that gives the scores:
        ``1/sqrt(d_head)``, or 1 for cosine scores, whose queries are unit vectors times the head's scale."""
        q = split_heads(self.q(x), self.heads)
        if not self.cosine:
            return q, self.scale
        g = self.log_scale.exp().to(q.dtype).view(1, -1, 1, 1)
        return F.normalize(q, dim=-1) * g, 1.0

    def forward(
        self,
        x: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        mask: torch.Tensor,
        fertility: torch.Tensor | None,
        sums: torch.Tensor | None,
        alpha: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """One cross-attention sub-layer for ``T`` consecutive steps.

        Args:
            x: ``[N, T, d]`` normalised decoder states.
            k, v: ``[N, h, S', d_head]`` from :meth:`keys_values`.
            mask: ``[N, S']`` True at real tokens and the sink.
            fertility: ``[N, S']`` bounds ``f`` (``inf`` at the sink, 0 at padding) or None.
            sums: cumulative attention before the first of the ``T`` steps of the bounded heads, ``[N, n_bounded, S']``
                (``[N, 1, S']`` when ``shared``), or None without bounded heads.
            alpha: the learned alpha of entmax / centmax: one (``[]``) or one per head (``[h]``); None: the fixed one.

        Returns:
            the output ``[N, T, d]``, the attention weights ``[N, h, T, S']`` (None when fused) and the
            bounded heads' cumulative attention after the ``T`` steps (None without bounded heads).
        """
        q, factor = self.queries(x)
        mask4 = mask[:, None, None, :]
        if not self.explicit:
            ctx = fused_attention(
                q, k, v, attn_mask=mask4, dropout_p=self.dropout_p if self.training else 0.0, scale=factor
            )
            return self.out(merge_heads(ctx)), None, None
        ct = compute_dtype(q.dtype)
        with torch.autocast(q.device.type, enabled=False):
            z = torch.matmul(q.to(ct), k.to(ct).transpose(-1, -2))  # [N, h, T, S']
            if factor != 1.0:
                z = z * factor
            if self.probe is not None and z.requires_grad:
                z.retain_grad()
                self.probe.append(z)
            parts = []
            nb = self.n_bounded
            a_bounded = a_free = alpha
            if alpha is not None and alpha.dim():  # one per head: [h] -> [1, h, 1] (bounded: per row), [1, h, 1, 1]
                a_bounded = alpha[:nb].to(ct).view(1, -1, 1)
                a_free = alpha[nb:].to(ct).view(1, -1, 1, 1)
            if nb:  # the bounds of step t depend on the steps before it: one bounded_recurrence over all T
                assert self.bounded is not None and sums is not None
                f = fertility.to(ct).unsqueeze(1) if fertility is not None else None
                p_b, sums = self.bounded.recurrence(z[:, :nb], mask.unsqueeze(1), f, sums, a_bounded, self.shared)
                parts.append(p_b)  # [N, nb, T, S']
            if nb < self.heads:
                parts.append(self.free(z[:, nb:], mask4, None, a_free))
            p = torch.cat(parts, dim=1) if len(parts) > 1 else parts[0]
        ctx = torch.matmul(self.dropout(p).to(v.dtype), v)
        return self.out(merge_heads(ctx)), p, sums


# ---------------------------------------------------------------------- layers
class FeedForward(nn.Sequential):
    def __init__(self, d: int, ff: int):
        super().__init__(nn.Linear(d, ff), nn.ReLU(), nn.Linear(ff, d))

    def reset_parameters(self) -> None:
        for lin in (self[0], self[2]):
            nn.init.xavier_uniform_(lin.weight)
            nn.init.zeros_(lin.bias)


class EncoderLayer(nn.Module):
    def __init__(self, d: int, heads: int, ff: int, dropout: float, attention_dropout: float):
        super().__init__()
        self.norm_self = nn.LayerNorm(d)
        self.self_attn = SelfAttention(d, heads, attention_dropout)
        self.norm_ff = nn.LayerNorm(d)
        self.ff = FeedForward(d, ff)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = x + self.dropout(self.self_attn(self.norm_self(x), mask=mask)[0])
        return x + self.dropout(self.ff(self.norm_ff(x)))


class DecoderLayer(nn.Module):
    def __init__(self, d: int, heads: int, ff: int, dropout: float, cross: CrossAttention):
        super().__init__()
        self.norm_self = nn.LayerNorm(d)
        self.self_attn = SelfAttention(d, heads, cross.dropout_p)
        self.norm_cross = nn.LayerNorm(d)
        self.cross = cross
        self.norm_ff = nn.LayerNorm(d)
        self.ff = FeedForward(d, ff)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self,
        x: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        mask: torch.Tensor,
        fertility: torch.Tensor | None,
        sums: torch.Tensor | None,
        past: tuple[torch.Tensor, torch.Tensor] | None,
        alpha: torch.Tensor | None = None,
    ):
        h, kv = self.self_attn(self.norm_self(x), causal=True, past=past)
        x = x + self.dropout(h)
        h, p, sums = self.cross(self.norm_cross(x), k, v, mask, fertility, sums, alpha=alpha)
        x = x + self.dropout(h)
        x = x + self.dropout(self.ff(self.norm_ff(x)))
        return x, kv, p, sums
