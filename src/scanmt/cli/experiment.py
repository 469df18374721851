"""``scanmt experiment``: run a grid of systems x seeds (``run``), write its report (``report``), and keep its
finished runs across machines (``archive``, ``restore``)."""

from __future__ import annotations

import argparse
import shlex
import time
from pathlib import Path

from scanmt.cli import HelpFormatter
from scanmt.errors import ConfigError
from scanmt.io import check_output_dir
from scanmt.processes import lock_folder

NAME = "experiment"
HELP = "run a grid of systems x seeds end to end (resumable) and report it like the paper's tables"
DESCRIPTION = """Reproduce the paper's tables: one command runs every system of a grid file for N seeds,
another writes the Markdown report.

  scanmt experiment run experiments/table1.yaml --data multi30k --pair de-en --preset cpu-small --seeds 3 --out runs/table1
  scanmt experiment run experiments/table1.yaml ... --set train.max_minutes=6 --workers 2
  scanmt experiment run experiments/table1.yaml ... --dry-run          # check the grid and print the plan
  scanmt experiment report runs/table1 --out docs/       # docs/experiments-table1.md and .json
  scanmt experiment status runs/table1                   # each run: done, training, decoding, stopped; time left
  scanmt experiment archive runs/table1 --to archive/table1   # finished runs, no checkpoints (for git)
  scanmt experiment restore archive/table1 --out runs/table1  # on a new machine, before `run`

Shared work (data preparation, alignment, fertility predictor) is done once under OUT/shared/; each run
(system x seed) lives in OUT/runs/SYSTEM/seedK/ with its config, checkpoints, translations, attention,
metrics.json and the exact commands (command.txt). Rerunning the same command skips finished runs and
resumes interrupted ones, so it is safe to kill at any moment.

Every run translates and scores the main test split (--split, test = test_2016_flickr), then each extra
split (--extra-splits; by default test2017 = test_2017_flickr when the prepared data has it). A finished
run asked for an extra split it lacks gets only that split's translate and evaluate steps. With --stress-k,
every run's model also gets `scanmt stress` on the main split (RUN/stress/stress.json; a table of mean ± std
over seeds per system and K in the report); a finished run gets only that step.

A grid can outlive the machine it runs on: `archive` packs the finished runs (no checkpoints: 0.4-2 MB a
run) with the shared alignments, and `restore` puts them back and retrains the fertility predictor from them
(checked: its fertilities on the valid split within 1e-3 of the archived ones), so that `run` trains only the
missing runs, with the same fertilities, and `report` reads them all."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.formatter_class = HelpFormatter
    sub = p.add_subparsers(dest="action", metavar="ACTION")
    sub.required = True
    fmt = HelpFormatter
    r = sub.add_parser("run", help="run (or continue) every system x seed of a grid file", formatter_class=fmt,
                       description="Run a grid: shared steps once, then each system x seed in its own folder.")
    r.add_argument("grid", type=Path, help="grid YAML file (experiments/table1.yaml, table2.yaml, tiny.yaml)")
    r.add_argument("--out", type=Path, required=True, help="experiment directory (shared/, runs/, grids/)")
    r.add_argument("--data", default="multi30k", help="a corpus, 'multi30k' or 'kftt' (prepared under "
                   "OUT/shared/data), or an already prepared data directory (scanmt prepare)")
    r.add_argument("--pair", default=None, help="language pair SRC-TGT [de-en for multi30k, ja-en for kftt; a "
                   "prepared --data's own]")
    r.add_argument("--mirror", help="local directory with the corpus's {split}.{lang}.gz files (multi30k, kftt)")
    r.add_argument("--vocab-size", type=int, default=None, help="joint subword vocabulary when preparing a corpus "
                   "[8000 for multi30k, 16000 for kftt]")
    r.add_argument("--preset", default="cpu-small", help="config preset name or YAML path every system starts from")
    r.add_argument("--seeds", type=int, default=1, help="seeds 1..N per system")
    r.add_argument("--set", action="extend", nargs="+", default=[], metavar="KEY=VALUE",
                   help="config override for every system, applied last (e.g. train.max_minutes=6 train.threads=1; repeatable)")
    r.add_argument("--predictor-set", action="extend", nargs="+", default=[], metavar="KEY=VALUE",
                   help="override for the fertility predictor's config, after the grid's predictor_set")
    r.add_argument("--systems", nargs="+", metavar="NAME", help="run only these systems (and those they reuse models from)")
    r.add_argument("--split", default="test", help="the prepared split to translate and score (the main table)")
    r.add_argument("--extra-splits", nargs="*", default=None, metavar="SPLIT",
                   help="further prepared test splits every run also translates and scores (eval.SPLIT.json, "
                   "metrics.json test_sets, a table each in the report); finished runs get only these steps "
                   "[test2017 when the prepared data has it; the option alone: none]")
    r.add_argument("--drop-samples", type=int, default=None, metavar="K",
                   help="DROP of every run averaged over K alignments of each side (`scanmt evaluate --drop-samples`): "
                   "the aligner samples at random, and one alignment varies by about 0.1 DROP points, as much as "
                   "the seeds do; each sample adds one alignment of each side per test split [3]")
    r.add_argument("--stress-k", nargs="+", type=int, default=None, metavar="K",
                   help="also run the coverage stress test (`scanmt stress --k K...`, K test sentences joined into "
                   "one input) of every run's model on the main split, into RUN/stress/; finished runs get only "
                   "this step [no stress test]")
    r.add_argument("--workers", type=int, default=None,
                   help="runs in parallel, each in its own process with max(1, CPUs // workers) threads [1; with "
                        "several GPUs: one per GPU]")
    r.add_argument("--redecode", action="store_true",
                   help="translate and score the selected runs again with this code, keeping their trained "
                        "models (after a change to decoding or scoring); each run's earlier outputs move to "
                        "RUN/previous-decode-N/, and runs that tune penalties tune them again")
    r.add_argument("--deadline", metavar="WHEN",
                   help="start no run that is expected to end after WHEN: +DURATION from now (+2h30m, +90m), HH:MM "
                   "(its next occurrence, local time) or YYYY-MM-DD HH:MM. A run's time is estimated from the finished "
                   "runs in OUT (per step, the median over its system's runs, else over all of OUT's, of its wall time "
                   "or, for a one-thread CPU step, its CPU time when less; a resumed "
                   "training counts only its remaining updates); a run with no estimate starts. Runs not started "
                   "are deferred: rerun the command to continue them. For a machine or batch job with a time limit "
                   "[no deadline]")
    r.add_argument("--dry-run", action="store_true", help="check the grid and every config, print the plan, do nothing")

    q = sub.add_parser("report", help="write a grid's results as Markdown (Table 1/2, Figure 2, Appendix B analogues)",
                       formatter_class=fmt, description="Write DOCS/experiments-GRID.md (+ attention map PNGs) and "
                       "DOCS/experiments-GRID.json (per system: mean and std of BLEU, REP, DROP, METEOR; seeds; "
                       "drop_noise, DROP's spread split between the aligner and the model).")
    q.add_argument("dir", type=Path, help="experiment directory of `scanmt experiment run --out`")
    q.add_argument("--out", type=Path, default=Path("docs"), help="directory for the Markdown and JSON files and figures")
    q.add_argument("--grid", help="report only this grid of DIR [every grid recorded there]")
    q.add_argument("--name", help="file name stem [experiments-GRID]")
    q.add_argument("--baseline", help="system that every other system is compared with (seed by seed in the "
                   "Δ BLEU (p) column; in the DROP noise section and the stress test's paired tests), instead of "
                   "the grid's baseline and each system's own `baseline:` [as the grid file says]")
    q.add_argument("--reference-arm", help="in an ablation, the system whose REP and DROP differences from its "
                   "baseline each arm's (a system with a baseline of its own) are set against, in a difference in "
                   "differences over the stress test's inputs [the grid's `reference_arm:`; none: no such table]")
    q.add_argument("--bootstrap-samples", type=int, default=1000, help="paired bootstrap resamples")
    q.add_argument("--figures", type=int, default=2, help="attention-map figures (Figure 2 analogue)")
    q.add_argument("--examples", type=int, default=5, help="translation examples (Appendix B analogue)")
    q.add_argument("--max-figure-words", type=int, default=25, help="longest source (words) for figures and examples")
    q.add_argument("--max-figure-tokens", type=int, default=30, help="longest source (subwords) for figures")
    _add_status_arguments(sub, fmt)
    _add_archive_arguments(sub, fmt)


def _add_status_arguments(sub: "argparse._SubParsersAction", fmt: type[argparse.HelpFormatter]) -> None:
    st = sub.add_parser("status", formatter_class=fmt, help="where a grid stands: each run done, training, "
                        "decoding, stopped or not started, and the time left",
                        description="Read an experiment folder, without writing or locking anything, and show for "
                        "each run of each grid recorded there: its scores when done; the update it has logged, "
                        "against the updates its system's finished runs took, when training; the step it is in "
                        "when decoding; what a rerun picks up, with the last line of its log, when stopped (killed, "
                        "failed or deferred by --deadline). Times left are estimated from the folder's finished "
                        "runs, as `run --deadline` estimates them.")
    st.add_argument("dir", type=Path, help="experiment directory of `scanmt experiment run --out`")
    st.add_argument("--grid", nargs="+", metavar="NAME", help="only these grids of DIR [every grid recorded there]")
    st.add_argument("--brief", action="store_true", help="leave the finished runs out of the tables")


def _add_archive_arguments(sub: "argparse._SubParsersAction", fmt: type[argparse.HelpFormatter]) -> None:
    from scanmt.experiments.archive import PREDICTOR_TOLERANCE as tol

    a = sub.add_parser("archive", formatter_class=fmt,
                       help="pack a grid's finished runs (no checkpoints) and shared work into a folder for git",
                       description="Add the finished runs of an experiment folder to an archive folder: each run "
                       "without its checkpoints, the shared alignments once (not the fertility predictor: restore "
                       "retrains it), the grid records, and a manifest of digests. Rerun it as runs finish: unchanged runs are kept, "
                       "changed ones (a new split, a stress test) packed again. Refused when the folder's shared "
                       "work differs from the archive's (its runs would not be comparable): other alignments, or a "
                       f"fertility predictor whose expected fertilities on the valid split differ by more than {tol:g} "
                       "from the archived one's (retrained on another processor, its weights differ in the last "
                       "bits only, which is accepted).")
    a.add_argument("dir", type=Path, help="experiment directory of `scanmt experiment run --out`")
    a.add_argument("--to", type=Path, required=True, help="archive folder (made if missing; e.g. archive/table1)")
    b = sub.add_parser("restore", formatter_class=fmt,
                       help="unpack an archive of `experiment archive` into its experiment folder",
                       description="Unpack an archive into the experiment folder it was packed from (runs record "
                       "absolute paths), after checking that the prepared data they read is there and unchanged. "
                       "The fertility predictor is retrained from the archived alignments (about a minute) and must "
                       f"give the archived fertilities on the valid split (within {tol:g}). Finished runs already "
                       "there are kept; then `experiment run` trains only what is missing.")
    b.add_argument("archive", type=Path, help="archive folder of `scanmt experiment archive`")
    b.add_argument("--out", type=Path, required=True, help="the experiment directory (the one it was packed from)")


def run(args: argparse.Namespace) -> int:
    if args.action == "run":
        return _run(args)
    if args.action == "archive":
        return _archive(args)
    if args.action == "restore":
        return _restore(args)
    if args.action == "status":
        return _status(args)
    return _report(args)


# --------------------------------------------------------------------------- run


def canonical_command(args: argparse.Namespace) -> str:
    argv = ["experiment", "run", str(args.grid), "--data", args.data]
    if args.pair:
        argv += ["--pair", args.pair]
    if args.mirror:
        argv += ["--mirror", args.mirror]
    from scanmt.experiments.shared import CORPORA, corpus_vocab_size

    if args.data in CORPORA and args.vocab_size not in (None, corpus_vocab_size(args.data)):
        argv += ["--vocab-size", str(args.vocab_size)]
    argv += ["--preset", args.preset, "--seeds", str(args.seeds), "--out", str(args.out)]
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
    return any((d / name).exists() for name in ("grids", "runs", "shared", ".lock"))


def available_splits(data: str, data_dir: Path, src: str, tgt: str) -> tuple[list[str], str]:
    """``(splits, where)``: the splits of the prepared data a grid runs on, and where they were read.

    ``--data PATH``: its ``meta.json``. ``--data CORPUS`` (multi30k, kftt): ``OUT/shared/data/meta.json`` once
    prepared for this pair, else the splits ``scanmt prepare`` will write (nothing is prepared to find out).
    """
    from scanmt.data import kftt
    from scanmt.data.multi30k import prepared_splits
    from scanmt.data.prepare import read_meta
    from scanmt.experiments.results_json import read_meta_lenient
    from scanmt.experiments.shared import CORPORA

    named = data in CORPORA
    meta = read_meta_lenient(data_dir) if named else read_meta(data)
    where = f"{data_dir if named else data}/meta.json"
    if meta is not None and (meta.get("src_lang"), meta.get("tgt_lang")) == (src, tgt):
        return list(meta.get("splits") or meta.get("sources") or []), where
    if data == "kftt":
        return list(kftt.PREPARED_SPLITS), f"KFTT {src}-{tgt}"
    return list(prepared_splits(src, tgt)), f"Multi30k {src}-{tgt}"


def _pair(args: argparse.Namespace) -> tuple[str, str]:
    """``(src, tgt)``: a prepared --data's own pair, else --pair (the corpus's default: de-en, ja-en)."""
    from scanmt.experiments.shared import CORPORA

    if args.data not in CORPORA:
        from scanmt.data.prepare import read_meta

        meta = read_meta(args.data)
        return meta["src_lang"], meta["tgt_lang"]
    from scanmt.api.prepare import parse_pair

    return parse_pair(args.pair or CORPORA[args.data])


def _check_args(args: argparse.Namespace) -> None:
    """The options of ``experiment run`` that need no file: overrides, seeds, workers."""
    from scanmt.experiments import grid as grid_mod

    for item in args.set:
        grid_mod.check_override(item, "--set")
    for item in args.predictor_set:
        grid_mod.check_override(item, "--predictor-set", allow_runner_keys=True)
    if args.seeds < 1:
        raise ConfigError(f"--seeds {args.seeds}: need at least 1")
    if args.workers is not None and args.workers < 1:
        raise ConfigError(f"--workers {args.workers}: need at least 1")


def _context(args: argparse.Namespace, paths, out: Path, preset: Path):
    """The :class:`RunContext` of this invocation (pair, extra splits, commit and command resolved)."""
    from scanmt.experiments import runner

    src, tgt = _pair(args)
    extra_splits = runner.resolve_extra_splits(args.extra_splits, args.split,
                                               *available_splits(args.data, paths.data, src, tgt))
    return runner.RunContext(
        out=out, preset=preset, data_dir=paths.data, src_lang=src, tgt_lang=tgt, cli_set=list(args.set),
        split=args.split, command=canonical_command(args), commit=runner.git_commit(), align_model=paths.word_aligner,
        predictor=paths.predictor, extra_splits=extra_splits,
        drop_samples=runner.DROP_SAMPLES if args.drop_samples is None else args.drop_samples,
        stress_k=tuple(args.stress_k or ()),
    )


def _needs_predictor(specs, paths) -> bool:
    """Whether a run still to train uses the grid's own fertility predictor."""
    from scanmt.experiments import runner

    return any(
        runner.needs_training(s)
        and s.config["model"]["attention"]["fertility"]["strategy"] == "predicted"
        and s.config["model"]["attention"]["fertility"]["predictor"] == str(paths.predictor)
        for s in specs
    )


def _run(args: argparse.Namespace) -> int:
    from scanmt.config import Config
    from scanmt.experiments import grid as grid_mod
    from scanmt.experiments import runner, shared
    from scanmt.experiments.deadline import clock, parse_deadline
    from scanmt.presets import preset_path

    say = lambda msg: print(msg, flush=True)  # noqa: E731
    t_start = time.time()
    g = grid_mod.load_grid(args.grid)
    _check_args(args)
    deadline = parse_deadline(args.deadline) if args.deadline is not None else None
    systems = grid_mod.select_systems(g, args.systems)
    preset = preset_path(args.preset).resolve()
    Config.load(preset)  # the preset itself must load
    out = check_output_dir(args.out, ours=is_experiment_dir, holds="a scanmt experiment (grids/, runs/, shared/)").resolve()
    paths = shared.SharedPaths(out)
    ctx = _context(args, paths, out, preset)
    seeds = list(range(1, args.seeds + 1))
    specs = runner.plan_runs(g, systems, seeds, ctx)  # every config checked before any heavy work
    need_predictor = _needs_predictor(specs, paths)
    workers = args.workers or 1
    gpus = runner.visible_gpus()
    if args.workers is None and len(gpus) > 1:
        workers = len(gpus)
    cpus = runner.cpu_count()
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
        _shared_steps(args, g, paths, specs, need_predictor, threads_value, say)
        _record(out, g, args, ctx, seeds, specs,
                work=any(runner.run_status(s) != "done" or args.redecode and runner.redecodable(s) for s in specs))
        if args.redecode:
            _forget_decodings(specs, say)

        say(f"\nruns ({len(specs)}):")
        results = runner.run_pool(specs, workers=workers, gpus=gpus if gpus else [], threads=threads, say=say,
                                  deadline=deadline)

    return _summary(out, g.name, specs, results, t_start, say)


def _forget_decodings(specs, say) -> None:
    """``--redecode``: move the finished decodes of ``specs`` aside so that the pool runs them again."""
    from scanmt.experiments import runner

    gone = [spec for spec in specs if runner.decoded(spec) and not runner.redecodable(spec)]
    moved = [(spec, runner.forget_decoding(spec)) for spec in specs if runner.redecodable(spec)]
    say(f"\nredecode: {len(moved)} run(s) will translate and score again"
        + "".join(f"\n  {spec.key}: earlier outputs moved to {dest}" for spec, dest in moved)
        + (f"\nredecode: {len(gone)} run(s) kept as they are, their model gone (a restored archive keeps no "
           "checkpoints; train them again in a new --out to decode them): "
           + ", ".join(f"{spec.key} ({spec.checkpoint})" for spec in gone) if gone else ""))


def _print_plan(specs, say, redecode: bool = False) -> None:
    """The dry run's plan: each run's status (and expected time, from the finished runs' step times), then the
    steps of the first run (and of a tuned one)."""
    from scanmt.experiments import runner

    say("\nplan (dry run: nothing is done)")
    times = runner.RunTimes(specs)
    for spec in specs:
        status = "redecode" if redecode and runner.redecodable(spec) else runner.run_status(spec)
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


def _shared_steps(args: argparse.Namespace, g, paths, specs, need_predictor: bool, threads_value: str | None,
                  say) -> None:
    """Shared work, each step skipped when done before: data, alignment, predictor, fertility caches."""
    from scanmt.experiments import runner, shared

    shared.prepare_data(paths, args.data, args.pair, mirror=args.mirror, vocab_size=args.vocab_size, say=say)
    shared.align(paths, g.align, say)
    if need_predictor:
        pred_set = list(g.predictor_set) + list(args.predictor_set)
        if threads_value is not None and _threads_key(pred_set) is None:
            pred_set.insert(0, f"train.threads={threads_value}")
        shared.train_predictor(paths, pred_set, say)
    ferts = [s.config["model"]["attention"]["fertility"] for s in specs
             if runner.needs_training(s) and s.config["model"]["attention"]["fertility"]["strategy"] != "none"]
    shared.cache_fertility(paths, ferts, say)


def _summary(out: Path, grid: str, specs, results, t_start: float, say) -> int:
    """The closing summary (main split, then each extra split); 1 when a run did not finish."""
    from scanmt.experiments import report as report_mod

    failed = [r for r in results if r.status in ("failed", "busy")]
    deferred = [r for r in results if r.status == "deferred"]
    rec = next(r for r in report_mod.grid_records(out) if r["name"] == grid)
    say(f"\nsummary: grid {grid}, {len(results) - len(failed) - len(deferred)}/{len(specs)} runs finished, "
        f"{(time.time() - t_start) / 60:.1f} min (mean ± std over finished seeds)")
    head = ["system", "seeds", "BLEU", "METEOR", "REP", "DROP"]
    say(report_mod.format_rows(head, report_mod.summary_rows(out, rec)))
    for split in rec.get("extra_splits") or []:
        say(f"\n{split}:")
        say(report_mod.format_rows(head, report_mod.summary_rows(out, rec, split)))
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


#: the keys of a grid record that name the invocation, not the grid: the worktree's preset path, and the
#: overrides (`set`), which an invocation that finds every run finished can change only in the speed settings
#: (any other change would make the runs stale, and the plan refuses that)
_INVOCATION_KEYS = ("command", "commit", "updated", "preset", "commands", "set")


def _record(out: Path, g, args: argparse.Namespace, ctx, seeds: list[int], specs, work: bool = True) -> None:
    """OUT/grids/NAME.{yaml,json}: the grid file as run and what the report needs to know.  An invocation with
    no ``work`` (every run finished) that would change only the keys naming it (:data:`_INVOCATION_KEYS`)
    leaves the record as it was: it trained and decoded nothing, so the record keeps naming the commands that
    did."""
    from scanmt.experiments.runner import read_json, write_json
    from scanmt.io import atomic_open

    path, grid_file = out / "grids" / f"{g.name}.json", out / "grids" / f"{g.name}.yaml"
    old = (read_json(path) or {}) if path.exists() else {}
    record = _record_content(out, g, args, ctx, seeds, specs, old)
    same = {k: v for k, v in old.items() if k not in _INVOCATION_KEYS} == \
        {k: v for k, v in record.items() if k not in _INVOCATION_KEYS}
    if not work and same and grid_file.exists() and grid_file.read_text(encoding="utf-8") == g.text:
        return
    with atomic_open(grid_file) as fh:
        fh.write(g.text)
    write_json(path, record)


def _record_content(out: Path, g, args: argparse.Namespace, ctx, seeds: list[int], specs,
                    old: dict) -> dict:
    """The grid record of this invocation, merged with the ``old`` one (seeds, transforms, commands, systems)."""
    # the same preset file, maybe in another worktree of the code (a changed one would make the runs stale)
    same_preset = Path(old.get("preset") or "").name == Path(str(ctx.preset)).name
    all_seeds = sorted(set(seeds) | set(old.get("seeds") or [])) if same_preset else seeds
    record = {
        **g.as_dict(),
        "systems": [s.as_dict() for s in g.systems],
        "transforms": {s.system: s.config["model"]["attention"]["transform"] for s in specs},
        "outputs": {s.system: s.config["model"]["output"] for s in specs},
        "seeds": all_seeds,
        "data": args.data, "pair": f"{ctx.src_lang}-{ctx.tgt_lang}", "src_lang": ctx.src_lang, "tgt_lang": ctx.tgt_lang,
        "split": ctx.split, "extra_splits": list(ctx.extra_splits), "stress_k": list(ctx.stress_k), "preset": str(ctx.preset), "set": list(g.set) + list(args.set),
        "command": ctx.command, "commit": ctx.commit, "updated": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    for key in ("transforms", "outputs"):
        record[key] = {**old.get(key, {}), **record[key]}
    # every distinct invocation into OUT, oldest first (a grid is often continued with other --systems or --workers)
    earlier = [c for c in old.get("commands") or ([old["command"]] if old.get("command") else []) if c != ctx.command]
    record["commands"] = [*earlier, ctx.command]
    # Systems asked for (--systems) by every invocation into OUT; for a record written before this
    # field existed, the systems that have run directories.
    before = old.get("requested") if "requested" in old else \
        [s.name for s in g.systems if (out / "runs" / s.name).is_dir()]
    asked = {s.system for s in specs} | set(before)
    record["requested"] = [s.name for s in g.systems if s.name in asked]
    return record


# --------------------------------------------------------------------------- report


def _report(args: argparse.Namespace) -> int:
    from scanmt.experiments.report import ReportOptions, write_reports

    argv = ["experiment", "report", str(args.dir), "--out", str(args.out)]
    for opt in ("grid", "name", "baseline", "reference_arm"):
        if getattr(args, opt):
            argv += [f"--{opt.replace('_', '-')}", getattr(args, opt)]
    opts = ReportOptions(baseline=args.baseline, reference_arm=args.reference_arm, samples=args.bootstrap_samples,
                         figures=args.figures, examples=args.examples, max_figure_words=args.max_figure_words,
                         max_figure_tokens=args.max_figure_tokens,
                         command="scanmt " + shlex.join(argv))
    files = write_reports(args.dir.resolve(), args.out, grid=args.grid, name=args.name, opts=opts)
    for f in files:
        print(f"wrote {f}")
    return 0


# --------------------------------------------------------------------------- status


def _status(args: argparse.Namespace) -> int:
    from scanmt.experiments.status import folder_status, render

    out = args.dir.resolve()
    print(render(out, folder_status(out, args.grid), brief=args.brief))
    return 0


# --------------------------------------------------------------------------- archive, restore


def _archive(args: argparse.Namespace) -> int:
    from scanmt.experiments.archive import pack

    t0 = time.time()
    s = pack(args.dir, args.to)
    shared = s.shared.replace("same", "already archived, unchanged", 1) if s.shared.startswith("same") else s.shared
    print(f"archive {args.to}: shared work {shared}; runs added {len(s.added)}, packed again {len(s.updated)}, "
          f"unchanged {len(s.kept)}; {len(s.unfinished)} unfinished left out ({time.time() - t0:.0f} s)")
    for what, keys in (("added", s.added), ("packed again", s.updated), ("unfinished", s.unfinished)):
        if keys:
            print(f"  {what}: {', '.join(keys)}")
    return 0


def _restore(args: argparse.Namespace) -> int:
    from scanmt.experiments.archive import restore

    out = args.out.resolve()
    s = restore(args.archive, out)
    print(f"restore {args.archive} -> {out}: shared work {s.shared}; runs restored {len(s.added)}, "
          f"already there {len(s.kept)}")
    if s.added:
        print(f"  restored: {', '.join(s.added)}")
    return 0
