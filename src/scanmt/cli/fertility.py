"""``scanmt fertility``: compute and cache source-token fertilities of a prepared data directory.

Writes ``DIR/fertility/{split}.{strategy}-{tag}.fert`` (one line per sentence,
one number per source subword; see :mod:`scanmt.data.fertility`) and prints a
summary.  ``guided`` and ``actual`` need the subword alignments written by
``scanmt align --data DIR`` (``DIR/align/{split}.subword.align``).  Cached files
are reused when the parameters and inputs have not changed.

The ``predicted`` strategy needs a trained predictor (a BiLSTM tagger over the
aligner's fertilities, of subwords or, with ``--set level=word``, of words)::

    scanmt fertility --data DIR --train-predictor runs/fertility-predictor
    scanmt fertility --data DIR --strategy predicted --predictor runs/fertility-predictor/best.pt --add 1
    scanmt fertility --data DIR --eval-predictor runs/fertility-predictor/best.pt   # accuracy, MAE, baseline
"""

from __future__ import annotations

import argparse
from pathlib import Path

from scanmt.data.fertility import fertility_stats, format_value
from scanmt.fertility.compute import BUILTIN, compute_fertility
from scanmt.data.prepare import read_meta
from scanmt.errors import ConfigError

NAME = "fertility"
HELP = "compute and cache fertilities (constant, guided, actual) for the splits of a prepared directory"
DESCRIPTION = """\
Compute and cache source-token fertilities of a prepared data directory.

Writes DIR/fertility/{split}.{strategy}-{tag}.fert (one line per sentence, one number per
source subword) and prints a summary. guided and actual need the subword alignments written by
`scanmt align --data DIR`. Cached files are reused when the parameters and inputs are unchanged.

  scanmt fertility --data DIR --strategy guided
  scanmt fertility --data DIR --train-predictor runs/fertility-predictor
  scanmt fertility --data DIR --strategy predicted --predictor runs/fertility-predictor/best.pt --add 1
  scanmt fertility --data DIR --train-predictor runs/fert-word --set level=word   # word-level targets
  scanmt fertility --data DIR --eval-predictor runs/fertility-predictor/best.pt [--splits valid]
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=Path, required=True, help="prepared data directory")
    p.add_argument("--strategy", choices=BUILTIN + ("predicted",), help="the fertility strategy to compute")
    p.add_argument("--value", type=float, help="the fertility of every token (constant only)")
    p.add_argument("--predictor", type=Path, help="predictor checkpoint (predicted only)")
    p.add_argument("--add", type=float, default=1.0, help="added to the expected predicted fertility (predicted and --eval-predictor)")
    p.add_argument("--train-predictor", type=Path, metavar="OUT",
                   help="train the fertility predictor into OUT (uses DIR/align or --align-dir) and exit")
    p.add_argument("--set", action="extend", nargs="+", default=[], metavar="KEY=VALUE",
                   help="predictor config override, e.g. --set train.epochs=5 model.hidden_size=256 level=word")
    p.add_argument("--eval-predictor", type=Path, metavar="CKPT",
                   help="score a predictor on --splits [valid]: accuracy and MAE against the majority class, class "
                        "distributions, the bounds (+ --add); and exit")
    p.add_argument("--json", type=Path, metavar="FILE", help="with --eval-predictor: also write the numbers as JSON")
    p.add_argument("--resume", action="store_true", help="continue a killed --train-predictor run")
    p.add_argument("--splits", nargs="+", help="splits to compute [all in meta.json; --eval-predictor: valid]")
    p.add_argument("--align-dir", type=Path, help="where `scanmt align` wrote its links [DIR/align]")
    p.add_argument("--force", action="store_true", help="recompute even if cached")


def _train_predictor(args: argparse.Namespace) -> int:
    from scanmt.config import PredictorConfig, apply_overrides, set_error
    from scanmt.training.fertility_trainer import train_predictor

    meta = read_meta(args.data)
    raw: dict = {"data": {"dir": str(args.data), "src_lang": meta["src_lang"], "tgt_lang": meta["tgt_lang"]}}
    if args.align_dir:
        raw["align_dir"] = str(args.align_dir)
    apply_overrides(raw, args.set)
    try:
        cfg = PredictorConfig.from_dict(raw)
    except ConfigError as exc:
        raise set_error(exc, args.set) from None
    res = train_predictor(cfg, args.train_predictor, resume=args.resume)
    best = max(res.progress.history, key=lambda h: h["valid/accuracy"])
    print(f"\nfertility predictor summary ({args.train_predictor})")
    print(f"  stopped:         {res.stop_reason}")
    print(f"  steps:           {res.progress.step}, {res.progress.elapsed / 60:.1f} min")
    print(f"  best validation: accuracy {best['valid/accuracy']:.2f}%, MAE {best['valid/mae']:.3f} (step {best['step']})")
    print(f"  checkpoint:      {res.checkpoint}")
    return 0


def _predicted_kwargs(args: argparse.Namespace) -> dict:
    from scanmt.data.fertility import file_digest
    from scanmt.fertility.compute import require_predictor
    from scanmt.fertility.providers import PredictedFertility
    from scanmt.model.checkpoint import Checkpoint

    path = require_predictor(args.predictor, key="--predictor")
    provider = PredictedFertility.from_weights(Checkpoint.load(path).predictor_weights(), args.add)
    return {"predictor": provider.apply, "predictor_id": f"{file_digest(path)[:16]}-add{args.add:g}"}


def _eval_predictor(args: argparse.Namespace) -> int:
    import json

    from scanmt.fertility.compute import require_predictor
    from scanmt.io import atomic_open
    from scanmt.training.fertility_eval import evaluate_predictor, format_eval

    path = require_predictor(args.eval_predictor, key="--eval-predictor")
    results = []
    for split in args.splits or ["valid"]:
        r = evaluate_predictor(path, args.data, split=split, add=args.add, align_dir=args.align_dir)
        print(format_eval(r))
        results.append(r.as_dict())
    if args.json:
        with atomic_open(args.json) as fh:
            json.dump({"predictor": str(path), "results": results}, fh, indent=2)
            fh.write("\n")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.train_predictor and args.eval_predictor:
        raise ConfigError("give either --train-predictor or --eval-predictor, not both")
    if args.train_predictor:
        return _train_predictor(args)
    if args.eval_predictor:
        return _eval_predictor(args)
    if args.json:
        raise ConfigError("--json is only for --eval-predictor")
    if args.strategy is None:
        raise ConfigError("give --strategy (constant, guided, actual, predicted) or --train-predictor OUT")
    extra = _predicted_kwargs(args) if args.strategy == "predicted" else {}
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
            args.data, split, args.strategy, value=args.value, align_dir=args.align_dir, force=args.force, **extra
        )
        st = fertility_stats(res.values)
        note = " (cached)" if res.reused else ""
        print(
            f"  {split:<8} {st['sentences']:>7} {st['tokens']:>8} {st['mean']:>6.2f} {format_value(st['max']):>5} "
            f"{100 * st['share_1']:>5.1f}%  {res.path}{note}"
        )
    return 0
