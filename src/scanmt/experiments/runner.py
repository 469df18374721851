"""Runs of a grid: planning and checking them, running one (a worker process), and the pool.

Every run (system x seed) lives in ``OUT/runs/{system}/seed{k}/``::

    spec.json           what the run is: config, the exact step commands, commit (written by the planner)
    command.txt         the exact commands (grid command, then one `scanmt ...` line per step) and git commit
    log.txt             everything the worker printed (appended across attempts)
    config.yaml, last.pt, best.pt, metrics.csv      scanmt train (resumed from last.pt after a kill)
    penalties.yaml      scanmt tune-penalties (systems with tune_penalties: true)
    {split}.hyp.{tgt}, {split}.hyp.tok.{tgt}, {split}.attn.npz     scanmt translate
    eval.json           scanmt evaluate (every metric with its signature)
    metrics.json        the run's summary: BLEU, tokenized BLEU, METEOR, REP, DROP, attention stats, training
    .stages/*.done      one marker per finished step (train, tune, translate, evaluate)
    DONE                written last; a rerun skips the run

Steps are executed through :func:`scanmt.cli.main.main` with exactly the argument
lists recorded in ``command.txt``, so each line there reproduces its step.  Every
file is written atomically, so the run is safe to kill at any moment; a rerun
resumes from the first unfinished step (training from ``last.pt``).

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


def run_status(spec: RunSpec) -> str:
    """``done``, ``resume`` (something is there already) or ``new``."""
    d = spec.dir
    if (d / "DONE").exists():
        return "done"
    if (d / "last.pt").exists() or any(stage_marker(d, s).exists() for s in STAGES):
        return "resume"
    return "new"


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


def plan_runs(grid: Grid, systems: Sequence[System], seeds: Sequence[int], ctx: RunContext) -> list[RunSpec]:
    """Every run's spec, in the order seeds x systems; raises :class:`GridError` before any work.

    Checks: each config loads; transform and fertility are consistent; systems
    that reuse a model agree with it outside ``decode``; tuning is available when
    asked for; a run directory made earlier with another config is not silently
    mixed with this one.
    """
    tune_opts = translate_opts = None
    if any(s.tune_penalties for s in systems):
        tune_opts = cli_options("tune-penalties")
        names = ", ".join(s.name for s in systems if s.tune_penalties)
        if tune_opts is None:
            raise GridError(f"{grid.path}: system(s) {names} set tune_penalties, but this installation has no "
                            "`scanmt tune-penalties` command; leave them out with --systems or set tune_penalties: false")
    translate_opts = cli_options("translate") or set()
    if any(s.tune_penalties for s in systems) and "--penalties" not in translate_opts:
        raise GridError(f"{grid.path}: tune_penalties needs `scanmt translate --penalties`, which this installation lacks")

    specs: list[RunSpec] = []
    resolved = {(s.name, seed): system_config(grid, s, ctx, seed) for seed in seeds for s in systems}
    configs = {key: cfg.to_dict() for key, (_, cfg) in resolved.items()}
    problems: list[str] = []
    for seed in seeds:
        for system in systems:
            overrides = resolved[system.name, seed][0]
            cfg_dict = configs[system.name, seed]
            d = run_dir(ctx.out, system.name, seed)
            where = f"{grid.path}: system {system.name!r}"
            model_cfg = cfg_dict
            model_from = None
            if system.reuse_model:
                model_cfg = configs[system.reuse_model, seed]
                diffs = config_differences(model_cfg, cfg_dict, IGNORED_KEYS, prefixes=("decode.",))
                if diffs:
                    k, a, b = diffs[0]
                    raise GridError(f"{where}: reuse_model {system.reuse_model!r} was trained with {k}={a!r} but this "
                                    f"system sets {k}={b!r}; only decode.* may differ")
                model_from = str(run_dir(ctx.out, system.reuse_model, seed))
            ckpt = str(Path(model_from or d) / "best.pt")
            dec, model_dec = cfg_dict["decode"], model_cfg["decode"]
            s, t, split = ctx.src_lang, ctx.tgt_lang, ctx.split

            train_argv = None
            if model_from is None:
                train_argv = ["train", "--config", str(ctx.preset)]
                for o in overrides:
                    train_argv += ["--set", o]
                train_argv += ["--out", str(d)]

            tune_argv = None
            penalties = d / "penalties.yaml"
            if system.tune_penalties:
                tune_argv = ["tune-penalties", "--model", ckpt, "--data", str(ctx.data_dir), "--split", "valid",
                             "--out", str(penalties)]
                assert tune_opts is not None
                for key, opt in (("beam", "--beam"), ("penalty_mode", "--penalty-mode"),
                                 ("coverage_eps", "--coverage-eps"), ("batch_size", "--batch-size")):
                    if opt in tune_opts and (key == "beam" or dec[key] != model_dec[key]):
                        tune_argv += [opt, str(dec[key])]
                    elif key in ("penalty_mode", "coverage_eps") and dec[key] != model_dec[key]:
                        raise GridError(f"{where}: decode.{key}={dec[key]!r} differs from the model's but "
                                        f"`scanmt tune-penalties` has no {opt}")

            translate_argv = ["translate", "--model", ckpt, "--input", str(ctx.data_dir / f"{split}.raw.{s}"),
                              "--output", str(d / f"{split}.hyp.{t}"), "--tokenized-out", str(d / f"{split}.hyp.tok.{t}"),
                              "--attention-out", str(d / f"{split}.attn.npz"), "--beam", str(dec["beam"])]
            if system.tune_penalties:
                translate_argv += ["--penalties", str(penalties)]
            for key, opt in DECODE_OPTIONS.items():
                if key == "beam" or (system.tune_penalties and key in PENALTY_KEYS) or dec[key] == model_dec[key]:
                    continue
                if opt not in translate_opts:
                    raise GridError(f"{where}: decode.{key}={dec[key]!r} differs from the config of the model it "
                                    f"decodes, but `scanmt translate` has no {opt}")
                translate_argv += [opt, str(dec[key])]

            evaluate_argv = ["evaluate", "--hyp", str(d / f"{split}.hyp.{t}"), "--ref", str(ctx.data_dir / f"{split}.raw.{t}"),
                             "--src", str(ctx.data_dir / f"{split}.raw.{s}"), "--align-model", str(ctx.align_model),
                             "--attention", str(d / f"{split}.attn.npz"), "--src-lang", s, "--tgt-lang", t,
                             "--json", str(d / "eval.json")]
            spec = RunSpec(
                grid=grid.name, system=system.name, label=system.label, seed=seed, run_dir=str(d),
                preset=str(ctx.preset), overrides=overrides, config=cfg_dict, split=split, src_lang=s, tgt_lang=t,
                tune_penalties=system.tune_penalties, model_from=model_from, train_argv=train_argv,
                tune_argv=tune_argv, translate_argv=translate_argv, evaluate_argv=evaluate_argv,
                command=ctx.command, commit=ctx.commit,
                device_options={"tune": bool(tune_opts and "--device" in tune_opts),
                                "translate": "--device" in translate_opts},
            )
            old = read_json(d / "spec.json")
            if old is not None:
                diffs = config_differences(with_defaults(old.get("config", {})), cfg_dict, IGNORED_KEYS)
                if old.get("model_from") != model_from:
                    diffs.append(("reuse_model", old.get("model_from"), model_from))
                if bool(old.get("tune_penalties")) != system.tune_penalties:
                    diffs.append(("tune_penalties", old.get("tune_penalties"), system.tune_penalties))
                if diffs:
                    k, a, b = diffs[0]
                    more = f" (and {len(diffs) - 1} more)" if len(diffs) > 1 else ""
                    problems.append(f"{d} was made with {k}={a!r} but the grid now gives {k}={b!r}{more}")
            specs.append(spec)
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
    tune_argv = _with_device(spec.tune_argv, spec.device_options.get("tune", False), device)
    translate_argv = _with_device(spec.translate_argv, spec.device_options.get("translate", False), device)
    steps = [("train", spec.train_argv), ("tune", tune_argv), ("translate", translate_argv),
             ("evaluate", spec.evaluate_argv)]
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
    stages = {s: (read_json(stage_marker(run, s)) or {}).get("seconds") for s in STAGES}
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
    }


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


def run_pool(specs: Sequence[RunSpec], *, workers: int, gpus: Sequence[str], threads: dict[str, int],
             say: Callable[[str], None], poll_s: float = 0.3) -> list[RunResult]:
    """Run the specs not yet DONE in up to ``workers`` worker processes.

    Runs that decode another system's model wait until that model is trained.
    ``threads`` gives each run's torch thread count (by run key).  With ``gpus``,
    worker slot ``k`` sees only GPU ``gpus[k % len(gpus)]``.
    """
    results: dict[str, RunResult] = {}
    total = len(specs)
    pending: list[RunSpec] = []
    for k, spec in enumerate(specs, 1):
        if run_status(spec) == "done":
            m = read_json(spec.dir / "metrics.json")
            results[spec.key] = RunResult(spec, "skipped", metrics=m, message="done before")
            say(f"[{k}/{total}] skip  {spec.key}: done before ({describe(m)})")
        else:
            pending.append(spec)
    order = {s.key: k for k, s in enumerate(specs, 1)}
    running: dict[int, tuple[subprocess.Popen, RunSpec, float, Any]] = {}
    free = list(range(max(1, workers)))

    def ready(spec: RunSpec) -> bool | None:
        if spec.model_from is None:
            return True
        if stage_marker(Path(spec.model_from), "train").exists():
            return True
        src_key = next((s.key for s in specs if s.run_dir == spec.model_from), None)
        if src_key in results and results[src_key].status not in ("done", "skipped"):
            return None  # its model will never come
        return False

    def launch(slot: int, spec: RunSpec) -> None:
        path = write_spec(spec)
        env = {**os.environ, "SCANMT_GRID_PID": str(os.getpid())}
        n = threads.get(spec.key, 1)
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(n)
        where = "cpu"
        if gpus:
            env["CUDA_VISIBLE_DEVICES"] = gpus[slot % len(gpus)]
            where = f"GPU {gpus[slot % len(gpus)]}"
        status = run_status(spec)
        note = ""
        if status == "resume":
            note = ", resuming training from last.pt" if (spec.dir / "last.pt").exists() and not stage_marker(
                spec.dir, "train").exists() else ", resuming after its finished steps"
        log = open(spec.dir / "log.txt", "ab")  # noqa: SIM115 - closed when the process ends
        log.write(f"\n##### {time.strftime('%Y-%m-%d %H:%M:%S')} start ({where}, {n} threads)\n".encode())
        log.flush()
        proc = subprocess.Popen([sys.executable, "-m", "scanmt.experiments.runner", str(path), str(n)],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        running[slot] = (proc, spec, time.time(), log)
        say(f"[{order[spec.key]}/{total}] start {spec.key} ({where}, {n} thread{'s' if n > 1 else ''}{note}); "
            f"log {spec.dir / 'log.txt'}")

    def finish(slot: int) -> None:
        proc, spec, t0, log = running.pop(slot)
        log.close()
        free.append(slot)
        free.sort()
        dt = time.time() - t0
        rc = proc.returncode
        if rc == 0:
            m = read_json(spec.dir / "metrics.json")
            results[spec.key] = RunResult(spec, "done", dt, metrics=m)
            say(f"[{order[spec.key]}/{total}] done  {spec.key} in {dt / 60:.1f} min: {describe(m)}")
        elif rc == EXIT_BUSY:
            results[spec.key] = RunResult(spec, "busy", dt, "another process holds its lock")
            say(f"[{order[spec.key]}/{total}] busy  {spec.key}: another process is running it; left alone")
        else:
            tail = _tail(spec.dir / "log.txt")
            results[spec.key] = RunResult(spec, "failed", dt, f"exit status {rc}: {tail}")
            say(f"[{order[spec.key]}/{total}] FAILED {spec.key} (exit status {rc}) after {dt / 60:.1f} min; "
                f"see {spec.dir / 'log.txt'}: {tail}")

    try:
        while pending or running:
            for slot, (proc, _, _, _) in list(running.items()):
                if proc.poll() is not None:
                    finish(slot)
            launched = False
            while free and pending:
                choice = None
                for spec in list(pending):
                    r = ready(spec)
                    if r is None:
                        pending.remove(spec)
                        results[spec.key] = RunResult(spec, "failed", message=f"its model ({spec.model_from}) failed")
                        say(f"[{order[spec.key]}/{total}] FAILED {spec.key}: the run that trains its model failed")
                    elif r:
                        choice = spec
                        break
                if choice is None:
                    break
                pending.remove(choice)
                launch(free.pop(0), choice)
                launched = True
            if not running and pending and not launched:
                for spec in pending:
                    results[spec.key] = RunResult(spec, "failed", message=f"its model ({spec.model_from}) was not trained")
                    say(f"[{order[spec.key]}/{total}] FAILED {spec.key}: its model {spec.model_from} was never trained")
                pending.clear()
            if running:
                time.sleep(poll_s)
    except BaseException:
        for proc, spec, _, log in running.values():
            with contextlib.suppress(OSError):
                proc.terminate()
        for proc, spec, _, log in running.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
            log.close()
        raise
    return [results[s.key] for s in specs if s.key in results]


if __name__ == "__main__":
    sys.exit(worker_main(sys.argv[1:]))
