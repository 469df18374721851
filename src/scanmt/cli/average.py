"""``scanmt average``: checkpoint averaging, the mean of several checkpoints' weights as one checkpoint."""

from __future__ import annotations

import argparse
from pathlib import Path

from scanmt.api.average import AverageRequest, average
from scanmt.api.requests import request_from_namespace

NAME = "average"
HELP = "average checkpoints of one model: one checkpoint with the mean of their weights (translates like best.pt)"
DESCRIPTION = """\
Checkpoint averaging: write one checkpoint whose weights are the element-wise mean of several checkpoints
of the same model (the same model config, vocabulary and fertility provider). The mean of a run's last
few validations often translates better than any one of them, above all when the learning rate has not
decayed to zero (train.lr_schedule: inverse_sqrt).

  scanmt train --config configs/transformer-small.yaml --set train.keep_checkpoints=5 --out runs/t
  scanmt average --run runs/t --last 5 --out runs/t/average5.pt
  scanmt average --models runs/t/checkpoints/step6160.pt runs/t/checkpoints/step6847.pt --out avg.pt
  scanmt translate --model runs/t/average5.pt --input test.de --output test.hyp.en

A run keeps the checkpoints to average with train.keep_checkpoints: N (RUN/checkpoints/stepS.pt, the
weights of its last N validations). --run averages only the checkpoints that run saved (each records its
run's id, told by RUN/last.pt or best.pt): another run's files in that folder are left out, and named.
The averaged checkpoint takes its config, vocabulary, fertility provider and progress from the checkpoint
of the latest step, records its sources (averaged_from), and has no optimizer state, so it cannot resume
training."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options; their checks are :class:`AverageRequest`'s (the same for the API)."""
    p.add_argument("--models", nargs="+", default=(), metavar="CKPT",
                   help="checkpoint files to average (two or more; not with --run)")
    p.add_argument("--run", type=Path, metavar="DIR",
                   help="a training run trained with train.keep_checkpoints=N: average the checkpoints it kept "
                        "(DIR/checkpoints/stepS.pt; another run's there are left out)")
    p.add_argument("--last", type=int, default=0, metavar="N",
                   help="with --run: average only the newest N kept checkpoints (0 = all of them)")
    p.add_argument("--out", type=Path, required=True, help="the averaged checkpoint to write (atomically)")


def request_from_args(args: argparse.Namespace) -> AverageRequest:
    return request_from_namespace(AverageRequest, args)


def run(args: argparse.Namespace) -> int:
    print(average(request_from_args(args)).summary())
    return 0
