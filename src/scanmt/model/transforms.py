"""Registry of attention transforms, keyed by the name used in configs.

Every entry maps scores ``z [B, S]``, upper bounds ``u [B, S]`` (or None) and a
boolean ``mask [B, S]`` (True = may receive attention) to a distribution
``p [B, S]``.  The names, and which ones are ``constrained`` (need fertility bounds), are
declared once in :data:`scanmt.choices.TRANSFORMS`; this registry binds a function to each
declared name (:func:`register` refuses any other name), and
``tests/model/test_transforms_registry.py`` checks that every declared name has one.

A new transform is declared in :mod:`scanmt.choices` and bound here::

    register("entmax15", lambda z, u, mask: ops.entmax15(z, mask=mask))

The transforms of :data:`scanmt.choices.ALPHA_TRANSFORMS` (``entmax``, ``centmax``) take a fourth
argument, their ``alpha``: a number (``model.attention.alpha``) or a tensor with one value per row
(size 1 along the last dimension, broadcastable to ``z``: a learned alpha, per model or per head),
through which the gradient flows.  They are registered with ``alpha=True``, and
:class:`~scanmt.model.bounds.BoundedTransform` passes them the alpha it holds or is given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import torch

from scanmt import ops
from scanmt.choices import ALPHA_TRANSFORMS, TRANSFORMS
from scanmt.errors import ConfigError

#: ``fn(z, u, mask)``, or ``fn(z, u, mask, alpha)`` for the transforms with an alpha
TransformFn = Callable[..., torch.Tensor]


@dataclass(frozen=True)
class Transform:
    name: str
    fn: TransformFn
    #: True if the transform takes upper bounds u (needs fertility)
    constrained: bool
    #: True if ``fn`` takes a fourth argument, alpha (:data:`scanmt.choices.ALPHA_TRANSFORMS`)
    alpha: bool = False


_REGISTRY: dict[str, Transform] = {}


def register(name: str, fn: TransformFn) -> None:
    """Bind ``fn`` to the declared transform ``name`` (``ValueError`` for a name :data:`scanmt.choices.TRANSFORMS`
    does not declare)."""
    if name not in TRANSFORMS:
        raise ValueError(f"transform {name!r} is not declared in scanmt.choices.TRANSFORMS "
                         f"(declared: {', '.join(TRANSFORMS)}): declare it there first")
    _REGISTRY[name] = Transform(name, fn, TRANSFORMS[name], name in ALPHA_TRANSFORMS)


def get_transform(name: str) -> Transform:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ConfigError(
            f"model.attention.transform: unknown transform {name!r} (known: {', '.join(sorted(_REGISTRY))})"
        ) from None


def names() -> list[str]:
    return sorted(_REGISTRY)


register("softmax", lambda z, u, mask: ops.softmax(z, None, dim=-1, mask=mask))
register("sparsemax", lambda z, u, mask: ops.sparsemax(z, dim=-1, mask=mask))
register("entmax15", lambda z, u, mask: ops.entmax15(z, dim=-1, mask=mask))
register("csoftmax", lambda z, u, mask: ops.csoftmax(z, u, dim=-1, mask=mask))
register("csparsemax", lambda z, u, mask: ops.csparsemax(z, u, dim=-1, mask=mask))
register("entmax", lambda z, u, mask, alpha: ops.entmax_bisect(z, alpha, dim=-1, mask=mask))
register("centmax", lambda z, u, mask, alpha: ops.centmax(z, u, alpha, dim=-1, mask=mask))
