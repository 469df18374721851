"""``scanmt fertility``: compute and cache source-token fertilities of a prepared data directory.

Writes ``DIR/fertility/{split}.{strategy}-{tag}.fert`` (one line per sentence,
one number per source subword; see :mod:`scanmt.data.fertility`) and prints a
summary.  ``guided`` and ``actual`` need the subword alignments written by
``scanmt align --data DIR`` (``DIR/align/{split}.subword.align``).  Cached files
are reused when the parameters and inputs have not changed.  The ``predicted``
strategy is computed by the fertility predictor, not by this command.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from scanmt.data.fertility import BUILTIN, compute_fertility, fertility_stats, format_value
from scanmt.data.prepare import read_meta
from scanmt.errors import ConfigError

NAME = "fertility"
HELP = "compute and cache fertilities (constant, guided, actual) for the splits of a prepared directory"
DESCRIPTION = __doc__


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=Path, required=True, help="prepared data directory")
    p.add_argument("--strategy", required=True, choices=BUILTIN + ("predicted",))
    p.add_argument("--value", type=float, help="the fertility of every token (constant only)")
    p.add_argument("--splits", nargs="+", help="splits to compute [all in meta.json]")
    p.add_argument("--align-dir", type=Path, help="where `scanmt align` wrote its links [DIR/align]")
    p.add_argument("--force", action="store_true", help="recompute even if cached")


def run(args: argparse.Namespace) -> int:
    if args.strategy == "predicted":
        raise ConfigError(
            "fertility strategy 'predicted' comes from a trained fertility predictor; "
            "train the predictor first (its fertilities are cached by the training pipeline)"
        )
    if args.strategy == "constant" and args.value is None:
        raise ConfigError("--strategy constant needs --value F (e.g. --value 2)")
    if args.strategy != "constant" and args.value is not None:
        raise ConfigError(f"--value is only for --strategy constant, not {args.strategy}")
    meta = read_meta(args.data)
    splits = args.splits or meta.get("splits") or ["train", "valid", "test"]
    label = f"{args.strategy}" + (f" {format_value(args.value)}" if args.value is not None else "")
    print(f"scanmt fertility: {label} on {args.data} ({meta['src_lang']} subwords)")
    print(f"  {'split':<8} {'sents':>7} {'tokens':>8} {'mean':>6} {'max':>5} {'=1':>6}  file")
    for split in splits:
        res = compute_fertility(
            args.data, split, args.strategy, value=args.value, align_dir=args.align_dir, force=args.force
        )
        st = fertility_stats(res.values)
        note = " (cached)" if res.reused else ""
        print(
            f"  {split:<8} {st['sentences']:>7} {st['tokens']:>8} {st['mean']:>6.2f} {format_value(st['max']):>5} "
            f"{100 * st['share_1']:>5.1f}%  {res.path}{note}"
        )
    return 0
