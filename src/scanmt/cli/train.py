"""``scanmt train``: train an NMT model from a YAML config."""

from __future__ import annotations

import argparse

from scanmt.api.requests import request_from_namespace
from scanmt.api.train import TrainRequest, train

NAME = "train"
HELP = "train a model (also under torchrun for DistributedDataParallel)"
DESCRIPTION = """Train an attentional NMT model: an LSTM (model.arch: lstm, the default) or a Transformer
(model.arch: transformer, e.g. --config configs/transformer-small.yaml).

  scanmt train --config configs/cpu-small.yaml --set data.dir=runs/data/multi30k-de-en --out runs/softmax
  scanmt train --config ... --out runs/softmax --resume           # continue a killed run
  torchrun --nproc_per_node 2 -m scanmt train --config ... --out DIR   # distributed (gloo on CPU, NCCL on GPU)

The output directory receives config.yaml, last.pt, best.pt (highest validation BLEU)
and metrics.csv (or tensorboard/)."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", required=True, help="YAML config (see configs/cpu-small.yaml for every key)")
    p.add_argument("--set", action="extend", nargs="+", default=[], metavar="KEY=VALUE",
                   help="override config keys, e.g. --set train.lr=0.5 train.epochs=20 (repeatable)")
    p.add_argument("--out", required=True, help="run directory for checkpoints and logs")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its last.pt")


def request_from_args(args: argparse.Namespace) -> TrainRequest:
    return request_from_namespace(TrainRequest, args)


def run(args: argparse.Namespace) -> int:
    result = train(request_from_args(args))
    if result.is_main:
        print(result.summary())
    return 0
