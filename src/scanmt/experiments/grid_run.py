"""``scanmt experiment run``: a grid run end to end (:func:`run_grid`).

The options are the command line's (:class:`GridRunOptions`).  The grid file and every config are checked and
each run planned before any work (:mod:`scanmt.experiments.planning`); then, holding ``OUT/.lock``, the shared
work is done once (:mod:`scanmt.experiments.shared`), the grid record written
(:mod:`scanmt.experiments.grid_record`), finished decodes moved aside with ``--redecode``
(:mod:`scanmt.experiments.redecode`), the runs run by the pool (:mod:`scanmt.experiments.pool`), and a summary
printed.  ``--dry-run`` prints the plan instead.
"""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Sequence

from scanmt.config import Config
from scanmt.errors import ConfigError
from scanmt.experiments import shared
from scanmt.experiments.common import git_commit
from scanmt.experiments.deadline import clock, parse_deadline
from scanmt.experiments.fertility_hooks import caches_fertility, needs_predictor
from scanmt.experiments.grid import Grid, GridError, check_override, load_grid, select_systems
from scanmt.experiments.grid_record import write_record
from scanmt.experiments.layout import EXPERIMENT_ENTRIES, SharedPaths
from scanmt.experiments.planning import plan_runs, resolve_extra_splits
from scanmt.experiments.pool import RunResult, cpu_count, run_pool, visible_gpus
from scanmt.experiments.progress import RunTimes
from scanmt.experiments.redecode import forget_decodings
from scanmt.experiments.report import format_rows, grid_records, summary_rows
from scanmt.experiments.shared import CORPORA, corpus_vocab_size
from scanmt.experiments.spec import DROP_SAMPLES, RunContext, RunSpec
from scanmt.experiments.state import missing_model, needs_training, redecodable, run_status
from scanmt.io import check_output_dir
from scanmt.presets import preset_path
from scanmt.processes import lock_folder


@dataclass
class GridRunOptions:
    """The options of ``scanmt experiment run`` (its ``--help`` describes each)."""

    grid: Path
    out: Path
    data: str = "multi30k"
    pair: str | None = None
    mirror: str | None = None
    vocab_size: int | None = None
    preset: str = "cpu-small"
    seeds: int = 1
    first_seed: int = 1
    set: list[str] = field(default_factory=list)
    predictor_set: list[str] = field(default_factory=list)
    systems: list[str] | None = None
    split: str = "test"
    extra_splits: list[str] | None = None
    drop_samples: int | None = None
    stress_k: list[int] | None = None
    workers: int | None = None
    redecode: bool = False
    deadline: str | None = None
    dry_run: bool = False

    @classmethod
    def from_args(cls, args: Any) -> "GridRunOptions":
        """The options of a parsed command line (any object with these attributes)."""
        values = {f.name: getattr(args, f.name) for f in fields(cls)}
        return cls(**{**values, "grid": Path(values["grid"]), "out": Path(values["out"])})


def canonical_command(args: GridRunOptions) -> str:
    """The ``scanmt experiment run ...`` command of these options, as the runs record it (defaults left out)."""
    argv = ["experiment", "run", str(args.grid), "--data", args.data]
    if args.pair:
        argv += ["--pair", args.pair]
    if args.mirror:
        argv += ["--mirror", args.mirror]
    if args.data in CORPORA and args.vocab_size not in (None, corpus_vocab_size(args.data)):
        argv += ["--vocab-size", str(args.vocab_size)]
    argv += ["--preset", args.preset, "--seeds", str(args.seeds), "--out", str(args.out)]
    if args.first_seed != 1:
        argv += ["--first-seed", str(args.first_seed)]
    if args.split != "test":
        argv += ["--split", args.split]
    if args.extra_splits is not None:
        argv += ["--extra-splits", *args.extra_splits]
    for s in args.set:
        argv += ["--set", s]
    for s in args.predictor_set:
        argv += ["--predictor-set", s]
    if args.systems:
        argv += ["--systems", *args.systems]
    if args.drop_samples is not None:
        argv += ["--drop-samples", str(args.drop_samples)]
    if args.stress_k:
        argv += ["--stress-k", *map(str, args.stress_k)]
    if args.workers:
        argv += ["--workers", str(args.workers)]
    if args.redecode:
        argv += ["--redecode"]
    return "scanmt " + shlex.join(argv)


def _threads_key(overrides: list[str]) -> str | None:
    found = None
    for o in overrides:
        key, _, value = o.partition("=")
        if key.strip() == "train.threads":
            found = value.strip()
    return found


def is_experiment_dir(d: Path) -> bool:
    """Whether ``d`` holds what ``experiment run`` writes."""
    return any((d / name).exists() for name in EXPERIMENT_ENTRIES)


def available_splits(data: str, data_dir: Path, src: str, tgt: str) -> tuple[list[str], str]:
    """``(splits, where)``: the splits of the prepared data a grid runs on, and where they were read.

    ``--data PATH``: its ``meta.json``. ``--data CORPUS`` (multi30k, kftt): ``OUT/shared/data/meta.json`` once
    prepared for this pair, else the splits ``scanmt prepare`` will write (nothing is prepared to find out).
    """
    from scanmt.data import kftt
    from scanmt.data.multi30k import prepared_splits
    from scanmt.data.prepare import read_meta
    from scanmt.experiments.report.results_json import read_meta_lenient
    named = data in CORPORA
    meta = read_meta_lenient(data_dir) if named else read_meta(data)
    where = f"{data_dir if named else data}/meta.json"
    if meta is not None and (meta.get("src_lang"), meta.get("tgt_lang")) == (src, tgt):
        return list(meta.get("splits") or meta.get("sources") or []), where
    if data == "kftt":
        return list(kftt.PREPARED_SPLITS), f"KFTT {src}-{tgt}"
    return list(prepared_splits(src, tgt)), f"Multi30k {src}-{tgt}"


def _pair(args: GridRunOptions) -> tuple[str, str]:
    """``(src, tgt)``: a prepared --data's own pair, else --pair (the corpus's default: de-en, ja-en)."""
    if args.data not in CORPORA:
        from scanmt.data.prepare import read_meta

        meta = read_meta(args.data)
        return meta["src_lang"], meta["tgt_lang"]
    from scanmt.api.prepare import parse_pair

    return parse_pair(args.pair or CORPORA[args.data])


def _check_args(args: GridRunOptions) -> None:
    """The options of ``experiment run`` that need no file: overrides, seeds, workers."""
    for item in args.set:
        check_override(item, "--set")
    for item in args.predictor_set:
        check_override(item, "--predictor-set", allow_runner_keys=True)
    if args.seeds < 1:
        raise ConfigError(f"--seeds {args.seeds}: need at least 1")
    if not 1 <= args.first_seed <= args.seeds:
        raise ConfigError(f"--first-seed {args.first_seed}: seeds run from --first-seed to --seeds ({args.seeds}), so "
                          f"it must be between 1 and {args.seeds}")
    if args.workers is not None and args.workers < 1:
        raise ConfigError(f"--workers {args.workers}: need at least 1")


def _context(args: GridRunOptions, paths: SharedPaths, out: Path, preset: Path) -> RunContext:
    """The :class:`RunContext` of this invocation (pair, extra splits, commit and command resolved)."""
    src, tgt = _pair(args)
    extra_splits = resolve_extra_splits(args.extra_splits, args.split,
                                               *available_splits(args.data, paths.data, src, tgt))
    return RunContext(
        out=out, preset=preset, data_dir=paths.data, src_lang=src, tgt_lang=tgt, cli_set=list(args.set),
        split=args.split, command=canonical_command(args), commit=git_commit(), align_model=paths.word_aligner,
        predictor=paths.predictor, extra_splits=extra_splits,
        drop_samples=DROP_SAMPLES if args.drop_samples is None else args.drop_samples,
        stress_k=tuple(args.stress_k or ()),
    )


def _needs_predictor(specs: Sequence[RunSpec], paths: SharedPaths) -> bool:
    """Whether a run still to train uses the grid's own fertility predictor."""
    return any(needs_training(s) and needs_predictor(s.config, paths.predictor) for s in specs)


def run_grid(args: GridRunOptions) -> int:
    """``scanmt experiment run``: plan the grid's runs, do the shared work, run the pool, print the summary; the
    exit status (1: a run did not finish)."""
    say = lambda msg: print(msg, flush=True)  # noqa: E731
    t_start = time.time()
    g = load_grid(args.grid)
    _check_args(args)
    deadline = parse_deadline(args.deadline) if args.deadline is not None else None
    systems = select_systems(g, args.systems)
    preset = preset_path(args.preset).resolve()
    Config.load(preset)  # the preset itself must load
    out = check_output_dir(args.out, ours=is_experiment_dir, holds="a scanmt experiment (grids/, runs/, shared/)").resolve()
    paths = SharedPaths(out)
    ctx = _context(args, paths, out, preset)
    seeds = list(range(args.first_seed, args.seeds + 1))
    specs = plan_runs(g, systems, seeds, ctx)  # every config checked before any heavy work
    blocked = [why for why in map(missing_model, specs) if why is not None]
    if blocked:
        raise GridError("these runs cannot go on here:\n  " + "\n  ".join(blocked) + "\nrun the seeds whose models "
                        "trained on this machine (--first-seed, --seeds), or leave these systems out (--systems)")
    need_predictor = _needs_predictor(specs, paths)
    workers = args.workers or 1
    gpus = visible_gpus()
    if args.workers is None and len(gpus) > 1:
        workers = len(gpus)
    cpus = cpu_count()
    threads = {s.key: (s.config["train"]["threads"] or max(1, cpus // workers)) for s in specs}

    say(f"scanmt experiment run: grid {g.name} ({g.path}), {len(systems)} systems x {len(seeds)} seeds = "
        f"{len(specs)} runs in {out}")
    say(f"  data {args.data} ({ctx.src_lang}->{ctx.tgt_lang}), preset {preset}, split {args.split}"
        f" (extra: {', '.join(ctx.extra_splits) or 'none'}), commit {ctx.commit}")
    say(f"  {workers} worker(s)" + (f" on GPUs {', '.join(gpus)}" if gpus else " on CPU")
        + f", {cpus} CPUs; predictor: {'yes' if need_predictor else 'not needed'}")
    if deadline is not None:
        say(f"  deadline {clock(deadline)}: a run expected to end after it is not started")
    if args.dry_run:
        _print_plan(specs, say, args.redecode)
        return 0

    out.mkdir(parents=True, exist_ok=True)
    with lock_folder(out, what="--out"):
        threads_value = _threads_key(list(g.set) + list(args.set))
        if threads_value is not None and threads_value.isdigit() and int(threads_value) > 0:
            import torch

            torch.set_num_threads(int(threads_value))  # the shared steps run in this process
        _shared_steps(args, g, paths, specs, need_predictor, threads_value, say, cpus=cpus)
        write_record(out, g, args, ctx, seeds, specs,
                     work=any(run_status(s) != "done" or args.redecode and redecodable(s) for s in specs))
        if args.redecode:
            forget_decodings(specs, say)

        say(f"\nruns ({len(specs)}):")
        results = run_pool(specs, workers=workers, gpus=gpus if gpus else [], threads=threads, say=say,
                                  deadline=deadline)

    return _summary(out, g.name, specs, results, t_start, say)


def _print_plan(specs: Sequence[RunSpec], say: Callable[[str], None], redecode: bool = False) -> None:
    """The dry run's plan: each run's status (and expected time, from the finished runs' step times), then the
    steps of the first run (and of a tuned one)."""
    say("\nplan (dry run: nothing is done)")
    times = RunTimes(specs)
    for spec in specs:
        status = "redecode" if redecode and redecodable(spec) else run_status(spec)
        estimate = times.estimate(spec) if status in ("new", "resume") else None
        say(f"  {spec.key:<32} {status:<8} "
            + (f"model of {Path(spec.model_from).parent.name}" if spec.model_from else "trains")
            + (", tunes penalties" if spec.tune_penalties else "")
            + (f", expected {estimate.seconds / 60:.0f} min" if estimate is not None else ""))
    shown = [specs[0]] + [s for s in specs if s.tune][:1]
    for spec in shown if specs else []:
        say(f"\nsteps of {spec.key}:")
        for _, request in spec.steps():
            if request:
                say("  " + request.command_line())


def _shared_steps(args: GridRunOptions, g: Grid, paths: SharedPaths, specs: Sequence[RunSpec], need_predictor: bool,
                  threads_value: str | None, say: Callable[[str], None], cpus: int = 1) -> None:
    """Shared work, each step skipped when done before: data, alignment (on up to ``cpus`` CPUs), predictor,
    fertility caches."""
    shared.prepare_data(paths, args.data, args.pair, mirror=args.mirror, vocab_size=args.vocab_size, say=say)
    shared.align(paths, g.align, say, cpus=cpus)
    if need_predictor:
        pred_set = list(g.predictor_set) + list(args.predictor_set)
        if threads_value is not None and _threads_key(pred_set) is None:
            pred_set.insert(0, f"train.threads={threads_value}")
        shared.train_predictor(paths, pred_set, say)
    ferts = [fert for s in specs if needs_training(s) and (fert := caches_fertility(s.config)) is not None]
    shared.cache_fertility(paths, ferts, say)


def _summary(out: Path, grid: str, specs: Sequence[RunSpec], results: Sequence[RunResult], t_start: float,
             say: Callable[[str], None]) -> int:
    """The closing summary (main split, then each extra split); 1 when a run did not finish."""
    failed = [r for r in results if r.status in ("failed", "busy")]
    deferred = [r for r in results if r.status == "deferred"]
    rec = next(r for r in grid_records(out) if r["name"] == grid)
    say(f"\nsummary: grid {grid}, {len(results) - len(failed) - len(deferred)}/{len(specs)} runs finished, "
        f"{(time.time() - t_start) / 60:.1f} min (mean ± std over finished seeds)")
    head = ["system", "seeds", "BLEU", "METEOR", "REP", "DROP"]
    say(format_rows(head, summary_rows(out, rec)))
    for split in rec.get("extra_splits") or []:
        say(f"\n{split}:")
        say(format_rows(head, summary_rows(out, rec, split)))
    if deferred:
        say(f"\n{len(deferred)} run(s) deferred by --deadline (not started; rerun the same command to continue them):")
        for r in deferred:
            say(f"  {r.spec.key}: {r.message}")
    if failed:
        say(f"\n{len(failed)} run(s) did not finish:")
        for r in failed:
            say(f"  {r.spec.key}: {r.status}: {r.message}")
        say("rerun the same command to retry them (finished runs are skipped)")
        return 1
    say(f"\nreport: scanmt experiment report {out} --out docs/")
    return 0
