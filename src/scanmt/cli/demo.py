"""``scanmt demo``: the point of the toolkit in one command: softmax against csparsemax on Multi30k.

Two systems of the ``cpu-small`` preset are trained side by side (one process and
one thread each) for the same number of updates, so that the result depends on
the update budget and not on how busy the machine is; then both translate
test_2016_flickr and are scored with BLEU, REP (repetitions) and DROP (dropped
source words), and one attention map shows both systems on the same sentence.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import multiprocessing as mp
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from scanmt.cli import positive_int

NAME = "demo"
HELP = "train softmax and csparsemax attention side by side on Multi30k and compare BLEU, REP, DROP and attention"
DESCRIPTION = """The whole pipeline in one command (about 12 minutes on an idle 2-core CPU):

  1. prepare Multi30k (tokenize, joint BPE) into OUT/data
  2. word-align the training data (eflomal) into OUT/data/align, for the DROP score
  3. train SYSTEMS (default: softmax and csparsemax with constant fertility 2 and exhaustion 0.2) for
     --updates updates each, in parallel (one process and one thread each; bf16 where the CPU measures it faster),
     into OUT/SYSTEM/ (rerunning resumes or reuses them)
  4. translate test_2016_flickr with beam search into OUT/SYSTEM/test.hyp.TGT (+ attention .npz)
  5. score BLEU, REP and DROP; draw one attention map of both systems (OUT/attention.png);
     print a summary"""

#: the systems the demo can train: name -> config overrides on top of the preset
SYSTEMS: dict[str, list[str]] = {
    "softmax": ["model.attention.transform=softmax"],
    "sparsemax": ["model.attention.transform=sparsemax"],
    "csoftmax": ["model.attention.transform=csoftmax", "model.attention.fertility.strategy=constant",
                 "model.attention.fertility.value=2", "model.attention.exhaustion=0.2"],
    "csparsemax": ["model.attention.transform=csparsemax", "model.attention.fertility.strategy=constant",
                   "model.attention.fertility.value=2", "model.attention.exhaustion=0.2"],
}

#: test BLEU that the default demo (cpu-small, 1,000 updates, De->En, seed 1) reached on an idle 2-core CPU: the
#: lower of its two systems (docs/results.md, section 1, "The demo"); a system more than EXPECTED_MARGIN below
#: it is flagged in the summary (a different seed moves BLEU by about a point)
EXPECTED_BLEU = 34.1
EXPECTED_MARGIN = 3.0
#: 1,000 updates of two cpu-small systems side by side took 9.0 minutes on an idle 2-core CPU (0.54 s per update
#: each, bf16, one thread; 0.63 s in another measurement), and the whole demo 10.4 minutes (the target is under 15)
DEFAULT_UPDATES = 1000


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default="runs/demo", help="output directory for everything the demo makes")
    p.add_argument("--pair", default="de-en", help="Multi30k language pair (de-en, fr-en, cs-en, ...)")
    p.add_argument("--mirror", help="local directory with Multi30k's {split}.{lang}.gz (else ../shared/data/multi30k, "
                   "then download)")
    p.add_argument("--vocab-size", type=int, default=8000, help="joint BPE vocabulary size when preparing the data")
    p.add_argument("--preset", default="cpu-small", help="config preset name or YAML path")
    p.add_argument("--systems", nargs="+", default=["softmax", "csparsemax"], choices=sorted(SYSTEMS),
                   help="attention transforms to train and compare")
    p.add_argument("--updates", type=positive_int, default=DEFAULT_UPDATES,
                   help="training updates per system (the budget; the same on any machine)")
    p.add_argument("--minutes", type=float, default=0.0,
                   help="optional wall-clock cap per system in minutes (0 = none; a capped run gets fewer updates "
                        "and the summary says so)")
    p.add_argument("--precision", choices=("auto", "fp32", "bf16"), default="auto",
                   help="training precision; auto = bf16 where this CPU's bf16 training steps measure at least "
                        "1.25x faster than fp32 (timed once at start, under a second; the trainers take the "
                        "same measurement), else fp32: the avx512_bf16 flag alone does not say (one Intel Xeon "
                        "with it ran bf16 at half the fp32 rate)")
    p.add_argument("--beam", type=positive_int, default=5, help="beam size for the test set")
    p.add_argument("--samples", type=int, default=3, help="sample translations to print")
    p.add_argument("--set", action="extend", nargs="+", default=[], metavar="KEY=VALUE",
                   help="extra config overrides for every system, e.g. --set train.seed=2")


def training_precision(asked: str) -> tuple[str, str]:
    """``(train.precision, why)`` for ``--precision``: ``auto`` and ``bf16`` measure this CPU at one thread, as
    the systems train (:func:`scanmt.training.precision.cpu_bf16_speedup`), once: the trainers it starts
    inherit the measurement for their warning, so all of them say the same; ``why`` is for the summary line."""
    from scanmt.training.precision import PREFER_BF16, cpu_bf16_speedup

    if asked == "fp32":
        return asked, ""
    speedup = cpu_bf16_speedup(threads=1)
    precision = asked if asked != "auto" else "bf16" if speedup >= PREFER_BF16 else "fp32"
    how = "auto:" if asked == "auto" else "as asked;"
    return precision, f" ({how} bf16 training steps measure {speedup:.2f}x fp32's speed here)"


@dataclass
class SystemResult:
    name: str
    steps: int
    minutes: float
    stop_reason: str
    bleu: float
    rep: float
    drop: float
    support: float
    hyp_path: Path


def _train_worker(cfg_dict: dict, out: str, log_path: str, parent: int) -> None:
    """Child process: train one system with one thread, everything it prints going to ``log_path``.

    It runs in a process group of its own (:func:`scanmt.processes.stopped_by_parent`), so that a
    terminal's Ctrl-C reaches the demo alone, which stops each trainer with one SIGTERM.  It gets SIGTERM
    when the demo (``parent``) dies, even by ``kill -9``, and then stops after the current update with
    ``last.pt`` saved; it holds the lock of its run folder while it trains.  Interrupted, it exits with
    128 + the signal (130, 143) and no traceback; orphaned by a killed demo, it says on the terminal where
    it saved and how to continue.
    """
    import logging

    import torch

    from scanmt.config import Config
    from scanmt.model.checkpoint import last_saved
    from scanmt.processes import exit_status, lock_folder, stopped_by_parent
    from scanmt.training.trainer import Trainer

    stopped_by_parent(parent)
    torch.set_num_threads(1)
    # the folder locked first, so that the Trainer takes it as claimed although train.log is in it already
    with lock_folder(out, what="the demo's run folder"), open(log_path, "a", encoding="utf-8") as fh, \
            contextlib.redirect_stdout(fh), contextlib.redirect_stderr(fh):
        logging.basicConfig(stream=fh, level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", force=True)
        cfg = Config.from_dict(cfg_dict)
        trainer = Trainer(cfg, out, resume=(Path(out) / "last.pt").exists())
        try:
            trainer.train()
        except KeyboardInterrupt as exc:  # logged in train.log; the demo tells the user, unless it is gone
            if os.getppid() != parent:
                print(f"scanmt demo: {Path(out).name}: interrupted by the demo's end: {last_saved(out)}; "
                      f"{CONTINUE}", file=sys.__stderr__, flush=True)
            sys.exit(exit_status(exc))
        Path(out, "DONE").write_text(f"{cfg.train.max_steps}\n{trainer.stop_reason}\n", encoding="utf-8")


#: how to go on after an interrupted demo
CONTINUE = "run the same scanmt demo command again to continue (each system resumes from its last.pt)"


def _finished(run_dir: Path, updates: int) -> bool:
    """Whether ``run_dir`` holds a system the demo already trained with this budget of updates."""
    try:
        return int((run_dir / "DONE").read_text(encoding="utf-8").split("\n", 1)[0]) == updates
    except (OSError, ValueError):
        return False


def _logged_step(run_dir: Path) -> int:
    """The last step logged in ``run_dir/metrics.csv`` (0 if none yet)."""
    try:
        with (run_dir / "metrics.csv").open(encoding="utf-8") as fh:
            steps = [int(r["step"]) for r in csv.DictReader(fh)]
    except (OSError, ValueError, KeyError):
        return 0
    return max(steps, default=0)


def _train_all(configs: dict, out: Path, updates: int) -> None:
    """Train every system in its own process; one progress bar (with ETA) over all their updates.

    A system whose folder another process is training into (a demo killed before this fix left such
    trainers running) is refused before anything starts; the children die with this process.  Ctrl-C or
    SIGTERM stops every trainer after its current update with ``last.pt`` saved; then this prints where
    each system stands and how to continue, and raises KeyboardInterrupt (:class:`Interrupted` for SIGTERM).
    """
    from scanmt.errors import DataError
    from scanmt.processes import Interrupted, check_unlocked

    todo = [name for name in configs if not _finished(out / name, updates)]
    for name in todo:
        check_unlocked(out / name, what="the demo's run folder")
    ctx = mp.get_context("spawn")
    procs = {}
    try:
        for name in todo:
            run_dir = out / name
            (run_dir / "DONE").unlink(missing_ok=True)  # another budget: resume from last.pt
            run_dir.mkdir(parents=True, exist_ok=True)
            p = ctx.Process(target=_train_worker, args=(configs[name].to_dict(), str(run_dir),
                                                        str(run_dir / "train.log"), os.getpid()))
            p.start()
            procs[name] = p
        _watch(procs, configs, out, updates)
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM: the trainers save last.pt and stop
        _stop(procs)
        _tell_interrupted(procs, out)
        raise
    except BaseException:
        _stop(procs)
        raise
    failed = [n for n, p in procs.items() if p.exitcode not in (0, *INTERRUPTED)]
    if failed:
        raise DataError(f"training {', '.join(failed)} failed; see {', '.join(str(out / n / 'train.log') for n in failed)}")
    stopped = [p.exitcode for p in procs.values() if p.exitcode in INTERRUPTED]
    if stopped:  # a trainer signalled directly
        _tell_interrupted(procs, out)
        raise KeyboardInterrupt if stopped[0] == INTERRUPTED[0] else Interrupted(signal.SIGTERM)


#: the exit statuses of an interrupted trainer: Ctrl-C (130), SIGTERM (143)
INTERRUPTED = (128 + signal.SIGINT, 128 + signal.SIGTERM)


def _stop(procs: dict) -> None:
    """SIGTERM every trainer still running (each stops after its current update, saving ``last.pt``); wait."""
    for p in procs.values():
        p.terminate()
    for p in procs.values():
        p.join()


def _tell_interrupted(procs: dict, out: Path) -> None:
    """Where each interrupted system stands, and how to continue (on stderr, after the progress bar)."""
    from scanmt.model.checkpoint import last_saved

    stood = "; ".join(f"{n}: {last_saved(out / n)}" for n in procs)
    print(f"training interrupted ({stood}); {CONTINUE}", file=sys.stderr, flush=True)


def _done(configs: dict, out: Path, updates: int) -> int:
    """The updates all systems have logged (a finished system: its budget)."""
    return sum(updates if _finished(out / n, updates) else _logged_step(out / n) for n in configs)


def _watch(procs: dict, configs: dict, out: Path, updates: int) -> None:
    """One progress bar over the updates of all systems until their trainers end, with the ETA of
    :class:`_Speed`."""
    from tqdm import tqdm

    total = updates * len(configs)
    speed = _Speed(_done(configs, out, updates))
    with tqdm(total=total, initial=speed.start, desc="training", unit="upd", mininterval=0,
              bar_format=_BAR.format(eta="?")) as bar:
        while any(p.is_alive() for p in procs.values()):
            time.sleep(2.0)
            done = _done(configs, out, updates)
            speed.count(done, time.time())
            left = speed.seconds_left(total, time.time())
            bar.bar_format = _BAR.format(eta="?" if left is None else
                                         f"{tqdm.format_interval(left)}, {speed.rate():.2f}upd/s")
            if done > bar.n:
                bar.update(done - bar.n)
            else:
                bar.refresh()  # the elapsed time and the ETA
        bar.update(total - bar.n)


#: the demo's bar, with the ETA of :class:`_Speed`
_BAR = "{{l_bar}}{{bar}}| {{n_fmt}}/{{total_fmt}} [{{elapsed}}<{eta}]"


class _Speed:
    """The trainers' speed, for the demo's ETA: the updates logged since the first move of the count this run saw,
    over the time to the last move.  The trainers log their step every ``train.log_every`` updates, a jump of 50
    that tqdm's own rate took as made in the 2 s since its last look (an ETA 30x too short); the updates done
    before this run (a resumed one) and the trainers' start-up (imports, data, model) are not their speed.
    """

    def __init__(self, start: int) -> None:
        self.start = start
        self.first: tuple[int, float] | None = None
        self.last: tuple[int, float] | None = None

    def count(self, done: int, now: float) -> None:
        """The updates logged, ``done``, seen at ``now``."""
        if done > (self.last or (self.start, now))[0]:
            self.last = (done, now)
            self.first = self.first or self.last

    def rate(self) -> float | None:
        """Updates per second (None until the count has moved twice)."""
        if self.first is None or self.last is None or self.last[1] <= self.first[1]:
            return None
        return (self.last[0] - self.first[0]) / (self.last[1] - self.first[1])

    def seconds_left(self, total: int, now: float) -> float | None:
        """Seconds until ``total`` updates: those left at the last move at :meth:`rate`, less the time since."""
        rate = self.rate()
        if rate is None or self.last is None:
            return None
        return max(0.0, (total - self.last[0]) / rate - (now - self.last[1]))


def _quiet_main(argv: list[str], log_path: Path) -> None:
    """Run a scanmt command with its output appended to ``log_path``."""
    from scanmt.cli.main import main
    from scanmt.errors import DataError

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        code = main(argv)
    with log_path.open("a", encoding="utf-8") as fh:
        fh.write("$ scanmt " + " ".join(argv) + "\n" + buf.getvalue())
    if code != 0:
        raise DataError(f"scanmt {argv[0]} failed (exit {code}); see {log_path}")


def _evaluate(name: str, run_dir: Path, data_dir: Path, src: str, tgt: str, beam: int) -> SystemResult:
    from scanmt.model.checkpoint import Checkpoint

    log = run_dir / "demo.log"
    hyp, attn, scores = run_dir / f"test.hyp.{tgt}", run_dir / "test.attn.npz", run_dir / "test.eval.json"
    _quiet_main(["translate", "--model", str(run_dir / "best.pt"), "--input", str(data_dir / f"test.raw.{src}"),
                 "--output", str(hyp), "--beam", str(beam), "--attention-out", str(attn),
                 "--tokenized-out", str(run_dir / f"test.hyp.tok.{tgt}")], log)
    _quiet_main(["evaluate", "--hyp", str(hyp), "--ref", str(data_dir / f"test.raw.{tgt}"),
                 "--src", str(data_dir / f"test.raw.{src}"), "--src-lang", src, "--tgt-lang", tgt,
                 "--align-model", str(data_dir / "align"), "--attention", str(attn),
                 "--metrics", "bleu", "rep", "drop", "attn-stats", "--json", str(scores)], log)
    m = json.loads(scores.read_text(encoding="utf-8"))
    progress = Checkpoint.load(run_dir / "last.pt").progress
    done = run_dir / "DONE"
    stop = done.read_text(encoding="utf-8").split("\n", 1)[-1].strip() if done.exists() else ""
    return SystemResult(
        name=name, steps=int(progress["step"]), minutes=float(progress["elapsed"]) / 60, stop_reason=stop,
        bleu=float(m["bleu"]["score"]), rep=float(m["rep"]["score"]), drop=float(m["drop"]["score"]),
        support=float(m["attention_stats"]["mean_attended"]), hyp_path=hyp,
    )


def _figure_index(out: Path, names: list[str], src: str, data_dir: Path, tgt: str) -> int:
    """A short test sentence where the first system repeats a word more than the last one (else sentence 0)."""
    from scanmt.io import read_lines
    from scanmt.metrics.rep import rep_sentence

    refs = [r.split() for r in read_lines(data_dir / f"test.tok.{tgt}")]
    hyps = {n: [h.split() for h in read_lines(out / n / f"test.hyp.tok.{tgt}")] for n in names}
    first, last = names[0], names[-1]
    best, best_gap = 0, 0.0
    for i, ref in enumerate(refs):
        if not ref or len(ref) > 20:
            continue
        gap = rep_sentence(hyps[first][i], ref) - rep_sentence(hyps[last][i], ref)
        if gap > best_gap:
            best, best_gap = i, gap
    return best


def _print_summary(results: list[SystemResult], out: Path, figure: Path | None, updates: int, elapsed: float,
                   samples: list[tuple[str, str, dict[str, str]]], comparable: bool, preset: Path) -> None:
    """Samples, the table of systems, and a warning for a result below the default demo's (``comparable``:
    the default pair and preset with at least the default budget); where the prepared data is, and how to
    train on it with the systems' ``preset``."""
    print("\nsample translations (test_2016_flickr)")
    for source, ref, mts in samples:
        print(f"  SRC  {source}\n  REF  {ref}")
        for name, text in mts.items():
            print(f"  {name:<11s}{text}")
        print()
    print("demo summary (test_2016_flickr, sacreBLEU; REP and DROP: lower is better)")
    print(f"  {'system':<12s}{'updates':>8s}{'minutes':>9s}{'BLEU':>8s}{'REP':>8s}{'DROP':>8s}{'support':>9s}")
    for r in results:
        print(f"  {r.name:<12s}{r.steps:>8d}{r.minutes:>9.1f}{r.bleu:>8.2f}{r.rep:>8.2f}{r.drop:>8.2f}{r.support:>9.2f}")
    print("  (support: source tokens with non-zero attention per output step; DROP: one random eflomal alignment,\n"
          "   which moves it by about 0.1 - `scanmt evaluate --drop-samples 3` averages three)")
    for r in results:
        if r.steps < updates:
            print(f"  NOTE: {r.name} stopped after {r.steps} of {updates} updates ({r.stop_reason}); its numbers are "
                  "below what the full budget gives.")
        if comparable and r.steps >= updates and r.bleu < EXPECTED_BLEU - EXPECTED_MARGIN:
            print(f"  WARNING: {r.name} reached BLEU {r.bleu:.2f}, well below the {EXPECTED_BLEU:.1f} that this "
                  f"demo reaches with {DEFAULT_UPDATES} updates: check {out / r.name / 'train.log'} "
                  "(attention collapse warnings, diverging loss, a changed --set).")
    if figure is not None:
        print(f"  attention map: {figure}")
    print(f"  outputs:       {out}/SYSTEM/test.hyp.*, test.attn.npz, test.eval.json, train.log")
    print(f"  data:          {out / 'data'} (prepared and word-aligned): train more systems on it with "
          f"scanmt train --config {preset} --set data.dir={out / 'data'} --out DIR")
    print(f"  total time:    {elapsed / 60:.1f} min")


def run(args: argparse.Namespace) -> int:
    from scanmt.io import check_output_dir
    from scanmt.processes import lock_folder

    t_start = time.time()
    out = check_output_dir(args.out, ours=lambda d: (d / "data" / "meta.json").is_file(),
                           holds="an earlier demo (data/meta.json)")
    with lock_folder(out, what="--out"):  # a second demo into the same folder fails naming this one
        return _demo(args, out, t_start)


def _demo(args: argparse.Namespace, out: Path, t_start: float) -> int:
    """The five steps of the demo into ``out`` (checked and locked)."""
    from scanmt.api.prepare import multi30k_splits, parse_pair
    from scanmt.config import Config
    from scanmt.data.prepare import prepare
    from scanmt.io import read_lines
    from scanmt.presets import preset_path

    src, tgt = parse_pair(args.pair)
    data_dir = out / "data"
    print(f"[1/5] preparing Multi30k {src}->{tgt} in {data_dir}")
    prepare(multi30k_splits(src, tgt, args.mirror), src, tgt, data_dir, vocab_size=args.vocab_size)

    print(f"[2/5] word-aligning the training data (eflomal, for DROP) in {data_dir / 'align'}")
    _quiet_main(["align", "--data", str(data_dir), "--level", "word", "--splits", "train"], out / "demo.log")

    precision, chosen = training_precision(args.precision)
    configs = {}
    for name in args.systems:
        overrides = [
            f"data.dir={data_dir}", f"data.src_lang={src}", f"data.tgt_lang={tgt}", f"train.max_steps={args.updates}",
            f"train.max_minutes={args.minutes}", f"train.precision={precision}", "train.threads=1", *SYSTEMS[name],
            *args.set,
        ]
        configs[name] = Config.load(preset_path(args.preset), overrides)
    print(f"[3/5] training {', '.join(args.systems)} ({args.preset}, {args.updates} updates each, {precision}{chosen}, "
          f"in parallel) in {out}/SYSTEM (logs: {out}/SYSTEM/train.log)")
    _train_all(configs, out, args.updates)

    print(f"[4/5] translating test_2016_flickr (beam {args.beam}) and scoring BLEU, REP, DROP")
    results = [_evaluate(n, out / n, data_dir, src, tgt, args.beam) for n in args.systems]

    print("[5/5] drawing an attention map")
    figure = out / "attention.png"
    index = _figure_index(out, args.systems, src, data_dir, tgt)
    _quiet_main(["plot-attention", "--attention", *[str(out / n / "test.attn.npz") for n in args.systems],
                 "--names", *args.systems, "--index", str(index), "--out", str(figure)], out / "demo.log")

    sources, refs = read_lines(data_dir / f"test.raw.{src}"), read_lines(data_dir / f"test.raw.{tgt}")
    hyps = {r.name: read_lines(r.hyp_path) for r in results}
    picks = [index] + [i for i in range(args.samples) if i != index][: max(args.samples - 1, 0)]
    samples = [(sources[i], refs[i], {n: h[i] for n, h in hyps.items()}) for i in picks[: args.samples]]
    comparable = args.pair == "de-en" and args.preset == "cpu-small" and args.updates >= DEFAULT_UPDATES
    _print_summary(results, out, figure, args.updates, time.time() - t_start, samples, comparable,
                   preset_path(args.preset))
    return 0
