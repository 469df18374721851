"""softmax with the same signature and mask semantics as the other transforms.

``softmax(z, u=None, dim=-1, mask=None)``: ``u`` is accepted and ignored, so that
code can switch between the four attention transforms by name.  Unlike
``torch.softmax`` with ``-inf`` scores, a fully masked row gives zeros (and a
zero gradient) rather than NaN.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from . import _checks


class SoftmaxFunction(torch.autograd.Function):
    """Masked softmax; ``dz = p * (dp - sum(p * dp))``."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx, z: Tensor, mask: Optional[Tensor], dim: int, validate: bool, out_dtype: torch.dtype
    ) -> Tensor:
        rows = _checks.Rows(z.shape, dim)
        cdt = _checks.compute_dtype(z.dtype)
        k = _checks.consts(cdt, z.device)
        z2 = _checks.masked_scores(rows, z, mask, cdt)
        zmax = z2.amax(-1, keepdim=True)
        if validate:
            _checks.raise_if_invalid("softmax", zmax, k)
        e = _checks.shift(z2, zmax, k).exp_()
        # the row sum is >= 1 unless the row is fully masked (then e == 0 and p == 0)
        p = e.div_(e.sum(-1, keepdim=True).clamp_(min=k.one))
        ctx.rows, ctx.z_dtype = rows, z.dtype
        ctx.save_for_backward(p)
        return rows.give(p, out_dtype)

    @staticmethod
    def backward(ctx, grad: Tensor):  # type: ignore[override]
        (p,) = ctx.saved_tensors
        rows: _checks.Rows = ctx.rows
        g = rows.take(grad, p.dtype)
        pg = p * g
        dz = torch.addcmul(pg, p, pg.sum(-1, keepdim=True), value=-1.0)
        return rows.give(dz, ctx.z_dtype), None, None, None, None


def softmax(
    z: Tensor, u: Optional[object] = None, dim: int = -1, mask: Optional[Tensor] = None, *, validate: bool = True
) -> Tensor:
    """Softmax of ``z`` along ``dim``; ``u`` is accepted and ignored.

    Args:
        z: scores, any floating dtype (half precision is computed in float32).
        u: ignored (present so that all four transforms share one signature).
        dim: the dimension that sums to 1.
        mask: optional bool tensor broadcastable to ``z`` (True = may receive
            attention).  Masked positions (and positions where ``z == -inf``)
            get exactly 0 and a zero gradient; a fully masked row gives zeros.
        validate: check for NaN or +inf in ``z`` (one host synchronisation).

    Raises:
        ValueError: NaN or +inf at an unmasked position (if ``validate``), or
            a ``mask`` that does not broadcast to ``z``.
    """
    z, _, mask, dim, out_dtype = _checks.broadcast_inputs("softmax", z, None, mask, dim)
    if z.numel() == 0:  # nothing to normalise; keeps the graph for autograd
        return (z * 0).to(out_dtype)
    return SoftmaxFunction.apply(z, mask, dim, validate, out_dtype)
