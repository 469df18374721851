"""The cross-field rules of fertility and attention: the base-level half of :mod:`scanmt.fertility`.

This module imports only :mod:`scanmt.errors`, so that :mod:`scanmt.config` (base level) can
check the rules once, when a :class:`~scanmt.config.Config` is built
(:func:`check_attention`).  The rest of the package (providers, the sink, the predictor
network) sits between ``data`` and ``model``.

The rules, for ``model.attention``:

- which transforms are **constrained** (take fertility upper bounds ``u``) is declared here
  and nowhere else (:data:`CONSTRAINED_TRANSFORMS`; a transform registered later declares
  itself through :func:`declare_transform`);
- a constrained transform needs a fertility strategy (:data:`STRATEGIES`); an unconstrained
  one takes none (``fertility.strategy = none``);
- the exhaustion bonus ``z + c * u`` needs a constrained transform (it reads ``u``);
- the ``cosine`` score scaling needs the ``general`` score (it normalises ``W h``).
"""

from __future__ import annotations

from typing import Any

from scanmt.errors import ConfigError

#: the config section of the fertility bounds
FERTILITY_KEY = "model.attention.fertility"
#: the fertility strategies (``none`` aside, for unconstrained transforms)
STRATEGIES: tuple[str, ...] = ("constant", "guided", "predicted", "actual")
#: the strategy of unconstrained transforms
NO_STRATEGY = "none"
#: the oracle strategy: bounds from each pair's own alignment, so translation needs explicit fertilities
ORACLE = "actual"

#: transforms that take fertility upper bounds (the one declaration; see :func:`declare_transform`)
CONSTRAINED_TRANSFORMS: set[str] = {"csoftmax", "csparsemax"}


def declare_transform(name: str, constrained: bool) -> None:
    """Record whether the transform ``name`` is constrained (for transforms registered by plug-ins)."""
    if constrained:
        CONSTRAINED_TRANSFORMS.add(name)
    else:
        CONSTRAINED_TRANSFORMS.discard(name)


def is_constrained(transform: str) -> bool:
    """Whether ``transform`` takes fertility upper bounds."""
    return transform in CONSTRAINED_TRANSFORMS


def check_strategy(transform: str, strategy: str) -> None:
    """A constrained transform needs a known fertility strategy; an unconstrained one takes none."""
    if not is_constrained(transform):
        if strategy != NO_STRATEGY:
            raise ConfigError(
                f"{FERTILITY_KEY}.strategy={strategy!r} only applies to constrained transforms "
                f"({', '.join(sorted(CONSTRAINED_TRANSFORMS))}), not {transform}"
            )
        return
    known = ", ".join(STRATEGIES[:-1]) + f" or {STRATEGIES[-1]}"
    if strategy == NO_STRATEGY:
        raise ConfigError(
            f"{FERTILITY_KEY}.strategy=none: {transform} needs fertility bounds, so {transform} needs "
            f"{FERTILITY_KEY}.strategy set to {known}"
        )
    if strategy not in STRATEGIES:
        raise ConfigError(f"{FERTILITY_KEY}.strategy: unknown strategy {strategy!r} (known: none, {known})")


def check_exhaustion(transform: str, exhaustion: float) -> None:
    """The exhaustion bonus reads the bounds ``u``: it needs a constrained transform."""
    if exhaustion and not is_constrained(transform):
        raise ConfigError(f"model.attention.exhaustion={exhaustion} needs a constrained transform, not {transform}")


def check_scaling(score: str, scaling: str) -> None:
    """``cosine`` scaling normalises the keys ``W h``: it needs the ``general`` score."""
    if scaling == "cosine" and score != "general":
        raise ConfigError("model.attention.scaling=cosine needs model.attention.score=general")


def check_attention(attention: Any) -> None:
    """All the rules for one ``model.attention`` section (an :class:`~scanmt.config.AttentionConfig`)."""
    check_strategy(attention.transform, attention.fertility.strategy)
    check_exhaustion(attention.transform, attention.exhaustion)
    check_scaling(attention.score, attention.scaling)
