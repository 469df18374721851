"""Translate with the sink's attention score lowered: does a constrained model's free use of the sink cost it
source words? (docs/kftt.md, "Seventh session")

A model with a sink (csoftmax, csparsemax) may put attention on ``<sink>`` at any step: its bound is infinite. The
paper adds it so that the bounds can never make a step infeasible, but nothing keeps a trained model from using it
as a "no source word" slot while the real words still have fertility left.  This script decodes with ``B``
subtracted from the sink's score at every step, before the transform and its exhaustion bonus (the sink is the
column whose bound is ``inf``), and otherwise exactly as ``scanmt translate``; with ``B`` large the sink gets only
what the bounds force on it.  Score the output with ``scanmt evaluate --attention`` (``attention: to the sink``)
beside a plain decode.  A diagnostic: the model was trained without the bias, so its outputs measure what the sink
does, not a remedy to ship.

    python scripts/sink_bias.py 2 --model RUN/best.pt --input valid.raw.ja --output sink2.hyp.en \\
        --beam 5 --attention-out sink2.attn.npz
"""

from __future__ import annotations

import argparse
import sys

import torch

from scanmt.cli.main import main
from scanmt.model.bounds import BoundedTransform


def lower_the_sink(bias: float) -> None:
    """Patch :meth:`BoundedTransform.recurrence` (the LSTM's attention step and the Transformer's bounded heads
    both run it) to subtract ``bias`` from the score of every column whose fertility bound is ``inf``."""
    recurrence = BoundedTransform.recurrence

    def biased(self, z, mask, fertility, attention_sum, alpha=None, shared=False):
        if fertility is not None:  # fertility [..., S] against scores [..., T, S]
            z = z - bias * torch.isinf(fertility).unsqueeze(-2).to(z.dtype)
        return recurrence(self, z, mask, fertility, attention_sum, alpha, shared)

    BoundedTransform.recurrence = biased


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     usage="python scripts/sink_bias.py B TRANSLATE-OPTIONS...")
    parser.add_argument("bias", type=float, help="what to subtract from the sink's score (>= 0)")
    args, rest = parser.parse_known_args(argv)
    if args.bias < 0:
        parser.error(f"B must be 0 or more, not {args.bias:g}")
    lower_the_sink(args.bias)
    return main(["translate", *rest])


if __name__ == "__main__":
    raise SystemExit(run(sys.argv[1:]))
