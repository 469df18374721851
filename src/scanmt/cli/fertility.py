"""``scanmt fertility``: compute and cache source-token fertilities of a prepared data directory.

The modes (compute a strategy, train or evaluate the predictor) are described in
:mod:`scanmt.fertility`; this module parses the options and prints the summaries::

    scanmt fertility --data DIR --train-predictor runs/fertility-predictor
    scanmt fertility --data DIR --strategy predicted --predictor runs/fertility-predictor/best.pt --add 1
    scanmt fertility --data DIR --eval-predictor runs/fertility-predictor/best.pt   # accuracy, MAE, baseline
"""

from __future__ import annotations

import argparse
from pathlib import Path

from scanmt.api.fertility import (
    FertilityRequest,
    PredictorTrainResult,
    compute_plan,
    compute_split,
    eval_splits,
    evaluate_predictor_split,
    fertility_mode,
    train_fertility_predictor,
    write_predictor_evals,
)
from scanmt.api.requests import request_from_namespace
from scanmt.data.fertility import format_value
from scanmt.fertility.strategies import COMPUTE_CHOICES

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
    p.add_argument("--strategy", choices=COMPUTE_CHOICES, help="the fertility strategy to compute")
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


def request_from_args(args: argparse.Namespace) -> FertilityRequest:
    return request_from_namespace(FertilityRequest, args)


def run(args: argparse.Namespace) -> int:
    request = request_from_args(args)
    mode = fertility_mode(request)
    if mode == "train-predictor":
        print_predictor(train_fertility_predictor(request))
    elif mode == "eval-predictor":
        _eval_predictor(request)
    else:
        _compute(request)
    return 0


def print_predictor(r: PredictorTrainResult) -> None:
    print(f"\nfertility predictor summary ({r.out})")
    print(f"  stopped:         {r.stop_reason}")
    print(f"  steps:           {r.step}, {r.seconds / 60:.1f} min")
    print(f"  best validation: accuracy {r.best['valid/accuracy']:.2f}%, MAE {r.best['valid/mae']:.3f} "
          f"(step {r.best['step']})")
    print(f"  checkpoint:      {r.checkpoint}")


def _eval_predictor(request: FertilityRequest) -> None:
    from scanmt.fertility.predictor.evaluation import format_eval

    evals = []
    for split in eval_splits(request):
        evals.append(evaluate_predictor_split(request, split))
        print(format_eval(evals[-1]))
    if request.json:
        write_predictor_evals(request.json, Path(request.eval_predictor), evals)


def _compute(request: FertilityRequest) -> None:
    meta, splits, source = compute_plan(request)
    value = request.value
    label = f"{request.strategy}" + (f" {format_value(value)}" if value is not None else "")
    print(f"scanmt fertility: {label} on {request.data} ({meta['src_lang']} subwords)")
    print(f"  {'split':<8} {'sents':>7} {'tokens':>8} {'mean':>6} {'max':>5} {'=1':>6}  file")
    for split in splits:
        r = compute_split(request, split, source)
        st = r.stats
        note = " (cached)" if r.reused else ""
        print(
            f"  {split:<8} {st['sentences']:>7} {st['tokens']:>8} {st['mean']:>6.2f} {format_value(st['max']):>5} "
            f"{100 * st['share_1']:>5.1f}%  {r.path}{note}"
        )
