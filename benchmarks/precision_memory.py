"""Resident memory against updates of fp32 and bf16 training, side by side in one run.

    python benchmarks/precision_memory.py --data /tmp/m30k --updates 1000 --every 100
    python benchmarks/precision_memory.py --data /tmp/m30k --updates 400 --variants fp32 bf16 --no-malloc-tuning
    ONEDNN_PRIMITIVE_CACHE_CAPACITY=0 python benchmarks/precision_memory.py --data /tmp/m30k --variants bf16

Each variant trains the ``--preset`` (default ``cpu-small``) in a fresh process of its own, with one
thread, and all of them at the same time, as the demo trains its two systems: the real training step
(``TrainLoop.train_step``: the forward under autocast for bf16, Adam, gradient clipping) on the real
token-bucketed Multi30k batches in order, without validation or checkpoints.  Every ``--every`` updates
each process reports its resident memory (``/proc/self/statm``) and its peak so far (``ru_maxrss``).

Variants:

- ``fp32``: ``train.precision=fp32``;
- ``bf16``: ``train.precision=bf16`` as scanmt trains it (oneDNN's per-shape caches bounded to
  :data:`scanmt.shape_caches.CAPACITY` entries: :mod:`scanmt.shape_caches`);
- ``bf16-unbounded``: bf16 with the caches at oneDNN's and ideep's default 1,024 entries each, which is
  how scanmt trained before the bound (issue 52, item 10).

Every process tunes glibc's malloc as the ``scanmt`` command does (:func:`scanmt.allocator.tune_malloc`),
unless ``--no-malloc-tuning`` (``SCANMT_MALLOC=0``).  The other suspects of issue 52, item 10 can be
changed alone: ``--no-autocast-cache`` (autocast's cache of bf16 weight copies), ``--trim`` (glibc's
``malloc_trim`` after every update: what the allocator keeps of freed memory), and the caches' sizes
through the environment (``ONEDNN_PRIMITIVE_CACHE_CAPACITY``, ``LRU_CACHE_CAPACITY``: the variant
``bf16`` keeps a value set there, as scanmt does; ``bf16-unbounded`` sets both to 1,024).

The table gives each variant's resident memory and peak, and the ratio of bf16's peak to fp32's; the last
lines say how much each peak grew over the second half of the updates (a memory that levels off grows by
little there).  The seconds per update are printed for orientation only: the processes share the
machine's cores with each other and with whatever else runs.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scanmt.allocator import OPT_OUT
from scanmt.shape_caches import CACHE_ENV

#: variant -> (train.precision, environment of its process)
VARIANTS: dict[str, tuple[str, dict[str, str]]] = {
    "fp32": ("fp32", {}),
    "bf16": ("bf16", {}),
    "bf16-unbounded": ("bf16", dict.fromkeys(CACHE_ENV, "1024")),
}


def child(args: argparse.Namespace) -> None:
    """Train ``args.updates`` updates, printing ``{"update", "rss", "peak", "seconds", "caches"}`` every
    ``args.every`` (MB, MB, seconds since the first update, the cache sizes in effect)."""
    import torch

    from scanmt.allocator import tune_malloc
    from scanmt.config import Config
    from scanmt.presets import preset_path
    from scanmt.training.loop import resident_mb
    from scanmt.training.trainer import Trainer

    tune_malloc()  # as the scanmt command does (SCANMT_MALLOC=0: not)
    torch.set_num_threads(1)
    cfg = Config.load(preset_path(args.preset), [f"data.dir={args.data}", f"train.precision={args.child}",
                                                 "train.threads=1", "train.logger=none", *args.set])
    trim = ctypes.CDLL(None).malloc_trim if args.trim else None
    with tempfile.TemporaryDirectory() as out:
        loop = Trainer(cfg, out).loop
        if args.no_autocast_cache:
            loop.autocast = lambda: torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.child == "bf16",
                                                   cache_enabled=False)
        step, epoch, t0 = 0, 1, time.perf_counter()
        while step < args.updates:
            for descriptor in loop._batches(epoch):
                loop.train_step(loop.task.make_batch(descriptor, loop.dist.device))
                if trim:
                    trim(0)
                step += 1
                if step % args.every == 0:
                    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
                    caches = {name: os.environ.get(name, "library default") for name in CACHE_ENV}
                    print(json.dumps({"update": step, "rss": resident_mb(), "peak": peak,
                                      "seconds": time.perf_counter() - t0, "caches": caches}), flush=True)
                if step == args.updates:
                    break
            epoch += 1


def start(variant: str, args: argparse.Namespace) -> subprocess.Popen:
    precision, env = VARIANTS[variant]
    base = {**os.environ, **env, "OMP_NUM_THREADS": "1", "SCANMT_BF16_SPEEDUP": "1:1"}  # no precision probe
    if args.no_malloc_tuning:
        base[OPT_OUT] = "0"
    cmd = [sys.executable, __file__, "--child", precision, "--data", args.data, "--preset", args.preset,
           "--updates", str(args.updates), "--every", str(args.every), "--set", *args.set,
           *(["--no-autocast-cache"] if args.no_autocast_cache else []), *(["--trim"] if args.trim else [])]
    return subprocess.Popen(cmd, env=base, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def report(rows: dict[str, list[dict]]) -> None:
    """The table of resident memory and peaks per report, the peaks' ratios to fp32's, and each peak's growth
    over the second half of the updates."""
    names = list(rows)
    others = [n for n in names if n != "fp32"] if "fp32" in rows else []
    print(f"{'updates':>8}" + "".join(f"{n + ' MB':>20}{'peak':>7}" for n in names)
          + "".join(f"{n + ' / fp32 peak':>28}" for n in others) + "   s/update (" + ", ".join(names) + ")")
    for i, first in enumerate(rows[names[0]]):
        at = {n: rows[n][i] for n in names}
        line = f"{first['update']:>8}" + "".join(f"{at[n]['rss']:>20.0f}{at[n]['peak']:>7.0f}" for n in names)
        line += "".join(f"{at[n]['peak'] / at['fp32']['peak']:>27.2f}x" for n in others)
        print(line + "   " + ", ".join(f"{at[n]['seconds'] / at[n]['update']:.2f}" for n in names))
    for n in names:
        caches = ", ".join(f"{k}={v}" for k, v in rows[n][-1]["caches"].items())
        mid, end = rows[n][max(len(rows[n]) // 2 - 1, 0)], rows[n][-1]
        print(f"{n}: peak {end['peak']:.0f} MB after {end['update']} updates; from update {mid['update']} on it grew "
              f"by {end['peak'] - mid['peak']:.0f} MB ({100 * (end['peak'] / mid['peak'] - 1):+.1f} %); {caches}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default="runs/data/multi30k-de-en", help="prepared Multi30k folder (scanmt prepare)")
    p.add_argument("--preset", default="cpu-small", help="config preset")
    p.add_argument("--updates", type=int, default=1000, help="training updates per variant")
    p.add_argument("--every", type=int, default=100, help="report the memory every this many updates")
    p.add_argument("--variants", nargs="+", choices=sorted(VARIANTS), default=list(VARIANTS),
                   help="which to train (default: all, side by side)")
    p.add_argument("--no-malloc-tuning", action="store_true", help="SCANMT_MALLOC=0 in every process")
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="config overrides for every variant")
    p.add_argument("--no-autocast-cache", action="store_true",
                   help="torch.autocast(cache_enabled=False): without autocast's cache of bf16 weight copies")
    p.add_argument("--trim", action="store_true", help="glibc's malloc_trim(0) after every update")
    p.add_argument("--child", choices=("fp32", "bf16"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args)
        return
    if not (Path(args.data) / "meta.json").exists():
        raise SystemExit(f"{args.data}: not a prepared data folder (scanmt prepare --corpus multi30k --pair de-en "
                         f"--out {args.data})")
    print(f"resident memory (MB) of {args.preset} training, {args.updates} updates, one thread per variant, all "
          f"variants at once; malloc {'not tuned (SCANMT_MALLOC=0)' if args.no_malloc_tuning else 'tuned'}; "
          f"peak = ru_maxrss so far", flush=True)
    procs = {name: start(name, args) for name in args.variants}
    rows: dict[str, list[dict]] = {}
    for name, proc in procs.items():
        out, err = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"{name} failed:\n{err[-3000:]}")
        rows[name] = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    report(rows)


if __name__ == "__main__":
    main()
