"""The output layer's training loss on real batches: softmax cross-entropy against the Fenchel-Young losses.

    python benchmarks/output_loss_batch.py --model runs/sparse-seq2seq/runs/softmax-out15/seed1/last.pt \
        --data runs/sparse-seq2seq/shared/data --batches 2 --outputs softmax entmax15

Runs the checkpoint's model in training mode (dropout on) over the first ``--batches`` training batches,
keeps the generator's scores ``[B*T, V]`` and the targets, then times ``scanmt.model.output.output_loss``
forward + backward on them for each ``--outputs`` in interleaved rounds (best of ``--rounds``), and prints
each time and its ratio to the first output's.  It also prints the support sizes of an entmax15 output on
those scores (median and the share of rows above 8, 32 and 128 words), which decide what entmax15's partial
sort costs (``scanmt.ops.entmax.TOP_K_15``).
"""

from __future__ import annotations

import argparse
import time

import torch

from scanmt.config import Config
from scanmt.model.build import build_model
from scanmt.model.checkpoint import load_checkpoint
from scanmt.model.output import output_loss
from scanmt.ops import entmax15
from scanmt.training.trainer import load_train_data


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="a checkpoint (best.pt or last.pt of a run)")
    ap.add_argument("--data", required=True, help="the prepared data folder the model was trained on")
    ap.add_argument("--batches", type=int, default=2, help="training batches to time on")
    ap.add_argument("--outputs", nargs="+", default=["softmax", "entmax15"], help="model.output values to time")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (the best is reported)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    ckpt = load_checkpoint(args.model)
    cfg = Config.from_dict(ckpt["config"])
    cfg.data.dir = args.data
    data = load_train_data(cfg)
    model = build_model(cfg, len(data.pipeline.vocab))
    model.load_state_dict(ckpt["model"])
    model.train()
    torch.manual_seed(0)
    scores = []
    with torch.no_grad():
        for positions in data.train.token_batches(cfg.data.batch_tokens, seed=1, epoch=1)[: args.batches]:
            b = data.train.make_batch(positions)
            out = model(b.src, b.src_len, b.tgt_in, None)
            scores.append((out.logits.reshape(-1, out.logits.size(-1)).float(), b.tgt_out.reshape(-1)))
    best = {o: float("inf") for o in args.outputs}
    for _ in range(args.rounds):
        for o in args.outputs:
            t = 0.0
            for z, y in scores:
                z = z.clone().requires_grad_()
                t0 = time.perf_counter()
                output_loss(z, y, o).backward()
                t += time.perf_counter() - t0
            best[o] = min(best[o], t / len(scores))
    rows = sum(z.shape[0] for z, _ in scores)
    print(f"output loss fwd+bwd, {len(scores)} batches ({rows} rows x {scores[0][0].shape[1]} words), "
          f"{torch.get_num_threads()} thread(s), best of {args.rounds}:")
    first = args.outputs[0]
    for o in args.outputs:
        print(f"  {o:<10} {best[o] * 1000:8.1f} ms per batch  {best[o] / best[first]:5.2f}x {first}")
    with torch.no_grad():
        support = torch.cat([(entmax15(z, dim=-1) > 0).sum(-1) for z, _ in scores]).float()
    print(f"entmax15 support on these scores: median {support.median().item():.0f} words; "
          + ", ".join(f"{100 * (support > k).float().mean().item():.0f} % of rows above {k}" for k in (8, 32, 128)))


if __name__ == "__main__":
    main()
