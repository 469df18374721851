"""``nn.Module`` wrappers around the functional transforms."""

from __future__ import annotations

from typing import Optional

from torch import Tensor, nn

from .csoftmax import csoftmax
from .csparsemax import csparsemax
from .softmax import softmax
from .sparsemax import sparsemax


class _Transform(nn.Module):
    def __init__(self, dim: int = -1, *, validate: bool = True) -> None:
        super().__init__()
        self.dim = dim
        #: Set to False to skip input validation (and its host synchronisation),
        #: e.g. once a training loop has checked its first batches.
        self.validate = validate

    def extra_repr(self) -> str:
        return f"dim={self.dim}" + ("" if self.validate else ", validate=False")


class Softmax(_Transform):
    """``softmax(z, dim=self.dim, mask=mask)`` with zeros for fully masked rows."""

    def forward(self, z: Tensor, u: Optional[Tensor] = None, mask: Optional[Tensor] = None) -> Tensor:
        return softmax(z, u, self.dim, mask, validate=self.validate)


class Sparsemax(_Transform):
    """``sparsemax(z, dim=self.dim, mask=mask)``; see :func:`scanmt.ops.sparsemax`."""

    def forward(self, z: Tensor, mask: Optional[Tensor] = None) -> Tensor:
        return sparsemax(z, self.dim, mask, validate=self.validate)


class CSoftmax(_Transform):
    """``csoftmax(z, u, dim=self.dim, mask=mask)``; see :func:`scanmt.ops.csoftmax`."""

    def forward(self, z: Tensor, u: Tensor, mask: Optional[Tensor] = None) -> Tensor:
        return csoftmax(z, u, self.dim, mask, validate=self.validate)


class CSparsemax(_Transform):
    """``csparsemax(z, u, dim=self.dim, mask=mask)``; see :func:`scanmt.ops.csparsemax`."""

    def forward(self, z: Tensor, u: Tensor, mask: Optional[Tensor] = None) -> Tensor:
        return csparsemax(z, u, self.dim, mask, validate=self.validate)
