"""softmax with the same signature and mask semantics as the other transforms.

``softmax(z, u=None, dim=-1, mask=None)``: ``u`` is accepted and ignored, so that
code can switch between the four attention transforms by name.  Unlike
``torch.softmax`` with ``-inf`` scores, a fully masked row gives zeros (and a
zero gradient) rather than NaN.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _checks, _function


class SoftmaxFunction(_function.TransformFunction):
    """Masked softmax; ``dz = p * (dp - sum(p * dp))``."""

    op_name, p_weighted = "softmax", True

    @classmethod
    def _solve(cls, z2: Tensor, zmax: Tensor, b: Optional[_checks.Bounds], k: _checks.Consts) -> _function.Solved:
        e = _checks.shift(z2, zmax, k).exp_()
        # the row sum is >= 1 unless the row is fully masked (then e == 0 and p == 0)
        p = e.div_(e.sum(-1, keepdim=True).clamp_(min=k.one))
        return p, (p,)

    @staticmethod
    def _free_set(p: Tensor) -> Tuple[Tensor, Optional[Tensor]]:  # type: ignore[override]
        return p.clone(), None  # every entry is free (used by the double backward)

    @classmethod
    def _vjp(
        cls, g: Tensor, saved: Tuple[Tensor, ...], need_z: bool, need_u: bool
    ) -> Tuple[Optional[Tensor], Optional[Tensor]]:
        (p,) = saved
        pg = p * g
        return torch.addcmul(pg, p, pg.sum(-1, keepdim=True), value=-1.0), None


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
    return SoftmaxFunction.transform(z, None, dim, mask, validate)
