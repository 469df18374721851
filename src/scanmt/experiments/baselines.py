"""Which system each system of a grid is compared with: its *baseline*.

A grid names one baseline (``baseline:``; default softmax when the grid has it, else its first system). A system
may name its own (``systems[i].baseline``): an ablation compares each csparsemax arm with the softmax trained under
the same recipe, not with the grid's softmax. The report's paired comparisons (Δ BLEU with its bootstrap p-value,
Δ DROP against the aligner's and the seeds' noise, the stress test's Δ REP and Δ DROP) all read one mapping,
``system name -> its baseline's name``, in which the grid's baseline maps to itself (it is compared with nothing).
``scanmt experiment report --baseline S`` compares every system with ``S`` instead.

An ablation may also name a *reference arm* (``reference_arm:``, or ``--reference-arm``): the system whose difference
from its baseline every arm's difference from its own baseline is set against (the report's difference in
differences, :func:`scanmt.experiments.report.stress.contrast_section`).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from scanmt.errors import ConfigError

#: system name -> the name of the system it is compared with (itself for the grid's baseline)
Baselines = dict[str, str]


def grid_baseline(rec: Mapping[str, Any], names: Sequence[str], override: str | None = None) -> str:
    """The grid's baseline: ``override`` (``--baseline``), else the grid record's, else softmax, else the first.

    Raises:
        ConfigError: the chosen system is not one of ``names``.
    """
    baseline = override or rec.get("baseline") or ("softmax" if "softmax" in names else names[0])
    if baseline not in names:
        raise ConfigError(f"--baseline {baseline!r} is not a system of grid {rec['name']} ({', '.join(names)})")
    return baseline


def resolve_baselines(rec: Mapping[str, Any], names: Sequence[str], override: str | None = None) -> Baselines:
    """Each of ``names`` mapped to its baseline: everything to ``override`` when given; else a system's own
    ``baseline`` from the grid record (``rec["systems"]``), else the grid's (:func:`grid_baseline`).

    A system's own baseline that is not among ``names`` (left out of the run with ``--systems``) stays: the
    comparisons that need its runs show "n/a" rather than silently comparing with another system.
    """
    grid = grid_baseline(rec, names, override)
    if override:
        return {n: grid for n in names}
    own = {s["name"]: s.get("baseline") for s in rec.get("systems") or []}
    return {n: own.get(n) or grid for n in names}


def as_baselines(names: Sequence[str], baseline: str | Mapping[str, str] | None) -> Baselines:
    """``baseline`` as a :data:`Baselines` over ``names``: one name compares every system with it, a mapping is
    kept for the names it has, None compares nothing (empty)."""
    if baseline is None:
        return {}
    if isinstance(baseline, str):
        return {n: baseline for n in names}
    return {n: baseline[n] for n in names if n in baseline}


def single_baseline(baselines: Mapping[str, str]) -> str | None:
    """The one system every system is compared with, or None when systems name different baselines."""
    found = set(baselines.values())
    return next(iter(found)) if len(found) == 1 else None


def resolve_reference_arm(rec: Mapping[str, Any], names: Sequence[str], override: str | None = None) -> str | None:
    """The system each ablation arm is set against: ``override`` (``--reference-arm``), else the grid record's
    ``reference_arm`` (None in a record written before the key existed).

    Raises:
        ConfigError: ``override`` is not one of ``names``.
    """
    if override is not None and override not in names:
        raise ConfigError(f"--reference-arm {override!r} is not a system of grid {rec['name']} ({', '.join(names)})")
    return override or rec.get("reference_arm")
