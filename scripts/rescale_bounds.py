"""Write a constrained model's own fertility bounds, rescaled, as a ``scanmt translate --fertility`` file: what
do the bounds do inside a trained model? (docs/kftt.md, "Ninth session" and "Thirteenth session")

A decode with ``--attention-out`` records the bound of every source subword it used (``fert_i``; the sink's is
``inf`` and is left out, since ``--fertility`` gives the real subwords only).  This writes, one line per sentence,

    max(scale × bound + shift, min)

so that the same checkpoint decodes the same inputs again with looser bounds (``--scale 1000``: none binds) or
tighter ones (``--shift -1``: a ``fertility + 1`` model's predicted fertility alone).  ``--scale 1 --shift 0``
gives the bounds back unchanged, which reproduces the first decode.  A diagnostic: the model was trained with
its own bounds, so a decode with others measures what the bounds do, not a remedy to ship.

    scanmt translate --model RUN/best.pt --input valid.raw.ja --output own.hyp.en --beam 5 --attention-out own.attn.npz
    python scripts/rescale_bounds.py own.attn.npz --shift -1 --min 0.1 --out tight.fert
    scanmt translate --model RUN/best.pt --input valid.raw.ja --output tight.hyp.en --beam 5 --fertility tight.fert
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

from scanmt.data.attention_file import AttentionFile
from scanmt.data.fertility import write_fertility
from scanmt.errors import DataError


def rescaled_bounds(attention: AttentionFile, *, scale: float, shift: float, floor: float) -> list[np.ndarray]:
    """Each sentence's real-subword bounds ``[S_i]`` (the sink's column dropped), as ``max(scale·b + shift, floor)``.

    Raises:
        DataError: naming the file and sentence, where the file records no bounds (a decode of an
            unconstrained model) or a real subword's bound is not finite.
    """
    out = []
    for i, sentence in enumerate(attention):
        if sentence.fertility is None:
            raise DataError(f"{attention.path}: sentence {i + 1} records no fertility bounds: decode a "
                            "constrained model (csoftmax, csparsemax) with --attention-out")
        bounds = np.asarray(sentence.fertility, dtype=np.float64)
        if sentence.has_sink:
            bounds = bounds[:-1]
        if not np.isfinite(bounds).all():
            raise DataError(f"{attention.path}: sentence {i + 1}: a source subword's bound is not finite")
        out.append(np.maximum(scale * bounds + shift, floor))
    return out


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("attention", type=Path, help="attention file of a constrained model's decode "
                        "(scanmt translate --attention-out)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every bound by this (default 1)")
    parser.add_argument("--shift", type=float, default=0.0, help="then add this (default 0; -1 takes a "
                        "'fertility + 1' model back to its predicted fertility)")
    parser.add_argument("--min", type=float, default=0.1, dest="floor",
                        help="no bound below this; must be > 0 (default 0.1)")
    parser.add_argument("--out", type=Path, required=True, help="the fertility file to write")
    args = parser.parse_args(argv)
    for name, value in (("--scale", args.scale), ("--min", args.floor)):
        if not math.isfinite(value) or value <= 0:
            parser.error(f"{name} must be a finite number > 0, not {value:g}")
    if not math.isfinite(args.shift):
        parser.error(f"--shift must be finite, not {args.shift:g}")
    try:
        attention = AttentionFile(args.attention)
        old = rescaled_bounds(attention, scale=1.0, shift=0.0, floor=0.0)
        new = rescaled_bounds(attention, scale=args.scale, shift=args.shift, floor=args.floor)
        write_fertility(args.out, new)
    except DataError as exc:
        print(f"rescale_bounds: {exc}", file=sys.stderr)
        return 1
    before, after = np.concatenate(old), np.concatenate(new)
    print(f"{args.out}: {len(new)} sentences, {after.size} source subwords; bound median {np.median(before):.3g} "
          f"-> {np.median(after):.3g}, mean {before.mean():.3g} -> {after.mean():.3g}"
          f"{f', {int((after == args.floor).sum())} at --min' if (after == args.floor).any() else ''}")
    return 0


if __name__ == "__main__":
    raise SystemExit(run(sys.argv[1:]))
