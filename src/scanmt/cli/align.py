"""``scanmt align``: eflomal word alignment of prepared data, of new pairs, and AER on a gold set.

The three modes (train, apply, gold evaluation) are described in :mod:`scanmt.api.align`;
this module parses the options and prints the summaries.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from scanmt.api.align import AlignApplyResult, AlignRequest, align_mode, apply_aligner
from scanmt.api.align_gold import GoldResult, evaluate_gold, read_gold
from scanmt.api.align_train import AlignTrainResult, train_aligner
from scanmt.api.requests import request_from_namespace
from scanmt.data.align import AlignerSettings
from scanmt.data.symmetrize import METHODS

NAME = "align"
HELP = "word-align prepared data with eflomal (subword/word level), align new pairs, or measure AER"
DESCRIPTION = """\
Word alignment with eflomal (both directions, symmetrized).

  train: scanmt align --data DIR [--level subword|word|both] [--out ALIGN_DIR]
         learns aligners on DIR's train split; writes ALIGN_DIR/{split}.{level}.align
         (Pharaoh, 0-based) for every split and the aligners in ALIGN_DIR/{level}/
  apply: scanmt align --model ALIGN_DIR [--level L] --src F --tgt F --out F
         aligns new tokenized pairs with the saved priors
  gold:  scanmt align --eval-gold GOLD_DIR --data DIR
         adds the gold sentences to DIR's training text and reports AER
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=Path, help="prepared data directory (train and eval-gold modes)")
    p.add_argument(
        "--level",
        choices=("subword", "word", "both"),
        default=None,
        help="train: which level(s) to align [both]; apply: which model under ALIGN_DIR [subword]; "
        "eval-gold: align words directly, or subwords then project to words [word]",
    )
    p.add_argument("--out", type=Path, help="train: ALIGN_DIR [DIR/align]; apply: links file; eval-gold: JSON report")
    p.add_argument("--splits", nargs="+", help="train: splits to write links for [all in meta.json]")
    p.add_argument("--force", action="store_true", help="train: retrain even if a matching aligner exists")
    p.add_argument("--model", type=Path, help="apply: ALIGN_DIR (or ALIGN_DIR/LEVEL) of a trained aligner")
    p.add_argument("--src", type=Path, help="apply: tokenized source file")
    p.add_argument("--tgt", type=Path, help="apply: tokenized target file")
    p.add_argument("--eval-gold", type=Path, metavar="GOLD_DIR", help="measure AER on GOLD_DIR (test.de/en/talp)")
    g = p.add_argument_group("eflomal")
    d = AlignerSettings()
    g.add_argument("--symmetrization", choices=METHODS, default=d.symmetrization,
                   help="how the forward and reverse alignments are merged into one set of links")
    g.add_argument("--eflomal-model", type=int, choices=(1, 2, 3), default=d.model, help="1 IBM1, 2 +HMM, 3 +fertility")
    g.add_argument("--samplers", type=int, default=d.n_samplers, help="independent Gibbs samplers")
    g.add_argument("--rel-iterations", type=float, default=d.rel_iterations, help="iterations relative to default")
    g.add_argument("--null-prior", type=float, default=d.null_prior,
                   help="eflomal's prior probability of aligning a word to NULL (unaligned)")


def request_from_args(args: argparse.Namespace) -> AlignRequest:
    return request_from_namespace(AlignRequest, args)


def run(args: argparse.Namespace) -> int:
    request = request_from_args(args)
    mode = align_mode(request)
    if mode == "eval-gold":
        task = read_gold(request)
        print(f"scanmt align --eval-gold: {task.n_train} training pairs from {task.data} + {task.n_gold} gold pairs, "
              f"{task.level} level, eflomal model {task.settings.model}", flush=True)
        print_gold(evaluate_gold(task), request.out)
    elif mode == "apply":
        print_apply(apply_aligner(request))
    else:
        print_train(train_aligner(request))
    return 0


def _print_stats(title: str, stats: dict) -> None:
    print(
        f"  {title:<22} {stats['pairs']:>7} pairs  {stats['links_per_src_token']:.2f} links/src token  "
        f"unaligned: src {100 * stats['src_unaligned']:.1f}%  tgt {100 * stats['tgt_unaligned']:.1f}%"
    )


def print_train(r: AlignTrainResult) -> None:
    print(f"scanmt align: {r.src_lang}-{r.tgt_lang}, {r.symmetrization}, {r.seconds:.0f} s; output in {r.out}")
    for level, per_split in r.stats.items():
        print(f" {level} level (model: {r.out / level})")
        for split, st in per_split.items():
            _print_stats(f"{split}.{level}.align", st)


def print_apply(r: AlignApplyResult) -> None:
    print(f"scanmt align: aligned {r.pairs} pairs with {r.model_dir} ({r.symmetrization}) -> {r.out}")
    _print_stats(r.out.name, r.stats)


def print_gold(r: GoldResult, out: Path | None) -> None:
    """The AER table; the JSON report to ``out`` when given."""
    print(f"  {'alignment':<22} {'AER':>6} {'prec':>6} {'recall':>6}")
    for name, x in r.results.items():
        mark = "  <- used" if name == r.task.settings.symmetrization else ""
        print(f"  {name:<22} {x['aer']:6.2f} {100 * x['precision']:6.2f} {100 * x['recall']:6.2f}{mark}")
    gold = r.task.gold
    print(f"  eflomal time {r.seconds:.0f} s; gold: {sum(len(s) for s, _ in gold)} sure, "
          f"{sum(len(p) for _, p in gold)} possible links (1-indexed talp, shifted to 0-based); AER in %")
    if out:
        r.write_json(out)
