"""``scanmt experiment``: run a grid of systems x seeds (``run``), write its report (``report``), and keep its
finished runs across machines (``archive``, ``restore``)."""

from __future__ import annotations

import argparse

from scanmt import experiments
from scanmt.cli import non_negative_int, positive_int

NAME = "experiment"
HELP = "run a grid of systems x seeds end to end (resumable) and report it like the paper's tables"
DESCRIPTION = """Reproduce the paper's tables: one command runs every system of a grid file for N seeds,
another writes the Markdown report.

  scanmt experiment run experiments/table1.yaml --data multi30k --pair de-en --preset cpu-small --seeds 3 --out runs/table1
  scanmt experiment run experiments/table1.yaml ... --set train.max_minutes=6 --workers 2
  scanmt experiment run experiments/table1.yaml ... --dry-run          # check the grid and print the plan
  scanmt experiment report runs/table1 --out docs/       # docs/experiments-table1.md and .json
  scanmt experiment report runs/kftt --grid kftt kftt-transformer --name experiments-kftt --out docs/  # one of two grids
  scanmt experiment status runs/table1                   # each run: done, training, decoding, stopped; time left
  scanmt experiment archive runs/table1 --to archive/table1   # finished runs, no checkpoints (for git)
  scanmt experiment restore archive/table1 --out runs/table1  # on a new machine, before `run`
  scanmt experiment trim archive/table1       # leave out the attention no report draws (an older archive)

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
missing runs, with the same fertilities, and `report` reads them all. Where the alignments are too large for
git (KFTT's), `archive --runs-only` leaves them out: `restore` prepares the data and marks each run with the
alignments and predictor it trained on, `run` aligns afresh, and the report lists those runs."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    fmt = p.formatter_class  # (the command line's help formatter, set by scanmt.cli.main)
    sub = p.add_subparsers(dest="action", metavar="ACTION")
    sub.required = True
    r = sub.add_parser("run", help="run (or continue) every system x seed of a grid file", formatter_class=fmt,
                       description="Run a grid: shared steps once, then each system x seed in its own folder.")
    r.add_argument("grid", type=str, help="grid YAML file (experiments/table1.yaml, table2.yaml, tiny.yaml)")
    r.add_argument("--out", type=str, required=True, help="experiment directory (shared/, runs/, grids/)")
    r.add_argument("--data", default="multi30k", help="a corpus, 'multi30k' or 'kftt' (prepared under "
                   "OUT/shared/data), or an already prepared data directory (scanmt prepare)")
    r.add_argument("--pair", default=None, help="language pair SRC-TGT [de-en for multi30k, ja-en for kftt; a "
                   "prepared --data's own]")
    r.add_argument("--mirror", help="local directory with the corpus's {split}.{lang}.gz files (multi30k, kftt)")
    r.add_argument("--vocab-size", type=int, default=None, help="joint subword vocabulary when preparing a corpus "
                   "[8000 for multi30k, 16000 for kftt]")
    r.add_argument("--preset", default="cpu-small", help="config preset name or YAML path every system starts from")
    r.add_argument("--seeds", type=int, default=1, help="seeds 1..N per system")
    r.add_argument("--first-seed", type=int, default=1, metavar="K",
                   help="run seeds K..N only (--seeds N): e.g. the seed whose model a reuse_model system decodes "
                   "where the lower seeds were restored from an archive, which keeps no checkpoint")
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
    _add_report_arguments(sub, fmt)
    _add_status_arguments(sub, fmt)
    _add_archive_arguments(sub, fmt)


def _add_report_arguments(sub: "argparse._SubParsersAction", fmt: type[argparse.HelpFormatter]) -> None:
    q = sub.add_parser("report", help="write a grid's results as Markdown (Table 1/2, Figure 2, Appendix B analogues)",
                       formatter_class=fmt, description="Write DOCS/experiments-GRID.md (+ attention map PNGs) and "
                       "DOCS/experiments-GRID.json (per system: mean and std of BLEU, REP, DROP, METEOR; seeds; "
                       "drop_noise, DROP's spread split between the aligner and the model).")
    q.add_argument("dir", type=str, help="experiment directory of `scanmt experiment run --out`")
    q.add_argument("--out", type=str, default="docs", help="directory for the Markdown and JSON files and figures")
    q.add_argument("--grid", nargs="+", metavar="NAME", help="report only these grids of DIR, each in its own "
                   "report, or, with --name, all in one [every grid recorded there]")
    q.add_argument("--name", help="file name stem [experiments-GRID]; with several --grid, one report of them all: "
                   "NAME.md with each grid's page in turn, NAME.json with every grid's systems (the grids need "
                   "distinct system names and one test set), their figures in NAME/ named by grid")
    q.add_argument("--baseline", help="system that every other system is compared with (seed by seed in the "
                   "Δ BLEU (p) column; in the DROP noise section and the stress test's paired tests), instead of "
                   "the grid's baseline and each system's own `baseline:` [as the grid file says]")
    q.add_argument("--reference-arm", help="in an ablation, the system whose REP and DROP differences from its "
                   "baseline each arm's (a system with a baseline of its own) are set against, in a difference in "
                   "differences over the stress test's inputs [the grid's `reference_arm:`; none: no such table]")
    q.add_argument("--bootstrap-samples", type=positive_int, default=1000, help="paired bootstrap resamples")
    q.add_argument("--figures", type=non_negative_int, default=2,
                   help="attention-map figures (Figure 2 analogue): test sentences where the baseline repeats words")
    q.add_argument("--examples", type=non_negative_int, default=5, help="translation examples (Appendix B analogue)")
    q.add_argument("--min-figure-words", type=non_negative_int, default=0,
                   help="shortest source (words, by the source language's tokenizer) for figures: e.g. 30 to "
                   "show long sentences, where coverage mistakes grow")
    q.add_argument("--max-figure-words", type=positive_int, default=25,
                   help="longest source (words, by the source language's tokenizer) for figures and examples")
    q.add_argument("--max-figure-tokens", type=positive_int, default=30, help="longest source (subwords) for figures")
    q.add_argument("--max-figure-output-words", type=positive_int, default=40,
                   help="longest output (tokenized words) of either system for figures")


def _add_status_arguments(sub: "argparse._SubParsersAction", fmt: type[argparse.HelpFormatter]) -> None:
    st = sub.add_parser("status", formatter_class=fmt, help="where a grid stands: each run done, training, "
                        "decoding, stopped or not started, and the time left",
                        description="Read an experiment folder, without writing or locking anything, and show for "
                        "each run of each grid recorded there: its scores when done; the update it has logged, "
                        "against the updates its system's finished runs took, and its validation BLEU beside its "
                        "baseline's (the same seed) at that update, when training; the step it is in "
                        "when decoding; what a rerun picks up, with the last line of its log, when stopped (killed, "
                        "failed or deferred by --deadline). Times left are estimated from the folder's finished "
                        "runs, as `run --deadline` estimates them.")
    st.add_argument("dir", type=str, help="experiment directory of `scanmt experiment run --out`")
    st.add_argument("--grid", nargs="+", metavar="NAME", help="only these grids of DIR [every grid recorded there]")
    st.add_argument("--brief", action="store_true", help="leave the finished runs out of the tables")


def _add_archive_arguments(sub: "argparse._SubParsersAction", fmt: type[argparse.HelpFormatter]) -> None:
    tol = experiments.PREDICTOR_TOLERANCE
    a = sub.add_parser("archive", formatter_class=fmt,
                       help="pack a grid's finished runs (no checkpoints) and shared work (or runs only) into a "
                       "folder for git",
                       description="Add the finished runs of an experiment folder to an archive folder: each run "
                       "without its checkpoints, the shared alignments once (not the fertility predictor: restore "
                       "retrains it), the grid records, and a manifest of digests. Of the attention files, only "
                       "seed 1's of the main split travels, and only for the systems of the grids' figure pairs "
                       "(every system's for a grid that names none). No corpus text is packed: a "
                       "corpus the grid prepared (--data kftt), the joined stress inputs and the attention files' "
                       "source tokens are recorded by digest and made again by restore. Rerun it as runs finish: "
                       "unchanged runs are kept, "
                       "changed ones (a new split, a stress test) packed again. An archive with its shared work is "
                       "refused when the folder's shared work differs from the archive's (its runs would not be "
                       "comparable): other alignments, or a "
                       f"fertility predictor whose expected fertilities on the valid split differ by more than {tol:g} "
                       "from the archived one's (retrained on another processor, its weights differ in the last "
                       "bits only, which is accepted).")
    a.add_argument("dir", type=str, help="experiment directory of `scanmt experiment run --out`")
    a.add_argument("--to", type=str, required=True, help="archive folder (made if missing; e.g. archive/table1)")
    a.add_argument("--runs-only", action="store_true",
                   help="make a new archive of runs only: no shared work (the alignments, 20 MB packed for KFTT, are "
                   "data), its identity and data recorded instead, and each run's shared work. Restore prepares "
                   "the data again and puts the runs back, each with a record of the shared work it trained on "
                   "(RUN/shared-origin.json); `experiment run` aligns afresh for the missing runs, and the report "
                   "lists the runs trained on other shared work. Other alignments are then accepted (not the "
                   "data). An existing archive keeps its kind [an archive with its shared work]")
    window = ("Give the report's values: the archive then keeps the attention of only the test sentences the "
              "report's maps may draw, as `experiment report` counts them (a dense attention file is megabytes). "
              "The archive records the window and later packs keep it; another window packs again the runs whose "
              "attention it keeps. A restored file holds the other sentences' source tokens but not their "
              "attention, and says so when asked for it. [every sentence's attention, or the archive's recorded "
              "window]")
    a.add_argument("--min-figure-words", type=non_negative_int, default=None, metavar="N",
                   help=f"keep the attention of sources of at least N words only. {window}")
    a.add_argument("--max-figure-words", type=non_negative_int, default=None, metavar="N",
                   help="keep the attention of sources of at most N words only (as --min-figure-words)")
    a.add_argument("--max-figure-tokens", type=non_negative_int, default=None, metavar="N",
                   help="keep the attention of sources of at most N subwords only, the sink included (as "
                   "--min-figure-words)")
    b = sub.add_parser("restore", formatter_class=fmt,
                       help="unpack an archive of `experiment archive` into its experiment folder",
                       description="Unpack an archive into the experiment folder it was packed from (runs record "
                       "absolute paths), after checking that the prepared data they read is there and unchanged. "
                       "A corpus the grid prepared itself is prepared again (as `scanmt prepare` would, from "
                       "../shared/data or --mirror) and each file checked against its digest; the runs' copies of "
                       "the test set are made again from it. "
                       "The fertility predictor is retrained from the archived alignments (about a minute) and must "
                       f"give the archived fertilities on the valid split (within {tol:g}). Finished runs already "
                       "there are kept; then `experiment run` trains only what is missing. An archive of runs only "
                       "(`archive --runs-only`) restores no shared work: the data is prepared, the runs unpacked, "
                       "each with a record of the shared work it trained on, and `experiment run` aligns afresh.")
    b.add_argument("archive", type=str, help="archive folder of `scanmt experiment archive`")
    b.add_argument("--out", type=str, required=True, help="the experiment directory (the one it was packed from)")
    b.add_argument("--mirror", type=str, default=None, metavar="DIR",
                   help="where the corpus is, when the archive's grid prepared it itself and it is not in the place "
                   "`scanmt prepare` looks (../shared/data) [as the grid did]")
    t = sub.add_parser("trim", formatter_class=fmt,
                       help="leave out of an archive, in place, the attention files no report of its grids draws",
                       description="Write again, without them, the run tarballs of an archive that hold attention "
                       "files no report of its grids draws (all but seed 1's of the main split of the systems of "
                       "the grids' figure pairs, which `archive` leaves out of what it packs; an archive packed "
                       "before it did carries a dense file of a megabyte or more per system). The run folders are not "
                       "needed. Every other member stays as it was, the runs' metrics and their digests too, and "
                       "the archive is replaced as a whole, as a pack replaces it. A figure window (`archive "
                       "--max-figure-words`) needs the corpus and the run folders: pack again for one.")
    t.add_argument("archive", type=str, help="archive folder of `scanmt experiment archive`")
    t.add_argument("--dry-run", action="store_true", help="list the runs and files it would leave out, write nothing")


def run(args: argparse.Namespace) -> int:
    if args.action == "run":
        return experiments.run_grid(experiments.GridRunOptions.from_args(args))
    if args.action == "archive":
        limits = (args.min_figure_words, args.max_figure_words, args.max_figure_tokens)
        window = None if limits == (None, None, None) else experiments.FigureWindow(
            args.min_figure_words or 0, args.max_figure_words, args.max_figure_tokens)
        return experiments.archive_command(args.dir, args.to, runs_only=args.runs_only, window=window)
    if args.action == "restore":
        return experiments.restore_command(args.archive, args.out, mirror=args.mirror)
    if args.action == "trim":
        return experiments.trim_command(args.archive, dry_run=args.dry_run)
    if args.action == "status":
        return experiments.status_command(args.dir, args.grid, brief=args.brief)
    return experiments.report_command(
        args.dir, args.out, grid=args.grid, name=args.name, baseline=args.baseline, reference_arm=args.reference_arm,
        samples=args.bootstrap_samples, figures=args.figures, examples=args.examples,
        min_figure_words=args.min_figure_words, max_figure_words=args.max_figure_words,
        max_figure_tokens=args.max_figure_tokens, max_figure_output_words=args.max_figure_output_words)
