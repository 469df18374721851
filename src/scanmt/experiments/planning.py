"""Planning a grid's runs: each system x seed's config, checked, and the request of each of its steps
(:func:`plan_runs`); a run folder made with another config is refused; ``spec.json`` written per attempt
(:func:`write_spec`).

The requests write into the run's folder (:mod:`scanmt.experiments.layout`): ``train`` into the folder
(``last.pt``, ``best.pt``, ``metrics.csv``), ``tune_penalties`` into ``penalties.yaml``, ``translate`` per split
into ``{split}.hyp.{tgt}`` (+ tokenized, attention, search statistics), ``evaluate`` into ``eval.json`` (main
split) or ``eval.{split}.json``, and ``stress`` into ``stress/``.
"""
from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from scanmt.api import EvaluateRequest, StressRequest, TrainRequest, TranslateRequest, TunePenaltiesRequest
from scanmt.api.decode import PENALTY_KEYS
from scanmt.config import config_differences, with_defaults
from scanmt.errors import ConfigError
from scanmt.experiments.common import read_json, write_json
from scanmt.experiments.fertility_hooks import check_fertility, uses_predictor
from scanmt.experiments.grid import SPEED_KEYS, Grid, GridError, System
from scanmt.experiments.layout import (PENALTIES, SPEC, STRESS_DIR, attention_name, checkpoint_of, eval_json_name,
                                       hyp_name, hyp_tok_name, raw_name, run_dir, search_json_name)
from scanmt.experiments.spec import RunContext, RunSpec


#: decode keys the translate request sets when they differ from the checkpoint's config (beam: always)
DECODE_KEYS = (*PENALTY_KEYS, "batch_size")


#: extra test splits every run also translates and scores when the prepared data has them
DEFAULT_EXTRA_SPLITS = ("test2017",)


def resolve_extra_splits(asked: Sequence[str] | None, main_split: str, available: Sequence[str],
                         where: str) -> tuple[str, ...]:
    """The extra test splits of a grid invocation, checked against the prepared data's splits.

    Args:
        asked: ``--extra-splits`` (None: not given, the :data:`DEFAULT_EXTRA_SPLITS` the data has).
        main_split: ``--split``; it must exist too, and is never an extra split.
        available: the splits the prepared data has (``meta.json`` ``splits``).
        where: the data, for the error messages.

    Raises:
        ConfigError: a split the data does not have, or the main split given as an extra one.
    """
    known = ", ".join(available) or "none"
    if main_split not in available:
        raise ConfigError(f"--split {main_split}: {where} has no such split (available: {known})")
    if asked is None:
        return tuple(s for s in DEFAULT_EXTRA_SPLITS if s in available and s != main_split)
    chosen: list[str] = []
    for split in asked:
        if split not in available:
            raise ConfigError(f"--extra-splits {split}: {where} has no such split (available: {known})")
        if split == main_split:
            raise ConfigError(f"--extra-splits {split}: that is the main split (--split); list only further ones")
        if split not in chosen:
            chosen.append(split)
    return tuple(chosen)


def _load_config(ctx: RunContext, overrides: list[str], where: str):
    from scanmt.config import Config

    try:
        return Config.load(ctx.preset, overrides)
    except ConfigError as exc:
        raise GridError(f"{where}: {exc}") from None


def _check_config(cfg, where: str, tune: bool, auto_predictor: Path | None = None) -> None:
    """Checks the trainer would only make after data loading: the grid's fertility limits, tuning needs.

    The transform (and every other closed choice, :mod:`scanmt.choices`) and the fertility
    cross-field rules (transform and strategy, exhaustion) were checked when the config was built.
    """
    check_fertility(cfg, where, auto_predictor)
    if tune and cfg.decode.beam < 2:
        raise GridError(f"{where}: tune_penalties needs beam search; decode.beam={cfg.decode.beam}")


def system_config(grid: Grid, system: System, ctx: RunContext, seed: int):
    """``(overrides, Config)`` of one system and seed, checked (the predictor path filled in)."""
    where = f"{grid.path}: system {system.name!r}"
    try:
        return _system_config(grid, system, ctx, seed, where)
    except GridError:
        raise
    except ConfigError as exc:
        raise GridError(f"{where}: {exc}") from None


def _system_config(grid: Grid, system: System, ctx: RunContext, seed: int, where: str):
    base = [f"data.dir={ctx.data_dir}", f"data.src_lang={ctx.src_lang}", f"data.tgt_lang={ctx.tgt_lang}",
            f"train.seed={seed}"]
    own = base + list(grid.set) + list(system.set)
    cfg = _load_config(ctx, own + ctx.cli_set, where)
    if uses_predictor(cfg) and not cfg.model.attention.fertility.predictor:
        if ctx.predictor is None:
            raise GridError(f"{where}: predicted fertility needs a predictor, and none is trained for this grid")
        own.append(f"model.attention.fertility.predictor={ctx.predictor}")
        cfg = _load_config(ctx, own + ctx.cli_set, where)
    _check_config(cfg, where, system.tune_penalties, ctx.predictor)
    return own + ctx.cli_set, cfg


@dataclass
class _Decode:
    """What the decoding steps of one run need: its checkpoint, decode settings and those of the model."""

    where: str
    run: Path
    ckpt: str
    dec: dict[str, Any]
    model_dec: dict[str, Any]
    tune: bool

    @property
    def penalties(self) -> Path:
        return self.run / PENALTIES


def _tune_request(ctx: RunContext, d: _Decode) -> TunePenaltiesRequest | None:
    """``tune_penalties`` on the validation split (decode settings that differ from the model's passed on)."""
    if not d.tune:
        return None
    changed = {k: d.dec[k] for k in ("penalty_mode", "coverage_eps", "batch_size") if d.dec[k] != d.model_dec[k]}
    return TunePenaltiesRequest(model=d.ckpt, data=ctx.data_dir, split="valid", beam=d.dec["beam"], out=d.penalties,
                                **changed)


def _translate_request(ctx: RunContext, d: _Decode, split: str) -> TranslateRequest:
    """``translate`` of one prepared split into ``RUN/{split}.hyp.{tgt}`` (+ tokenized, attention, search
    statistics)."""
    s, t = ctx.src_lang, ctx.tgt_lang
    changed = {k: d.dec[k] for k in DECODE_KEYS
               if not (d.tune and k in PENALTY_KEYS) and d.dec[k] != d.model_dec[k]}
    return TranslateRequest(
        model=d.ckpt, input=str(ctx.data_dir / raw_name(split, s)), output=str(d.run / hyp_name(split, t)),
        tokenized_out=str(d.run / hyp_tok_name(split, t)), attention_out=str(d.run / attention_name(split)),
        beam=d.dec["beam"], penalties=str(d.penalties) if d.tune else None,
        search_stats=str(d.run / search_json_name(split)), **changed,
    )


def _evaluate_request(ctx: RunContext, run: Path, split: str) -> EvaluateRequest:
    """``evaluate`` of ``RUN/{split}.hyp.{tgt}`` against the prepared split."""
    s, t = ctx.src_lang, ctx.tgt_lang
    return EvaluateRequest(
        hyp=run / hyp_name(split, t), ref=ctx.data_dir / raw_name(split, t), src=ctx.data_dir / raw_name(split, s),
        align_model=ctx.align_model, drop_samples=ctx.drop_samples, attention=run / attention_name(split),
        src_lang=s, tgt_lang=t, json=run / eval_json_name(split, ctx.split),
    )


def _stress_request(ctx: RunContext, d: _Decode) -> StressRequest | None:
    """``stress`` of the run's model on the main split into ``RUN/stress/`` (the run's beam; the checkpoint's other
    decode settings: tuned penalties are not applied)."""
    if not ctx.stress_k:
        return None
    s, t = ctx.src_lang, ctx.tgt_lang
    return StressRequest(model=(d.ckpt,), names=(d.run.parent.name,), src=ctx.data_dir / raw_name(ctx.split, s),
                         ref=ctx.data_dir / raw_name(ctx.split, t), out=d.run / STRESS_DIR, k=ctx.stress_k,
                         beam=d.dec["beam"], align_model=ctx.align_model)


def _stale(spec: RunSpec) -> str | None:
    """Why the run directory was made with another config than ``spec``'s, or None."""
    old = read_json(spec.dir / SPEC)
    if old is None:
        return None
    diffs = config_differences(with_defaults(old.get("config", {})), spec.config, SPEED_KEYS)
    if old.get("model_from") != spec.model_from:
        diffs.append(("reuse_model", old.get("model_from"), spec.model_from))
    if bool(old.get("tune_penalties")) != spec.tune_penalties:
        diffs.append(("tune_penalties", old.get("tune_penalties"), spec.tune_penalties))
    if not diffs:
        return None
    k, a, b = diffs[0]
    more = f" (and {len(diffs) - 1} more)" if len(diffs) > 1 else ""
    return f"{spec.dir} was made with {k}={a!r} but the grid now gives {k}={b!r}{more}"


def _model_from(grid: Grid, system: System, ctx: RunContext, seed: int, configs: dict[tuple[str, int], dict[str, Any]]
                ) -> tuple[str | None, dict[str, Any]]:
    """``(run directory of the model it decodes or None, that model's config)``, checked for reuse_model."""
    cfg_dict = configs[system.name, seed]
    if not system.reuse_model:
        return None, cfg_dict
    model_cfg = configs[system.reuse_model, seed]
    diffs = config_differences(model_cfg, cfg_dict, SPEED_KEYS, prefixes=("decode.",))
    if diffs:
        k, a, b = diffs[0]
        raise GridError(f"{grid.path}: system {system.name!r}: reuse_model {system.reuse_model!r} was trained with "
                        f"{k}={a!r} but this system sets {k}={b!r}; only decode.* may differ")
    return str(run_dir(ctx.out, system.reuse_model, seed)), model_cfg


def _plan_one(grid: Grid, system: System, seed: int, ctx: RunContext, overrides: list[str],
              configs: dict[tuple[str, int], dict[str, Any]]) -> RunSpec:
    """The spec of one run (system x seed): the request of each of its steps."""
    cfg_dict = configs[system.name, seed]
    d = run_dir(ctx.out, system.name, seed)
    model_from, model_cfg = _model_from(grid, system, ctx, seed, configs)
    dec = _Decode(f"{grid.path}: system {system.name!r}", d, str(checkpoint_of(model_from or d)),
                  cfg_dict["decode"], model_cfg["decode"], system.tune_penalties)
    train = None
    if model_from is None:
        train = TrainRequest(config=str(ctx.preset), out=str(d), set=tuple(overrides))
    extra = {split: {"translate": _translate_request(ctx, dec, split), "evaluate": _evaluate_request(ctx, d, split)}
             for split in ctx.extra_splits}
    return RunSpec(
        grid=grid.name, system=system.name, label=system.label, seed=seed, run_dir=str(d),
        preset=str(ctx.preset), overrides=overrides, config=cfg_dict, split=ctx.split, src_lang=ctx.src_lang,
        tgt_lang=ctx.tgt_lang, tune_penalties=system.tune_penalties, model_from=model_from, train=train,
        tune=_tune_request(ctx, dec), translate=_translate_request(ctx, dec, ctx.split),
        evaluate=_evaluate_request(ctx, d, ctx.split), command=ctx.command, commit=ctx.commit, extra_splits=extra,
        stress=_stress_request(ctx, dec),
    )


def plan_runs(grid: Grid, systems: Sequence[System], seeds: Sequence[int], ctx: RunContext) -> list[RunSpec]:
    """Every run's spec, in the order seeds x systems; raises :class:`GridError` before any work.

    Checks: each config loads; transform and fertility are consistent; systems
    that reuse a model agree with it outside ``decode``; a run directory made
    earlier with another config is not silently mixed with this one.  Extra
    splits (``ctx.extra_splits``) never make a run stale.
    """
    resolved = {(s.name, seed): system_config(grid, s, ctx, seed) for seed in seeds for s in systems}
    configs = {key: cfg.to_dict() for key, (_, cfg) in resolved.items()}
    specs = [_plan_one(grid, system, seed, ctx, resolved[system.name, seed][0], configs)
             for seed in seeds for system in systems]
    problems = [p for p in map(_stale, specs) if p is not None]
    if problems:
        raise GridError(
            "these runs were made with another config; use another --out, or delete them to redo them:\n  "
            + "\n  ".join(problems)
        )
    return specs


def machine(threads: int = 0, precision: str | None = None) -> str:
    """The processor, CPU count and torch build an attempt ran on, its training threads (``train.threads``;
    0: torch's default, not named) and precision (``train.precision``; None: not named), for the report: a grid
    archived and continued elsewhere (:mod:`scanmt.experiments.archive`) has runs of several machines, whose
    kernels may differ, and neither a thread count nor a precision makes a finished run stale, yet each trains
    the same seed to another model."""
    import platform

    import torch

    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return (f"{cpu}, {os.cpu_count()} CPUs, torch {torch.__version__}" + (f", {threads} thread(s)" if threads else "")
            + (f", {precision}" if precision else ""))


def write_spec(spec: RunSpec) -> Path:
    """Write ``spec.json`` for a new attempt, keeping the attempts (and commits) of earlier ones."""
    path = spec.dir / SPEC
    old = read_json(path) or {}
    history = [h for h in old.get("history") or [] if isinstance(h, dict)]
    spec.history = history + [{"started": time.strftime("%Y-%m-%d %H:%M:%S"), "commit": spec.commit,
                               "machine": machine(spec.config["train"].get("threads") or 0,
                                                  spec.config["train"].get("precision"))}]
    write_json(path, spec.to_dict())
    return path
