"""The cross-field rules of fertility and attention: the base-level half of :mod:`scanmt.fertility`.

This module imports only :mod:`scanmt.errors` and :mod:`scanmt.choices`, so that :mod:`scanmt.config` (base level) can
check the rules once, when a :class:`~scanmt.config.Config` is built
(:func:`check_attention`).  The rest of the package (providers, the sink, the predictor
network) sits between ``data`` and ``model``.

The rules, for ``model.attention``:

- which transforms are **constrained** (take fertility upper bounds ``u``) is declared once,
  immutably, in :data:`scanmt.choices.TRANSFORMS` (:data:`CONSTRAINED_TRANSFORMS` here is that set);
- a constrained transform needs a fertility strategy (:data:`STRATEGIES`); an unconstrained
  one takes none (``fertility.strategy = none``);
- the exhaustion bonus ``z + c * u`` needs a constrained transform (it reads ``u``);
- the ``cosine`` score scaling needs the ``general`` score (it normalises ``W h``);
- a constrained transform **without the sink** is feasible only when the bounds can never run
  out (:func:`check_sink`): every output step spends exactly 1 of the source's fertility
  (its attention sums to 1 and ``u = max(0, f - attention_sum)``), so step ``t`` needs ``sum_j f_j > t``
  and an output of ``T`` tokens (``</s>`` included) needs ``sum_j f_j >= T``.  For a
  one-subword source that means ``f >= T`` for the longest ``T`` training or decoding can
  reach; only constant bounds can promise it (guided, predicted and actual ones vary per
  sentence), so anything else needs the sink.
"""

from __future__ import annotations

from typing import Any

from scanmt.choices import CONSTRAINED_TRANSFORMS, NO_STRATEGY, STRATEGIES, TRANSFORMS
from scanmt.errors import ConfigError

#: the config section of the fertility bounds
FERTILITY_KEY = "model.attention.fertility"
#: the oracle strategy: bounds from each pair's own alignment, so translation needs explicit fertilities
ORACLE = "actual"


def is_constrained(transform: str) -> bool:
    """Whether ``transform`` takes fertility upper bounds (:data:`scanmt.choices.TRANSFORMS`)."""
    return TRANSFORMS.get(transform, False)


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


def check_sink(attention: Any, longest_output: float) -> None:
    """A constrained transform without the sink (``sink: false``) needs bounds that never run out: constant
    fertility ``f >= longest_output`` (the most output steps, ``</s>`` included, that training or decoding
    can take for a one-subword source); see the module docstring."""
    if attention.sink is not False or not is_constrained(attention.transform):
        return
    fertility = attention.fertility
    why = (f"model.attention.sink=false with {attention.transform}: without the sink every output step spends 1 of "
           "the source's fertility, so an output longer than the sum of the bounds has no feasible attention "
           "(training or validation fails at the first such sentence)")
    if fertility.strategy != "constant":
        raise ConfigError(f"{why}; {fertility.strategy} bounds cannot promise enough for every sentence: "
                          "leave the sink on (model.attention.sink: null or true)")
    if fertility.value < longest_output:
        raise ConfigError(
            f"{why}; {FERTILITY_KEY}.value={fertility.value:g} lets a one-subword source have {fertility.value:g} "
            f"output steps but up to {longest_output:g} are taken (data.max_len + 1, or decode.max_len_a + "
            f"decode.max_len_b): set {FERTILITY_KEY}.value >= {longest_output:g} or leave the sink on "
            "(model.attention.sink: null or true)")


def check_attention(attention: Any) -> None:
    """All the rules for one ``model.attention`` section (an :class:`~scanmt.config.AttentionConfig`)."""
    check_strategy(attention.transform, attention.fertility.strategy)
    check_exhaustion(attention.transform, attention.exhaustion)
    check_scaling(attention.score, attention.scaling)
