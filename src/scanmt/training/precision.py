"""Which training precision is the faster one here: measured, not read off the CPU's flags.

``train.precision=bf16`` (autocast) pays off only where the hardware multiplies bfloat16 faster than
float32.  The CPU flag ``avx512_bf16`` does not say so: on an AMD EPYC with it, bf16 trained the
LSTM ``cpu-small`` 1.76x faster than fp32 (docs/results.md, section 1b); on the Intel Xeon of the
twentieth session, which also lists ``avx512_bf16`` (and no AMX), oneDNN's bf16 matrix products ran at
0.26-0.56x the fp32 rate (``benchmarks/matmul_peak.py --threads 1``) and the Transformer preset
trained at 0.70x its fp32 tokens per second (``benchmarks/train_throughput.py --precision fp32 bf16``).
So :func:`bf16_speedup` times one matrix product of a model's size in both precisions, interleaved, in
about a tenth of a second, and the demo's ``--precision auto`` and the training warning follow it.
"""

from __future__ import annotations

import functools
import statistics
import time

import torch

#: ``[m, k] @ [k, n]``: a batch of 1,024 token states through a 256 x 1,024 layer (the presets' sizes)
PROBE_SHAPE = (1024, 256, 1024)
#: bf16 is chosen (``auto``) when it measures at least this much faster than fp32, and warned
#: against when it measures slower than ``1 / PREFER_BF16``: a margin for a machine shared with other jobs
PREFER_BF16 = 1.25


def bf16_speedup(shape: tuple[int, int, int] = PROBE_SHAPE, repeats: int = 7, threads: int | None = None) -> float:
    """float32 time / bfloat16 time of one ``[m, k] @ [k, n]`` product on the CPU (> 1: bf16 is faster).

    Medians of ``repeats`` interleaved timings after a warm-up, at ``threads`` threads (default: this
    process's number), which is restored afterwards."""
    m, k, n = shape
    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        g = torch.Generator().manual_seed(0)
        a32, b32 = torch.randn(m, k, generator=g), torch.randn(k, n, generator=g)
        pairs = {torch.float32: (a32, b32), torch.bfloat16: (a32.bfloat16(), b32.bfloat16())}
        times: dict[torch.dtype, list[float]] = {dtype: [] for dtype in pairs}
        for a, b in pairs.values():  # warm-up: thread pool, packing buffers, oneDNN's kernel choice
            a @ b
        for _ in range(repeats):
            for dtype, (a, b) in pairs.items():
                t0 = time.perf_counter()
                a @ b
                times[dtype].append(time.perf_counter() - t0)
    finally:
        torch.set_num_threads(before)
    return statistics.median(times[torch.float32]) / statistics.median(times[torch.bfloat16])


@functools.lru_cache(maxsize=None)
def cpu_bf16_speedup(threads: int = 1) -> float:
    """:func:`bf16_speedup` at ``threads`` threads, measured once per process."""
    return bf16_speedup(threads=threads)


def cpu_prefers_bf16(threads: int = 1) -> bool:
    """Whether bf16 measures clearly faster than fp32 on this CPU (``--precision auto``)."""
    return cpu_bf16_speedup(threads) >= PREFER_BF16


def precision_advice(arch: str, precision: str, device: torch.device, threads: int = 1) -> str | None:
    """A warning for a training precision measured to be much slower than the other on ``device``
    (None: none).

    - GPU, Transformer, bf16: autocast trained the Transformer preset 18x slower than fp32 on an H200
      (torch 2.11), and ``torch.nn.Transformer`` 14x (docs/transformer.md, section 5).  The likely cause,
      cuDNN's attention backend, is left out since (:mod:`scanmt.model.fused_attention`), but no GPU has
      measured it yet, so the warning stays.
    - CPU, bf16: when this CPU's bf16 matrix products measure slower than fp32's (:func:`cpu_bf16_speedup`).
    """
    if precision != "bf16":
        return None
    if device.type == "cuda":
        if arch != "transformer":
            return None  # the LSTM loses 11-22 % in bf16 there, not 14-18x
        return ("train.precision=bf16 with a Transformer on a GPU: on an H200 (torch 2.11) bf16 trained the "
                "Transformer preset 18x slower than fp32, and torch.nn.Transformer 14x (docs/transformer.md, "
                "section 5; measured before scanmt left out cuDNN's attention backend, the likely cause, and "
                "not measured since); consider train.precision=fp32")
    if device.type == "cpu":
        speedup = cpu_bf16_speedup(threads)
        if speedup < 1 / PREFER_BF16:
            m, k, n = PROBE_SHAPE
            return (f"train.precision=bf16 on a CPU whose bf16 matrix products run at {speedup:.2f}x the speed of "
                    f"float32 ({m}x{k} @ {k}x{n}, {threads} thread(s), measured just now): "
                    "train.precision=fp32 would train faster here (its results differ from bf16's by about what "
                    "another seed gives: docs/results.md, section 1b)")
    return None
