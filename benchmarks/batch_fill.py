"""How full the training batches are: batches per epoch and the share of real tokens in them, for each way
:meth:`scanmt.data.dataset.ParallelData.token_batches` can sort a batching window, side by side on one
prepared corpus.

    OMP_NUM_THREADS=1 python benchmarks/batch_fill.py --data runs/data/kftt-ja-en --src ja --tgt en \\
        --batch-tokens 2300 3000 --max-len 80

A batch costs ``sentences x (longest source + longest target)`` tokens of compute, padding included, so the
fill (real source + target tokens over that) is the share of an update's work that is not padding, and an epoch
takes as many updates as it has batches.  Counting needs no model and is deterministic in the seed: no timing.
The numbers for KFTT are in docs/kftt.md ("The epoch estimate").
"""

from __future__ import annotations

import argparse
from pathlib import Path

from scanmt.choices import BATCH_SORTS
from scanmt.data.dataset import ParallelData
from scanmt.data.pipeline import TextPipeline


def fill(data: ParallelData, batches: list[list[int]]) -> float:
    """Real source + target tokens (with ``</s>``) over the batches' padded size."""
    cost = [[data._cost(i) for i in b] for b in batches]
    real = sum(s + t for c in cost for s, t in c)
    return real / sum(len(c) * (max(s for s, _ in c) + max(t for _, t in c)) for c in cost)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="a folder written by `scanmt prepare`")
    ap.add_argument("--src", required=True, help="source language code, as prepared")
    ap.add_argument("--tgt", required=True, help="target language code, as prepared")
    ap.add_argument("--batch-tokens", type=int, nargs="+", default=[2300], help="data.batch_tokens values to count")
    ap.add_argument("--max-len", type=int, default=80, help="data.max_len: longer training pairs are dropped")
    ap.add_argument("--bucket-batches", type=int, default=50, help="data.bucket_batches: the window, in batches")
    ap.add_argument("--seed", type=int, default=1, help="train.seed (the shuffle)")
    args = ap.parse_args()
    d = Path(args.data)
    pipe = TextPipeline.from_data_dir(d, args.src, args.tgt)
    train = ParallelData.from_files(d / f"train.bpe.{args.src}", d / f"train.bpe.{args.tgt}", pipe.vocab,
                                    max_len=args.max_len, limit=0)
    print(f"{d}: {len(train)} training pairs; window {args.bucket_batches} batches, seed {args.seed}, epoch 1")
    print(f"{'batch tokens':>12}  {'sort':<8}  {'batches':>8}  {'fill':>6}  {'batches / source sort':>21}")
    for bt in args.batch_tokens:
        base = None
        for sort in BATCH_SORTS:
            batches = train.token_batches(bt, seed=args.seed, epoch=1, bucket_batches=args.bucket_batches, sort=sort)
            base = base or len(batches)
            print(f"{bt:>12}  {sort:<8}  {len(batches):>8}  {fill(train, batches):>6.3f}  {len(batches) / base:>21.3f}")


if __name__ == "__main__":
    main()
