"""Runs of a grid: planning and checking them, running one (a worker process), and the pool.

Every run (system x seed) lives in ``OUT/runs/{system}/seed{k}/``::

    spec.json           what the run is: config, the exact step commands, commit (written by the planner)
    command.txt         the exact commands (grid command, then one `scanmt ...` line per step) and git commit
    log.txt             everything the worker printed (appended across attempts)
    config.yaml, last.pt, best.pt, metrics.csv      scanmt train (resumed from last.pt after a kill)
    penalties.yaml      scanmt tune-penalties (systems with tune_penalties: true)
    {split}.hyp.{tgt}, {split}.hyp.tok.{tgt}, {split}.attn.npz     scanmt translate (main split and each extra one)
    eval.json           scanmt evaluate of the main split (every metric with its signature)
    eval.{split}.json   scanmt evaluate of each extra test split (``--extra-splits``, e.g. test2017)
    metrics.json        the run's summary: BLEU, tokenized BLEU, METEOR, REP, DROP, attention stats, training;
                        ``test_sets``: {split: {bleu, sacrebleu, meteor, rep, drop, sentences}} per extra split
    .stages/*.done      one marker per finished step (train, tune, translate, evaluate, then
                        translate.{split} and evaluate.{split} per extra split)
    DONE                written last; a rerun skips the run unless an extra split asked for is missing

Steps are executed through :func:`scanmt.cli.main.main` with exactly the argument
lists recorded in ``command.txt``, so each line there reproduces its step.  Every
file is written atomically, so the run is safe to kill at any moment; a rerun
resumes from the first unfinished step (training from ``last.pt``).  A finished run asked
for an extra split it lacks gets only that split's translate and evaluate steps.

A worker is ``python -m scanmt.experiments.runner SPEC.json THREADS``; the pool
(:func:`run_pool`) starts up to ``workers`` of them, one per GPU when given GPUs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shlex
import signal
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from scanmt.config import config_differences, with_defaults
from scanmt.errors import ConfigError, DataError, ScanmtError
from scanmt.experiments.grid import Grid, GridError, System
from scanmt.io import atomic_open

#: config keys whose change does not make a finished run stale
IGNORED_KEYS = ("train.threads", "decode.batch_size")
#: decode keys passed to `scanmt translate` when they differ from the checkpoint's config
DECODE_OPTIONS = {
    "beam": "--beam",
    "length_alpha": "--length-alpha",
    "coverage_beta": "--coverage-beta",
    "coverage_eps": "--coverage-eps",
    "penalty_mode": "--penalty-mode",
    "batch_size": "--batch-size",
}
PENALTY_KEYS = ("length_alpha", "coverage_beta", "coverage_eps", "penalty_mode")
STAGES = ("train", "tune", "translate", "evaluate")
#: extra test splits every run also translates and scores when the prepared data has them
DEFAULT_EXTRA_SPLITS = ("test2017",)
EXIT_BUSY = 75
LOCK_WAIT_S = 30.0


# --------------------------------------------------------------------------- small helpers


def repo_root() -> Path:
    import scanmt

    return Path(scanmt.__file__).resolve().parents[2]


def git_commit(root: Path | None = None) -> str:
    """``git rev-parse`` of the source checkout (``+dirty`` when src/ has uncommitted changes), or ``unknown``."""
    root = root or repo_root()
    if not (root / ".git").exists():
        return "unknown (not a git checkout)"
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=20, env=env, check=True).stdout.strip()
        status = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", "src"], capture_output=True,
                                text=True, timeout=20, env=env, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown (git failed)"
    return head + ("+dirty" if status else "")


def cli_options(command: str) -> set[str] | None:
    """The option strings of ``scanmt COMMAND`` (None when this installation has no such command)."""
    import argparse

    from scanmt.cli.main import build_parser

    parser = build_parser()
    for action in parser._actions:  # noqa: SLF001 - argparse has no public accessor for subparsers
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            sub = action.choices.get(command)
            if sub is None:
                return None
            return {s for a in sub._actions for s in a.option_strings}  # noqa: SLF001
    return None


def write_json(path: Path, obj: Any) -> None:
    with atomic_open(path) as fh:
        json.dump(obj, fh, indent=2, ensure_ascii=False)
        fh.write("\n")


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    return obj if isinstance(obj, dict) else None


def cmdline(argv: Sequence[str]) -> str:
    return "scanmt " + shlex.join(list(argv))


@contextlib.contextmanager
def file_lock(path: Path, *, wait_s: float = 0.0) -> Iterator[bool]:
    """An exclusive ``flock`` on ``path`` (released when the process dies); yields whether it was taken."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    fh = open(path, "a+")  # noqa: SIM115 - held for the duration
    deadline = time.time() + wait_s
    try:
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.time() >= deadline:
                    yield False
                    return
                time.sleep(0.5)
        fh.seek(0)
        fh.truncate()
        fh.write(f"{os.getpid()}\n")
        fh.flush()
        try:
            yield True
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
    finally:
        fh.close()


# --------------------------------------------------------------------------- plan


@dataclass
class RunContext:
    """Everything a grid invocation fixes for all of its runs."""

    out: Path
    preset: Path
    data_dir: Path
    src_lang: str
    tgt_lang: str
    cli_set: list[str]
    split: str
    command: str
    commit: str
    align_model: Path
    predictor: Path | None = None
    #: further prepared test splits every run translates and scores after the main one
    extra_splits: tuple[str, ...] = ()


@dataclass
class RunSpec:
    """One run (system x seed): its config and the exact commands of its steps."""

    grid: str
    system: str
    label: str
    seed: int
    run_dir: str
    preset: str
    overrides: list[str]
    config: dict[str, Any]
    split: str
    src_lang: str
    tgt_lang: str
    tune_penalties: bool
    model_from: str | None
    train_argv: list[str] | None
    tune_argv: list[str] | None
    translate_argv: list[str]
    evaluate_argv: list[str]
    command: str
    commit: str
    device_options: dict[str, bool] = field(default_factory=dict)
    #: extra test split -> {"translate": argv, "evaluate": argv}, in the order they run
    extra_splits: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    #: one entry per attempt: {"started": time, "commit": ...} (a run resumed under another commit shows it)
    history: list[dict[str, str]] = field(default_factory=list)

    @property
    def dir(self) -> Path:
        return Path(self.run_dir)

    @property
    def key(self) -> str:
        return f"{self.system}/seed{self.seed}"

    @property
    def checkpoint(self) -> Path:
        return Path(self.model_from or self.run_dir) / "best.pt"

    def steps(self) -> list[tuple[str, list[str] | None]]:
        """``(stage, argv)`` of every step in order (argv None: the step is not part of this run)."""
        steps = [("train", self.train_argv), ("tune", self.tune_argv), ("translate", self.translate_argv),
                 ("evaluate", self.evaluate_argv)]
        for split, argvs in self.extra_splits.items():
            steps += [(f"translate.{split}", argvs["translate"]), (f"evaluate.{split}", argvs["evaluate"])]
        return steps

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "RunSpec":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


def run_dir(out: Path, system: str, seed: int) -> Path:
    return out / "runs" / system / f"seed{seed}"


def stage_marker(run: Path, stage: str) -> Path:
    return run / ".stages" / f"{stage}.done"


def missing_splits(spec: RunSpec) -> list[str]:
    """The extra splits of ``spec`` its ``metrics.json`` has no numbers for."""
    if not spec.extra_splits:
        return []
    have = (read_json(spec.dir / "metrics.json") or {}).get("test_sets") or {}
    return [split for split in spec.extra_splits if split not in have]


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


def run_status(spec: RunSpec) -> str:
    """``done``, ``resume`` (something is there already) or ``new``.

    A run finished (DONE) without an extra split it is now asked for is ``resume``: only that
    split's steps are left (the markers of the others exist).
    """
    d = spec.dir
    if (d / "DONE").exists() and not missing_splits(spec):
        return "done"
    if (d / "last.pt").exists() or any(stage_marker(d, s).exists() for s in STAGES):
        return "resume"
    return "new"


def needs_training(spec: RunSpec) -> bool:
    """Whether the run still has to train its model (shared predictor and fertility caches are for these)."""
    return spec.train_argv is not None and run_status(spec) != "done" and not stage_marker(spec.dir, "train").exists()


def _load_config(ctx: RunContext, overrides: list[str], where: str):
    from scanmt.config import Config

    try:
        return Config.load(ctx.preset, overrides)
    except ConfigError as exc:
        raise GridError(f"{where}: {exc}") from None


def _check_config(cfg, where: str, tune: bool, auto_predictor: Path | None = None) -> None:
    """Checks the trainer would only make after data loading: transform, fertility, tuning needs."""
    from scanmt.model.transforms import get_transform, names

    att = cfg.model.attention
    if att.transform not in names():
        raise GridError(f"{where}: model.attention.transform={att.transform!r} is unknown (known: {', '.join(names())})")
    constrained = get_transform(att.transform).constrained
    strategy = att.fertility.strategy
    if constrained:
        if strategy == "none":
            raise GridError(f"{where}: {att.transform} needs model.attention.fertility.strategy "
                            "(constant, guided or predicted)")
        if strategy == "actual":
            raise GridError(f"{where}: model.attention.fertility.strategy=actual (oracle) needs reference alignments "
                            "at test time, which the grid runner does not provide; use constant, guided or predicted")
        if strategy not in ("constant", "guided", "predicted"):
            raise GridError(f"{where}: model.attention.fertility.strategy={strategy!r} is unknown "
                            "(constant, guided, predicted)")
        pred = att.fertility.predictor
        if strategy == "predicted" and pred and Path(pred) != auto_predictor and not Path(pred).exists():
            raise GridError(f"{where}: model.attention.fertility.predictor={att.fertility.predictor}: file not found")
    elif strategy != "none":
        raise GridError(f"{where}: model.attention.fertility.strategy={strategy!r} only applies to constrained "
                        f"transforms (csoftmax, csparsemax), not {att.transform}")
    if tune and cfg.decode.beam < 2:
        raise GridError(f"{where}: tune_penalties needs beam search; decode.beam={cfg.decode.beam}")


def uses_predictor(cfg) -> bool:
    from scanmt.model.transforms import get_transform

    att = cfg.model.attention
    return get_transform(att.transform).constrained and att.fertility.strategy == "predicted"


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


def _check_tuning(grid: Grid, systems: Sequence[System]) -> tuple[set[str] | None, set[str]]:
    """The option strings of ``tune-penalties`` (None when no system tunes) and ``translate``."""
    tune_opts = None
    if any(s.tune_penalties for s in systems):
        tune_opts = cli_options("tune-penalties")
        names = ", ".join(s.name for s in systems if s.tune_penalties)
        if tune_opts is None:
            raise GridError(f"{grid.path}: system(s) {names} set tune_penalties, but this installation has no "
                            "`scanmt tune-penalties` command; leave them out with --systems or set tune_penalties: false")
    translate_opts = cli_options("translate") or set()
    if any(s.tune_penalties for s in systems) and "--penalties" not in translate_opts:
        raise GridError(f"{grid.path}: tune_penalties needs `scanmt translate --penalties`, which this installation lacks")
    return tune_opts, translate_opts


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
        return self.run / "penalties.yaml"


def _tune_argv(ctx: RunContext, d: _Decode, tune_opts: set[str] | None) -> list[str] | None:
    if not d.tune:
        return None
    argv = ["tune-penalties", "--model", d.ckpt, "--data", str(ctx.data_dir), "--split", "valid",
            "--out", str(d.penalties)]
    assert tune_opts is not None
    for key, opt in (("beam", "--beam"), ("penalty_mode", "--penalty-mode"),
                     ("coverage_eps", "--coverage-eps"), ("batch_size", "--batch-size")):
        if opt in tune_opts and (key == "beam" or d.dec[key] != d.model_dec[key]):
            argv += [opt, str(d.dec[key])]
        elif key in ("penalty_mode", "coverage_eps") and d.dec[key] != d.model_dec[key]:
            raise GridError(f"{d.where}: decode.{key}={d.dec[key]!r} differs from the model's but "
                            f"`scanmt tune-penalties` has no {opt}")
    return argv


def _translate_argv(ctx: RunContext, d: _Decode, split: str, translate_opts: set[str]) -> list[str]:
    """``scanmt translate`` of one prepared split into ``RUN/{split}.hyp.{tgt}`` (+ tokenized, attention)."""
    s, t = ctx.src_lang, ctx.tgt_lang
    argv = ["translate", "--model", d.ckpt, "--input", str(ctx.data_dir / f"{split}.raw.{s}"),
            "--output", str(d.run / f"{split}.hyp.{t}"), "--tokenized-out", str(d.run / f"{split}.hyp.tok.{t}"),
            "--attention-out", str(d.run / f"{split}.attn.npz"), "--beam", str(d.dec["beam"])]
    if d.tune:
        argv += ["--penalties", str(d.penalties)]
    for key, opt in DECODE_OPTIONS.items():
        if key == "beam" or (d.tune and key in PENALTY_KEYS) or d.dec[key] == d.model_dec[key]:
            continue
        if opt not in translate_opts:
            raise GridError(f"{d.where}: decode.{key}={d.dec[key]!r} differs from the config of the model it "
                            f"decodes, but `scanmt translate` has no {opt}")
        argv += [opt, str(d.dec[key])]
    return argv


def eval_json_name(split: str, main_split: str) -> str:
    """``eval.json`` for the main split, ``eval.{split}.json`` for an extra one."""
    return "eval.json" if split == main_split else f"eval.{split}.json"


def _evaluate_argv(ctx: RunContext, run: Path, split: str) -> list[str]:
    """``scanmt evaluate`` of ``RUN/{split}.hyp.{tgt}`` against the prepared split."""
    s, t = ctx.src_lang, ctx.tgt_lang
    return ["evaluate", "--hyp", str(run / f"{split}.hyp.{t}"), "--ref", str(ctx.data_dir / f"{split}.raw.{t}"),
            "--src", str(ctx.data_dir / f"{split}.raw.{s}"), "--align-model", str(ctx.align_model),
            "--attention", str(run / f"{split}.attn.npz"), "--src-lang", s, "--tgt-lang", t,
            "--json", str(run / eval_json_name(split, ctx.split))]


def _stale(spec: RunSpec) -> str | None:
    """Why the run directory was made with another config than ``spec``'s, or None."""
    old = read_json(spec.dir / "spec.json")
    if old is None:
        return None
    diffs = config_differences(with_defaults(old.get("config", {})), spec.config, IGNORED_KEYS)
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
    diffs = config_differences(model_cfg, cfg_dict, IGNORED_KEYS, prefixes=("decode.",))
    if diffs:
        k, a, b = diffs[0]
        raise GridError(f"{grid.path}: system {system.name!r}: reuse_model {system.reuse_model!r} was trained with "
                        f"{k}={a!r} but this system sets {k}={b!r}; only decode.* may differ")
    return str(run_dir(ctx.out, system.reuse_model, seed)), model_cfg


def _plan_one(grid: Grid, system: System, seed: int, ctx: RunContext, overrides: list[str],
              configs: dict[tuple[str, int], dict[str, Any]], opts: tuple[set[str] | None, set[str]]) -> RunSpec:
    """The spec of one run (system x seed): the exact argv of each of its steps."""
    tune_opts, translate_opts = opts
    cfg_dict = configs[system.name, seed]
    d = run_dir(ctx.out, system.name, seed)
    model_from, model_cfg = _model_from(grid, system, ctx, seed, configs)
    dec = _Decode(f"{grid.path}: system {system.name!r}", d, str(Path(model_from or d) / "best.pt"),
                  cfg_dict["decode"], model_cfg["decode"], system.tune_penalties)
    train_argv = None
    if model_from is None:
        train_argv = ["train", "--config", str(ctx.preset)]
        for o in overrides:
            train_argv += ["--set", o]
        train_argv += ["--out", str(d)]
    extra = {split: {"translate": _translate_argv(ctx, dec, split, translate_opts),
                     "evaluate": _evaluate_argv(ctx, d, split)} for split in ctx.extra_splits}
    return RunSpec(
        grid=grid.name, system=system.name, label=system.label, seed=seed, run_dir=str(d),
        preset=str(ctx.preset), overrides=overrides, config=cfg_dict, split=ctx.split, src_lang=ctx.src_lang,
        tgt_lang=ctx.tgt_lang, tune_penalties=system.tune_penalties, model_from=model_from, train_argv=train_argv,
        tune_argv=_tune_argv(ctx, dec, tune_opts), translate_argv=_translate_argv(ctx, dec, ctx.split, translate_opts),
        evaluate_argv=_evaluate_argv(ctx, d, ctx.split), command=ctx.command, commit=ctx.commit,
        device_options={"tune": bool(tune_opts and "--device" in tune_opts), "translate": "--device" in translate_opts},
        extra_splits=extra,
    )


def plan_runs(grid: Grid, systems: Sequence[System], seeds: Sequence[int], ctx: RunContext) -> list[RunSpec]:
    """Every run's spec, in the order seeds x systems; raises :class:`GridError` before any work.

    Checks: each config loads; transform and fertility are consistent; systems
    that reuse a model agree with it outside ``decode``; tuning is available when
    asked for; a run directory made earlier with another config is not silently
    mixed with this one.  Extra splits (``ctx.extra_splits``) never make a run stale.
    """
    opts = _check_tuning(grid, systems)
    resolved = {(s.name, seed): system_config(grid, s, ctx, seed) for seed in seeds for s in systems}
    configs = {key: cfg.to_dict() for key, (_, cfg) in resolved.items()}
    specs = [_plan_one(grid, system, seed, ctx, resolved[system.name, seed][0], configs, opts)
             for seed in seeds for system in systems]
    problems = [p for p in map(_stale, specs) if p is not None]
    if problems:
        raise GridError(
            "these runs were made with another config; use another --out, or delete them to redo them:\n  "
            + "\n  ".join(problems)
        )
    return specs


def write_spec(spec: RunSpec) -> Path:
    """Write ``spec.json`` for a new attempt, keeping the attempts (and commits) of earlier ones."""
    path = spec.dir / "spec.json"
    old = read_json(path) or {}
    history = [h for h in old.get("history") or [] if isinstance(h, dict)]
    spec.history = history + [{"started": time.strftime("%Y-%m-%d %H:%M:%S"), "commit": spec.commit}]
    write_json(path, spec.to_dict())
    return path


# --------------------------------------------------------------------------- one run (worker process)


def _die_with_parent() -> None:
    """Linux: get SIGTERM when the process that started us dies (a killed grid takes its workers along)."""
    parent = os.environ.get("SCANMT_GRID_PID")
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if parent and os.getppid() != int(parent):  # the parent died before prctl
        os._exit(1)


def _step(argv: list[str], what: str) -> float:
    from scanmt.cli.main import main

    print(f"\n=== {what}: {cmdline(argv)}", flush=True)
    t0 = time.time()
    rc = main(argv)
    sys.stdout.flush()
    if rc != 0:
        raise DataError(f"{what} failed (exit status {rc}): {cmdline(argv)}")
    return time.time() - t0


def _mark(run: Path, stage: str, info: dict[str, Any]) -> None:
    write_json(stage_marker(run, stage), {**info, "finished": time.strftime("%Y-%m-%d %H:%M:%S")})


def _train_summary(run: Path) -> dict[str, Any]:
    from scanmt.training.checkpoint import load_checkpoint

    p = load_checkpoint(run / "last.pt").get("progress", {})
    epochs = p.get("epoch", 1) - (1 if p.get("batch_in_epoch", 0) == 0 else 0)
    return {"steps": p.get("step"), "epochs": epochs, "minutes": round(p.get("elapsed", 0.0) / 60, 2),
            "best_valid_bleu": p.get("best_score"), "best_step": p.get("best_step")}


def _with_device(argv: list[str] | None, allowed: bool, device: str) -> list[str] | None:
    if argv is None or not allowed or device == "cpu":
        return argv
    return argv + ["--device", device]


def device_steps(spec: RunSpec, device: str) -> list[tuple[str, list[str] | None]]:
    """:meth:`RunSpec.steps` with ``--device`` added to the decoding steps whose command has it."""
    return [(stage, argv if stage == "train" else
             _with_device(argv, spec.device_options.get(stage.partition(".")[0], False), device))
            for stage, argv in spec.steps()]


def write_command_file(spec: RunSpec, steps: list[tuple[str, list[str] | None]], device: str) -> None:
    lines = [
        f"# {spec.grid}: system {spec.system} ({spec.label}), seed {spec.seed}",
        f"# git commit: {spec.commit}",
        f"# device: {device}",
        "# the grid command that made this run:",
        spec.command,
        "# the steps it ran (each line reproduces its step; train continues a killed run with --resume):",
    ]
    if spec.model_from:
        lines.append(f"# (model trained by {spec.model_from}; no training here)")
    lines += [cmdline(argv) for _, argv in steps if argv is not None]
    with atomic_open(spec.dir / "command.txt") as fh:
        fh.write("\n".join(lines) + "\n")


def run_one(spec: RunSpec, threads: int) -> dict[str, Any]:
    """Run (or finish) one run in this process; returns its metrics (also in ``metrics.json``)."""
    import torch

    run = spec.dir
    torch.set_num_threads(max(1, threads))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    steps = device_steps(spec, device)
    write_command_file(spec, steps, device)
    print(f"=== {spec.key} ({spec.label}) in {run}: device {device}, {threads} thread(s), commit {spec.commit}",
          flush=True)
    seconds: dict[str, float] = {}
    if spec.train_argv is not None:
        if stage_marker(run, "train").exists():
            print("=== train: done before", flush=True)
        else:
            argv = list(spec.train_argv)
            if (run / "last.pt").exists():
                argv.append("--resume")
                print("=== train: resuming from last.pt", flush=True)
            seconds["train"] = _step(argv, "train")
            _mark(run, "train", {**_train_summary(run), "seconds": round(seconds["train"], 1)})
    elif not stage_marker(Path(spec.model_from or ""), "train").exists():
        raise DataError(f"{spec.key}: the model it decodes ({spec.model_from}) is not trained yet")
    for stage, argv in steps[1:]:
        if argv is None:
            continue
        if stage_marker(run, stage).exists():
            print(f"=== {stage}: done before", flush=True)
            continue
        seconds[stage] = _step(argv, stage)
        _mark(run, stage, {"seconds": round(seconds[stage], 1)})
    metrics = collect_metrics(spec)
    write_json(run / "metrics.json", metrics)
    with atomic_open(run / "DONE") as fh:
        fh.write(time.strftime("%Y-%m-%d %H:%M:%S") + "\n")
    print(f"=== {spec.key}: DONE (BLEU {metrics['bleu']:.2f})", flush=True)
    return metrics


def collect_metrics(spec: RunSpec) -> dict[str, Any]:
    """``metrics.json`` of a run whose steps have all finished."""
    import yaml

    run = spec.dir
    ev = read_json(run / "eval.json")
    if ev is None:
        raise DataError(f"{run / 'eval.json'}: missing or unreadable; rerun the grid to redo evaluation")
    train_dir = Path(spec.model_from) if spec.model_from else run
    train = read_json(stage_marker(train_dir, "train")) or {}
    penalties = None
    if spec.tune_penalties:
        try:
            penalties = yaml.safe_load((run / "penalties.yaml").read_text(encoding="utf-8"))
            penalties = {k: v for k, v in penalties.items() if k != "grid"}
        except (OSError, yaml.YAMLError, AttributeError):
            penalties = None
    stages = {s: (read_json(stage_marker(run, s)) or {}).get("seconds") for s, _ in spec.steps()}
    if spec.model_from:
        stages["train"] = None
    dec = spec.config["decode"]
    return {
        "grid": spec.grid, "system": spec.system, "label": spec.label, "seed": spec.seed, "split": spec.split,
        "sentences": ev.get("sentences"),
        "bleu": ev["tok_bleu"]["score"], "bleu_signature": ev["tok_bleu"]["signature"],
        "sacrebleu": ev["bleu"]["score"], "sacrebleu_signature": ev["bleu"]["signature"],
        "meteor": ev["meteor"]["score"], "meteor_synonyms": ev["meteor"].get("synonyms"),
        "rep": ev["rep"]["score"], "drop": ev["drop"]["score"],
        "drop_of_ref_aligned": ev["drop"].get("score_of_ref_aligned"),
        "attention": ev.get("attention_stats", {}),
        "train": {k: train.get(k) for k in ("steps", "epochs", "minutes", "best_valid_bleu", "best_step")},
        "model_from": spec.model_from, "checkpoint": str(spec.checkpoint),
        "decode": {k: dec[k] for k in ("beam", *PENALTY_KEYS)}, "penalties": penalties,
        "transform": spec.config["model"]["attention"]["transform"],
        "commit": spec.commit, "commits": sorted({h["commit"] for h in spec.history} | {spec.commit}),
        "command": spec.command, "seconds": stages,
        "test_sets": {split: split_metrics(run / eval_json_name(split, spec.split)) for split in spec.extra_splits},
    }


def split_metrics(path: Path) -> dict[str, Any]:
    """One extra test split's entry of ``metrics.json`` ``test_sets``, from its ``eval.{split}.json``.

    ``bleu`` is tokenized BLEU like the top-level ``bleu`` (the paper's); ``sacrebleu`` the detokenized one.
    """
    ev = read_json(path)
    if ev is None:
        raise DataError(f"{path}: missing or unreadable; rerun the grid to redo its evaluation")
    return {"sentences": ev.get("sentences"), "bleu": ev["tok_bleu"]["score"], "sacrebleu": ev["bleu"]["score"],
            "meteor": ev["meteor"]["score"], "rep": ev["rep"]["score"], "drop": ev["drop"]["score"]}


def worker_main(argv: Sequence[str]) -> int:
    """``python -m scanmt.experiments.runner SPEC.json THREADS``: exit 0 done, 2 error, 75 busy."""
    _die_with_parent()
    spec_path, threads = Path(argv[0]), int(argv[1]) if len(argv) > 1 else 1
    spec = RunSpec.from_dict(json.loads(spec_path.read_text(encoding="utf-8")))
    with file_lock(spec.dir / ".lock", wait_s=LOCK_WAIT_S) as locked:
        if not locked:
            print(f"{spec.key}: another process is running it ({spec.dir / '.lock'})", file=sys.stderr, flush=True)
            return EXIT_BUSY
        try:
            run_one(spec, threads)
        except ScanmtError as exc:
            print(f"{spec.key}: error: {exc}", file=sys.stderr, flush=True)
            return 2
        except KeyboardInterrupt:
            print(f"{spec.key}: interrupted", file=sys.stderr, flush=True)
            return 130
        except Exception:  # noqa: BLE001 - a bug: keep the traceback in the run's log
            traceback.print_exc()
            return 1
    return 0


# --------------------------------------------------------------------------- pool


@dataclass
class RunResult:
    spec: RunSpec
    status: str  # done | skipped | failed | busy
    seconds: float = 0.0
    message: str = ""
    metrics: dict[str, Any] | None = None


def visible_gpus() -> list[str]:
    """GPU ids the workers may use (CUDA_VISIBLE_DEVICES, else every device torch sees)."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [g.strip() for g in env.split(",") if g.strip() and g.strip() != "-1"]
    try:
        import torch

        return [str(k) for k in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
    except Exception:  # noqa: BLE001
        return []


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _tail(path: Path, n: int = 3) -> str:
    try:
        lines = [ln for ln in path.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return " | ".join(ln.strip()[-200:] for ln in lines[-n:])


def describe(metrics: dict[str, Any] | None) -> str:
    if not metrics:
        return ""
    return (f"BLEU {metrics['bleu']:.2f}, METEOR {metrics['meteor']:.2f}, REP {metrics['rep']:.2f}, "
            f"DROP {metrics['drop']:.2f}")


def resume_note(spec: RunSpec) -> str:
    """What a (re)started run picks up, for the pool's ``start`` line ("" for a new run)."""
    if run_status(spec) != "resume":
        return ""
    if (spec.dir / "last.pt").exists() and not stage_marker(spec.dir, "train").exists():
        return ", resuming training from last.pt"
    if (spec.dir / "DONE").exists():
        return f", adding test set(s) {', '.join(missing_splits(spec))}"
    return ", resuming after its finished steps"


def run_pool(specs: Sequence[RunSpec], *, workers: int, gpus: Sequence[str], threads: dict[str, int],
             say: Callable[[str], None], poll_s: float = 0.3) -> list[RunResult]:
    """Run the specs not yet DONE in up to ``workers`` worker processes.

    Runs that decode another system's model wait until that model is trained.
    ``threads`` gives each run's torch thread count (by run key).  With ``gpus``,
    worker slot ``k`` sees only GPU ``gpus[k % len(gpus)]``.
    """
    pool = _Pool(specs, workers=workers, gpus=gpus, threads=threads, say=say)
    try:
        while pool.pending or pool.running:
            pool.reap()
            launched = pool.launch_ready()
            if not pool.running and pool.pending and not launched:
                pool.fail_stranded()
            if pool.running:
                time.sleep(poll_s)
    except BaseException:
        pool.stop_all()
        raise
    return [pool.results[s.key] for s in specs if s.key in pool.results]


@dataclass
class _Worker:
    """One running worker process: its run, when it started and its open log file."""

    proc: subprocess.Popen
    spec: RunSpec
    started: float
    log: Any


class _Pool:
    """The state of :func:`run_pool`: runs waiting, worker slots, workers running, results."""

    def __init__(self, specs: Sequence[RunSpec], *, workers: int, gpus: Sequence[str], threads: dict[str, int],
                 say: Callable[[str], None]) -> None:
        self.specs, self.gpus, self.threads, self.say = specs, gpus, threads, say
        self.results: dict[str, RunResult] = {}
        self.order = {s.key: k for k, s in enumerate(specs, 1)}
        self.running: dict[int, _Worker] = {}
        self.free = list(range(max(1, workers)))
        self.pending: list[RunSpec] = []
        for spec in specs:
            if run_status(spec) == "done":
                m = read_json(spec.dir / "metrics.json")
                self.results[spec.key] = RunResult(spec, "skipped", metrics=m, message="done before")
                self.tell(spec, "skip ", f"done before ({describe(m)})", sep=": ")
            else:
                self.pending.append(spec)

    def tell(self, spec: RunSpec, what: str, text: str, sep: str = " ") -> None:
        """``[k/N] WHAT KEY TEXT``: one line of the pool's progress."""
        self.say(f"[{self.order[spec.key]}/{len(self.specs)}] {what} {spec.key}{sep}{text}")

    def ready(self, spec: RunSpec) -> bool | None:
        """Whether ``spec`` can start now (None: never, the run that trains its model failed)."""
        if spec.model_from is None:
            return True
        if stage_marker(Path(spec.model_from), "train").exists():
            return True
        src_key = next((s.key for s in self.specs if s.run_dir == spec.model_from), None)
        if src_key in self.results and self.results[src_key].status not in ("done", "skipped"):
            return None  # its model will never come
        return False

    def launch(self, slot: int, spec: RunSpec) -> None:
        path = write_spec(spec)
        env = {**os.environ, "SCANMT_GRID_PID": str(os.getpid())}
        n = self.threads.get(spec.key, 1)
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(n)
        where = "cpu"
        if self.gpus:
            env["CUDA_VISIBLE_DEVICES"] = self.gpus[slot % len(self.gpus)]
            where = f"GPU {self.gpus[slot % len(self.gpus)]}"
        note = resume_note(spec)
        log = open(spec.dir / "log.txt", "ab")  # noqa: SIM115 - closed when the process ends
        log.write(f"\n##### {time.strftime('%Y-%m-%d %H:%M:%S')} start ({where}, {n} threads)\n".encode())
        log.flush()
        proc = subprocess.Popen([sys.executable, "-m", "scanmt.experiments.runner", str(path), str(n)],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        self.running[slot] = _Worker(proc, spec, time.time(), log)
        self.tell(spec, "start", f"({where}, {n} thread{'s' if n > 1 else ''}{note}); log {spec.dir / 'log.txt'}")

    def finish(self, slot: int) -> None:
        w = self.running.pop(slot)
        w.log.close()
        self.free.append(slot)
        self.free.sort()
        spec, dt, rc = w.spec, time.time() - w.started, w.proc.returncode
        if rc == 0:
            m = read_json(spec.dir / "metrics.json")
            self.results[spec.key] = RunResult(spec, "done", dt, metrics=m)
            self.tell(spec, "done ", f"in {dt / 60:.1f} min: {describe(m)}")
        elif rc == EXIT_BUSY:
            self.results[spec.key] = RunResult(spec, "busy", dt, "another process holds its lock")
            self.tell(spec, "busy ", "another process is running it; left alone", sep=": ")
        else:
            tail = _tail(spec.dir / "log.txt")
            self.results[spec.key] = RunResult(spec, "failed", dt, f"exit status {rc}: {tail}")
            self.tell(spec, "FAILED", f"(exit status {rc}) after {dt / 60:.1f} min; see {spec.dir / 'log.txt'}: {tail}")

    def reap(self) -> None:
        """Collect the workers that have ended."""
        for slot, w in list(self.running.items()):
            if w.proc.poll() is not None:
                self.finish(slot)

    def next_ready(self) -> RunSpec | None:
        """The first pending run that can start (failing those whose model will never come), or None."""
        for spec in list(self.pending):
            r = self.ready(spec)
            if r is None:
                self.pending.remove(spec)
                self.results[spec.key] = RunResult(spec, "failed", message=f"its model ({spec.model_from}) failed")
                self.tell(spec, "FAILED", "the run that trains its model failed", sep=": ")
            elif r:
                return spec
        return None

    def launch_ready(self) -> bool:
        """Start ready runs in the free slots; whether any was started."""
        launched = False
        while self.free and self.pending:
            choice = self.next_ready()
            if choice is None:
                break
            self.pending.remove(choice)
            self.launch(self.free.pop(0), choice)
            launched = True
        return launched

    def fail_stranded(self) -> None:
        """Nothing runs and nothing can start: the pending runs wait for models never trained."""
        for spec in self.pending:
            self.results[spec.key] = RunResult(spec, "failed", message=f"its model ({spec.model_from}) was not trained")
            self.tell(spec, "FAILED", f"its model {spec.model_from} was never trained", sep=": ")
        self.pending.clear()

    def stop_all(self) -> None:
        """Terminate every worker (killed after 20 s) and close its log."""
        for w in self.running.values():
            with contextlib.suppress(OSError):
                w.proc.terminate()
        for w in self.running.values():
            try:
                w.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                w.proc.kill()
            w.log.close()


if __name__ == "__main__":
    sys.exit(worker_main(sys.argv[1:]))
