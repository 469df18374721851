"""``scanmt train``: train an NMT model from a YAML config."""

from __future__ import annotations

import argparse
from pathlib import Path

from scanmt.config import Config

NAME = "train"
HELP = "train a model (also under torchrun for DistributedDataParallel)"
DESCRIPTION = """Train an attentional LSTM NMT model.

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


def run(args: argparse.Namespace) -> int:
    from scanmt.training.trainer import Trainer

    cfg = Config.load(args.config, args.set)
    trainer = Trainer(cfg, Path(args.out), resume=args.resume)
    p = trainer.train()
    if trainer.dist.is_main:
        print_summary(trainer, p)
    from scanmt.training import distributed

    distributed.teardown()
    return 0


def print_summary(trainer, p) -> None:
    n_params = sum(t.numel() for t in trainer.model.parameters())
    print(f"\ntraining summary ({trainer.out})")
    print(f"  stopped:          {trainer.stop_reason}")
    print(f"  steps / epochs:   {p.step} / {p.epoch - (1 if p.batch_in_epoch == 0 else 0)}")
    print(f"  parameters:       {n_params:,}")
    print(f"  train time:       {p.elapsed / 60:.1f} min, {p.units / max(p.elapsed, 1e-9):.0f} target tok/s")
    print(f"  best valid BLEU:  {p.best_score:.2f} (greedy, step {p.best_step}) -> {trainer.out / 'best.pt'}")
    if trainer.dist.enabled:
        d = trainer.replica_divergence
        print(f"  distributed:      {trainer.dist.world_size} processes, replicas {'in sync' if d == 0 else f'DIVERGED by {d:g}'}")
    if p.history:
        print(f"  last valid ppl:   {p.history[-1]['valid/ppl']:.2f}")
