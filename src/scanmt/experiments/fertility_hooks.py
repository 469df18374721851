"""What the experiment tooling asks of a run's fertility strategy, each question in one small function.

The answers come from the strategy registry (:mod:`scanmt.fertility.strategies`): nothing here compares a
strategy's name.  The questions: the grid's checks of a fertility config, whether a run uses the grid's own
fertility predictor, and the label and parameters of a shared fertility-cache step.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scanmt.experiments.grid import GridError
from scanmt.fertility import strategies


def check_fertility(cfg, where: str, auto_predictor: Path | None = None) -> None:
    """The grid's limits on a run's fertility (``cfg``: its :class:`~scanmt.config.Config`): no oracle fertility
    (the runner has no reference alignments at test time), and a predictor path that exists (but the grid's own,
    ``auto_predictor``, which is trained before the runs).  Raises :class:`GridError`."""
    att = cfg.model.attention
    strategy = att.fertility.strategy
    if strategies.is_oracle(strategy):
        raise GridError(f"{where}: model.attention.fertility.strategy={strategy} (oracle) needs reference alignments "
                        "at test time, which the grid runner does not provide; use constant, guided or predicted")
    pred = att.fertility.predictor
    if strategies.needs_predictor(strategy) and pred and Path(pred) != auto_predictor and not Path(pred).exists():
        raise GridError(f"{where}: model.attention.fertility.predictor={att.fertility.predictor}: file not found")


def uses_predictor(cfg) -> bool:
    """Whether a run's config (a :class:`~scanmt.config.Config`) bounds its attention by predicted fertility."""
    from scanmt.model.transforms import get_transform

    att = cfg.model.attention
    return get_transform(att.transform).constrained and strategies.needs_predictor(att.fertility.strategy)


def needs_predictor(config: dict[str, Any], predictor: Path) -> bool:
    """Whether a run's config (as a dict, ``RunSpec.config``) uses the grid's own fertility predictor
    ``predictor``."""
    fert = config["model"]["attention"]["fertility"]
    return strategies.needs_predictor(fert["strategy"]) and fert["predictor"] == str(predictor)


def caches_fertility(config: dict[str, Any]) -> dict[str, Any] | None:
    """The fertility config of a run's config (as a dict) whose train and valid fertilities the shared steps
    cache, None when it uses no fertility."""
    fert = config["model"]["attention"]["fertility"]
    return fert if fert["strategy"] in strategies.REGISTRY else None


def fertility_options(fert: dict[str, Any]) -> dict[str, Any] | None:
    """The options of the fertility request caching one fertility config (``{}``: none beyond its strategy;
    None: nothing to cache, no fertility or the oracle's)."""
    name = fert["strategy"]
    if name not in strategies.REGISTRY or strategies.is_oracle(name):
        return None
    return strategies.strategy(name).request_options(fert)


def fertility_step_label(fert: dict[str, Any]) -> str:
    """The shared step's name of one fertility config's cache (``fertility-constant-2``, ``fertility-predicted-add1``,
    ...): its marker's file name, so it must stay as it is for a folder made before."""
    return f"fertility-{strategies.strategy(fert['strategy']).label(fert)}"


def fertility_step_params(fert: dict[str, Any], argv: list[str]) -> dict[str, Any]:
    """The parameters a shared fertility-cache step's marker holds (``argv``: its request's command line): a
    retrained predictor changes predicted fertilities, so its modification time is one."""
    params: dict[str, Any] = {"argv": argv}
    if strategies.needs_predictor(fert["strategy"]):
        p = Path(fert["predictor"])
        params["predictor_mtime"] = p.stat().st_mtime if p.exists() else None
    return params
