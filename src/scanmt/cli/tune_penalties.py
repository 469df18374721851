"""``scanmt tune-penalties``: grid search of the length and coverage penalty weights on a split.

Prints BLEU per grid point (rows alpha, columns beta) and the best setting, which
:func:`scanmt.api.tune_penalties` writes as YAML for ``scanmt translate --penalties FILE``
(how the grid is searched: :mod:`scanmt.api.tune_penalties`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from scanmt.api.requests import request_from_namespace
from scanmt.api.tune_penalties import TunePenaltiesRequest, tune_penalties

NAME = "tune-penalties"
HELP = "grid-search the length/coverage penalty weights (alpha, beta) on a prepared split by BLEU"
DESCRIPTION = """Tune Wu et al.'s length penalty alpha and coverage penalty beta by grid search (the paper: {0.0, 0.2, ..., 1.0}
on the validation set), score s(Y,X) = log P(Y|X) / lp(Y) + cp(X;Y).

  scanmt tune-penalties --model runs/softmax/best.pt --data runs/data/multi30k-de-en
  scanmt tune-penalties --model ... --data ... --penalty-mode step --grid 0,0.5,1 --out runs/softmax/penalties.yaml
  scanmt translate --model runs/softmax/best.pt --penalties runs/softmax/penalties.yaml --input ... --output ...

Every batch is encoded once; the beam runs from the cached encoder outputs (once in total for the default
penalty mode 'rescore', whose beam does not depend on the penalties; once per grid point for 'step').
Prints BLEU per grid point (rows alpha, columns beta) and writes the best setting as YAML."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options; their ranges are checked by :class:`TunePenaltiesRequest` (the same for the API)."""
    p.add_argument("--model", required=True, help="checkpoint (best.pt of a run)")
    p.add_argument("--data", type=Path, required=True, help="prepared data directory (scanmt prepare)")
    p.add_argument("--split", default="valid", help="split to tune on: DIR/{split}.raw.{src,tgt}")
    p.add_argument("--grid", default="0,0.2,0.4,0.6,0.8,1.0", help="values of alpha and of beta (comma-separated)")
    p.add_argument("--alphas", help="values of alpha only, overriding --grid")
    p.add_argument("--betas", help="values of beta only, overriding --grid")
    p.add_argument("--beam", type=int, default=5, help="beam size (>= 2)")
    p.add_argument("--penalty-mode", choices=("rescore", "step"), default=None,
                   help="where the penalties act; None: the checkpoint's decode.penalty_mode")
    p.add_argument("--coverage-eps", type=float, default=None,
                   help="eps of the coverage penalty; None: the checkpoint's decode.coverage_eps")
    p.add_argument("--redecode", action="store_true",
                   help="rescore mode: run the beam for every grid point instead of re-ranking one decode")
    p.add_argument("--limit", type=int, default=0, help="use only the first N sentences of the split (0 = all)")
    p.add_argument("--batch-size", type=int, default=None, help="sentences per decoding batch")
    p.add_argument("--out", type=Path, help="where to write the best setting; None: CKPT_DIR/penalties.SPLIT.yaml")
    p.add_argument("--device", default="cpu", help="cpu or cuda[:N]")


def request_from_args(args: argparse.Namespace) -> TunePenaltiesRequest:
    return request_from_namespace(TunePenaltiesRequest, args)


def run(args: argparse.Namespace) -> int:
    request = request_from_args(args)
    print(tune_penalties(request).summary(request))
    return 0
