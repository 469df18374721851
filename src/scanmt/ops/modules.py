"""``nn.Module`` wrappers around the functional transforms."""

from __future__ import annotations

from typing import Optional, Union

from torch import Tensor, nn

from .csoftmax import csoftmax
from .csparsemax import csparsemax
from .entmax import centmax, entmax15, entmax_bisect
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


class Entmax15(_Transform):
    """``entmax15(z, dim=self.dim, mask=mask)``; see :func:`scanmt.ops.entmax15`."""

    def forward(self, z: Tensor, mask: Optional[Tensor] = None) -> Tensor:
        return entmax15(z, self.dim, mask, validate=self.validate)


class EntmaxBisect(_Transform):
    """``entmax_bisect(z, alpha, dim=self.dim, mask=mask)`` with a fixed ``alpha`` given here, or
    one passed to ``forward`` (e.g. a learned parameter); see :func:`scanmt.ops.entmax_bisect`."""

    def __init__(self, alpha: float = 1.5, dim: int = -1, *, validate: bool = True) -> None:
        super().__init__(dim, validate=validate)
        self.alpha = alpha

    def forward(self, z: Tensor, mask: Optional[Tensor] = None, alpha: Union[float, Tensor, None] = None) -> Tensor:
        return entmax_bisect(z, self.alpha if alpha is None else alpha, self.dim, mask, validate=self.validate)


class CEntmax(_Transform):
    """``centmax(z, u, alpha, dim=self.dim, mask=mask)``; see :func:`scanmt.ops.centmax`."""

    def __init__(self, alpha: float = 1.5, dim: int = -1, *, validate: bool = True) -> None:
        super().__init__(dim, validate=validate)
        self.alpha = alpha

    def forward(
        self, z: Tensor, u: Tensor, mask: Optional[Tensor] = None, alpha: Union[float, Tensor, None] = None
    ) -> Tensor:
        return centmax(z, u, self.alpha if alpha is None else alpha, self.dim, mask, validate=self.validate)
