"""Matrix-multiply throughput of this machine in float32 and bfloat16, with the shapes of the paper model.

    python benchmarks/matmul_peak.py                # 2 threads
    python benchmarks/matmul_peak.py --threads 1

Puts `benchmarks/train_throughput.py`'s tokens/s in context: a forward+backward
pass of the paper-size model costs about 6 x (weights a target token passes
through) floating-point operations, printed here as MFLOP/token, so
``peak GFLOP/s / MFLOP per token`` bounds the tokens/s any implementation can
reach on this CPU.
"""

from __future__ import annotations

import argparse
import time

import torch


def gflops(m: int, k: int, n: int, dtype: torch.dtype, seconds: float) -> float:
    """Median GFLOP/s of ``[m, k] @ [k, n]`` over repeated runs lasting about ``seconds``."""
    a = torch.randn(m, k).to(dtype)
    b = torch.randn(k, n).to(dtype)
    for _ in range(3):  # warm-up: thread pool, packing buffers
        a @ b
    times = []
    t_end = time.perf_counter() + seconds
    while time.perf_counter() < t_end or len(times) < 5:
        t0 = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - t0)
    times.sort()
    return 2 * m * k * n / times[len(times) // 2] / 1e9


def paper_model_mflop_per_token(emb: int = 500, hidden: int = 500, layers: int = 2, vocab: int = 7_800) -> float:
    """6 x the matrix weights one target token passes through (encoder counted per source token,
    with as many source as target tokens); the attention's O(S) products are left out."""
    enc = 0
    d_in = emb
    for _ in range(layers):  # bidirectional, hidden/2 per direction
        h = hidden // 2
        enc += 2 * 4 * h * (d_in + h)
        d_in = hidden
    dec = 4 * hidden * (emb + hidden + hidden)  # layer 1: [embedding; input feed] + recurrent
    dec += (layers - 1) * 4 * hidden * (2 * hidden)
    dec += hidden * hidden + 2 * hidden * hidden + hidden * vocab  # attention W, W_c, generator
    return 6 * (enc + dec) / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    ap.add_argument("--seconds", type=float, default=2.0, help="time per shape and dtype")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    mflop = paper_model_mflop_per_token()
    # (tokens x in) @ (in x out): generator, decoder LSTM layer 1, encoder LSTM layer 1 (one direction)
    shapes = [(4000, 500, 7800), (64, 1500, 2000), (2000, 500, 1000)]
    print(f"matmul throughput, {args.threads} thread(s); paper model: ~{mflop:.0f} MFLOP per target token")
    print(f"  {'shape (m x k x n)':<22}{'fp32 GFLOP/s':>14}{'bf16 GFLOP/s':>14}{'bf16/fp32':>11}")
    best = {}
    for m, k, n in shapes:
        f32 = gflops(m, k, n, torch.float32, args.seconds)
        b16 = gflops(m, k, n, torch.bfloat16, args.seconds)
        best["fp32"] = max(best.get("fp32", 0.0), f32)
        best["bf16"] = max(best.get("bf16", 0.0), b16)
        print(f"  {f'{m} x {k} x {n}':<22}{f32:>14.1f}{b16:>14.1f}{b16 / f32:>10.2f}x")
    for dt, g in best.items():
        print(f"  {dt}: at the best of these rates, {g * 1e3 / mflop:,.0f} target tok/s is the ceiling")


if __name__ == "__main__":
    main()
