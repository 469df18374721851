"""Training throughput with and without scanmt.allocator's malloc settings, side by side.

    python benchmarks/malloc_tuning.py --presets cpu-small transformer-small --rounds 3 --steps 8

glibc's malloc settings are fixed when a process starts, so every measurement runs in a fresh child
process: for each round and preset one child with the settings (``MALLOC_MMAP_THRESHOLD_`` and
``MALLOC_TRIM_THRESHOLD_`` as :func:`scanmt.allocator.tune_malloc` sets them) and one without
(``SCANMT_MALLOC=0``), in alternating order, so that machine noise hits both alike.  Each child trains
the preset on real Multi30k batches (bf16 forward by default, one thread, Adam) for 2 warm-up updates and
``--steps`` timed ones, from the same initial weights and batches, and reports target tokens per second.
Prints the mean of each and their ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from scanmt.allocator import ENV, OPT_OUT


def child(preset: str, data: str, steps: int, precision: str, sets: list[str]) -> None:
    import torch

    from scanmt.config import Config
    from scanmt.model.build import build_model
    from scanmt.model.output import output_loss
    from scanmt.presets import preset_path
    from scanmt.training.trainer import load_train_data

    torch.set_num_threads(1)
    cfg = Config.load(preset_path(preset), [f"data.dir={data}", *sets])
    d = load_train_data(cfg)
    torch.manual_seed(0)
    model = build_model(cfg, len(d.pipeline.vocab))
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    batches = d.train.token_batches(cfg.data.batch_tokens, seed=1, epoch=1)
    m = cfg.model

    def update(positions) -> int:
        b = d.train.make_batch(positions)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            out = model(b.src, b.src_len, b.tgt_in, None)
        loss = output_loss(out.logits, b.tgt_out, m.output, m.output_alpha, cfg.train.label_smoothing)
        opt.zero_grad(set_to_none=True)
        (loss / b.n_tgt_tokens).backward()
        opt.step()
        return b.n_tgt_tokens

    for positions in batches[:2]:
        update(positions)
    t0 = time.perf_counter()
    tokens = sum(update(p) for p in batches[2:2 + steps])
    print(json.dumps({"tok_per_s": tokens / (time.perf_counter() - t0)}))


def measure(preset: str, tuned: bool, args: argparse.Namespace) -> float:
    env = {k: v for k, v in os.environ.items() if k not in ENV and k not in ("GLIBC_TUNABLES", OPT_OUT)}
    env.update({k: str(v) for k, v in ENV.items()} if tuned else {OPT_OUT: "0"})
    cmd = [sys.executable, __file__, "--child", preset, "--data", args.data, "--steps", str(args.steps),
           "--precision", args.precision, "--set", *args.set]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{preset} ({'tuned' if tuned else 'plain'}) failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])["tok_per_s"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--presets", nargs="+", default=["cpu-small", "transformer-small"], help="config presets to train")
    p.add_argument("--data", default="runs/data/multi30k-de-en", help="prepared Multi30k De-En folder")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds of both settings per preset")
    p.add_argument("--steps", type=int, default=8, help="timed updates per child process (after 2 warm-up ones)")
    p.add_argument("--precision", choices=("fp32", "bf16"), default="bf16", help="forward pass precision")
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="config overrides for every preset")
    p.add_argument("--child", metavar="PRESET", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args.child, args.data, args.steps, args.precision, args.set)
        return
    if not (Path(args.data) / "meta.json").exists():
        raise SystemExit(f"{args.data}: not a prepared data folder (scanmt prepare --corpus multi30k --pair de-en "
                         f"--out {args.data})")
    print(f"target tokens/s, {args.precision}, one thread, {args.steps} updates per process, {args.rounds} rounds "
          f"(malloc tuned: {', '.join(f'{k}={v}' for k, v in ENV.items())})")
    for preset in args.presets:
        rates: dict[bool, list[float]] = {True: [], False: []}
        for r in range(args.rounds):
            for tuned in ((False, True) if r % 2 == 0 else (True, False)):
                rates[tuned].append(measure(preset, tuned, args))
        plain, tuned = statistics.mean(rates[False]), statistics.mean(rates[True])
        print(f"{preset:>20}: plain {plain:7.0f}  tuned {tuned:7.0f}  tuned / plain = {tuned / plain:.2f}x  "
              f"(rounds: plain {', '.join(f'{x:.0f}' for x in rates[False])}; "
              f"tuned {', '.join(f'{x:.0f}' for x in rates[True])})")


if __name__ == "__main__":
    main()
