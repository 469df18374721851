"""Registry of attention transforms, keyed by the name used in configs.

Every entry maps scores ``z [B, S]``, upper bounds ``u [B, S]`` (or None) and a
boolean ``mask [B, S]`` (True = may receive attention) to a distribution
``p [B, S]``.  ``constrained`` transforms need fertility bounds; which ones are is
declared in :mod:`scanmt.fertility.rules` (:data:`~scanmt.fertility.rules.CONSTRAINED_TRANSFORMS`).

New transforms plug in with :func:`register` (``constrained`` declares them to the rules)::

    register("entmax15", lambda z, u, mask: my_entmax(z, mask))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import torch

from scanmt import ops
from scanmt.errors import ConfigError
from scanmt.fertility.rules import declare_transform, is_constrained

TransformFn = Callable[[torch.Tensor, Optional[torch.Tensor], torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Transform:
    name: str
    fn: TransformFn
    #: True if the transform takes upper bounds u (needs fertility)
    constrained: bool


_REGISTRY: dict[str, Transform] = {}


def register(name: str, fn: TransformFn, *, constrained: bool | None = None) -> None:
    """Add ``name``; ``constrained`` (when given) is declared to :mod:`scanmt.fertility.rules`, else taken from it."""
    if constrained is not None:
        declare_transform(name, constrained)
    _REGISTRY[name] = Transform(name, fn, is_constrained(name))


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
register("csoftmax", lambda z, u, mask: ops.csoftmax(z, u, dim=-1, mask=mask))
register("csparsemax", lambda z, u, mask: ops.csparsemax(z, u, dim=-1, mask=mask))
