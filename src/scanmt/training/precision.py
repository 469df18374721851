"""Which training precision is the faster one here: measured, not read off the CPU's flags.

``train.precision=bf16`` (autocast) pays off only where the hardware multiplies bfloat16 faster than
float32.  The CPU flag ``avx512_bf16`` does not say so: on an AMD EPYC with it, bf16 trained the
LSTM ``cpu-small`` 1.76x faster than fp32 (docs/results.md, section 1b); on the Intel Xeon of the
twentieth session, which also lists ``avx512_bf16`` (and no AMX), oneDNN's bf16 matrix products ran at
0.26-0.56x the fp32 rate (``benchmarks/matmul_peak.py --threads 1``) and the Transformer preset
trained at 0.70x its fp32 tokens per second (``benchmarks/train_throughput.py --precision fp32 bf16``).

So :func:`bf16_speedup` times a training step in both precisions: the forward (under autocast, as
``train.precision=bf16`` runs it), the loss and the backward of a stack of linear layers of the
presets' sizes, at a batch of token states.  One round of each precision is a warm-up (oneDNN's kernel
choice, packing buffers); then ``repeats`` rounds alternate the two, and the speedup is the median of the
rounds' fp32 / bf16 time ratios, so that a round slowed down by another job on a shared machine moves it
little.  One 7-round probe takes under a second; a single timed matrix product, as before, gave
anything from 0.28x to 33x on one machine (issue 52, item 11).

A command measures once (:func:`cpu_bf16_speedup`): the value is kept in the environment variable
``SCANMT_BF16_SPEEDUP`` (``THREADS:SPEEDUP`` pairs), which its child processes (the demo's trainers, a
grid's workers) inherit, so that the demo's ``--precision auto`` and its trainers' warnings
(:func:`precision_advice`) follow one measurement and cannot contradict each other.  ``auto`` takes bf16
only at :data:`PREFER_BF16` or faster and the warning needs ``1 / PREFER_BF16`` or slower: a precision
within that band of the other is fp32, neither chosen nor warned about.
"""

from __future__ import annotations

import os
import statistics
import time

import torch

from scanmt.errors import ConfigError
from scanmt.shape_caches import bound_shape_caches

#: ``(tokens, width, hidden, vocabulary)`` of the probe's step: ``tokens`` states of ``width`` through a
#: ``width x hidden`` layer (an LSTM's gates), back to ``width``, and through a ``width x vocabulary``
#: output layer to a cross-entropy loss (the presets' sizes; a vocabulary of 2,048 keeps the probe short)
PROBE_SHAPE = (128, 256, 1024, 2048)
#: timed rounds of each precision after the warm-up round
PROBE_REPEATS = 7
#: bf16 is chosen (``auto``) when it measures at least this much faster than fp32, and warned
#: against when it measures slower than ``1 / PREFER_BF16``: a margin for a machine shared with other jobs
PREFER_BF16 = 1.25
#: where a command keeps its measurement for its child processes: ``THREADS:SPEEDUP[,THREADS:SPEEDUP...]``
SPEEDUP_ENV = "SCANMT_BF16_SPEEDUP"


def bf16_speedup(shape: tuple[int, int, int, int] = PROBE_SHAPE, repeats: int = PROBE_REPEATS,
                 threads: int | None = None) -> float:
    """fp32 time / bf16 time of one training step of linear layers on the CPU (> 1: bf16 is faster).

    The step (``shape`` = ``(tokens, width, hidden, vocabulary)``): ``x [tokens, width]`` through
    ``W1 [width, hidden]``, tanh, ``W2 [hidden, width]`` and ``Wo [width, vocabulary]``, its cross-entropy
    and the backward to the three weights, with the forward under ``torch.autocast(bfloat16)`` for bf16.
    The median over ``repeats`` interleaved rounds of the round's fp32 / bf16 time, after a warm-up round,
    at ``threads`` threads (default: this process's number), which is restored afterwards."""
    tokens, width, hidden, vocab = shape
    bound_shape_caches()  # oneDNN's caches as training has them (the first bf16 product fixes their size)
    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        g = torch.Generator().manual_seed(0)
        x = torch.randn(tokens, width, generator=g)
        gold = torch.randint(vocab, (tokens,), generator=g)
        weights = [(torch.randn(a, b, generator=g) / a**0.5).requires_grad_()
                   for a, b in ((width, hidden), (hidden, width), (width, vocab))]

        def step(bf16: bool) -> float:
            t0 = time.perf_counter()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                w1, w2, wo = weights
                logits = torch.tanh(x @ w1) @ w2 @ wo
            torch.nn.functional.cross_entropy(logits.float(), gold).backward()
            for w in weights:
                w.grad = None
            return time.perf_counter() - t0

        for bf16 in (False, True):  # warm-up: thread pool, packing buffers, oneDNN's kernel choice
            step(bf16)
        ratios = [step(False) / step(True) for _ in range(repeats)]
    finally:
        torch.set_num_threads(before)
    return statistics.median(ratios)


def _inherited(threads: int) -> float | None:
    """The speedup at ``threads`` threads that this command measured already (``SCANMT_BF16_SPEEDUP``)."""
    text = os.environ.get(SPEEDUP_ENV, "")
    try:
        pairs = {int(t): float(s) for t, s in (item.split(":") for item in text.split(",") if item)}
    except ValueError:
        raise ConfigError(f"{SPEEDUP_ENV}={text!r}: expected THREADS:SPEEDUP pairs such as 1:0.62 (scanmt sets it "
                          "for its child processes; unset it to measure again)") from None
    return pairs.get(threads)


def cpu_bf16_speedup(threads: int = 1) -> float:
    """:func:`bf16_speedup` at ``threads`` threads, measured once per command: a process whose parent measured
    it (``SCANMT_BF16_SPEEDUP``) takes the parent's value, and a measurement is put there for the children."""
    known = _inherited(threads)
    if known is not None:
        return known
    speedup = bf16_speedup(threads=threads)
    os.environ[SPEEDUP_ENV] = ",".join(filter(None, [os.environ.get(SPEEDUP_ENV), f"{threads}:{speedup:.4g}"]))
    return float(f"{speedup:.4g}")


def probe_description(threads: int) -> str:
    """How :func:`cpu_bf16_speedup` measured, for messages."""
    tokens, width, hidden, vocab = PROBE_SHAPE
    return (f"linear layers {width}x{hidden}x{width}x{vocab} on {tokens} tokens, forward and backward, median of "
            f"{PROBE_REPEATS} rounds, {threads} thread(s)")


def cpu_prefers_bf16(threads: int = 1) -> bool:
    """Whether bf16 measures clearly faster than fp32 on this CPU (``--precision auto``)."""
    return cpu_bf16_speedup(threads) >= PREFER_BF16


def precision_advice(arch: str, precision: str, device: torch.device, threads: int = 1) -> str | None:
    """A warning for a training precision measured to be much slower than the other on ``device``
    (None: none).

    - GPU, Transformer, bf16: autocast trained the Transformer preset 18x slower than fp32 on an H200
      (torch 2.11), and ``torch.nn.Transformer`` 14x (docs/transformer.md, section 5).  The likely cause,
      cuDNN's attention backend, is left out since (:mod:`scanmt.model.transformer.fused_attention`), but no GPU has
      measured it yet, so the warning stays.
    - CPU, bf16: when this CPU's bf16 training steps measure slower than fp32's (:func:`cpu_bf16_speedup`:
      this command's one measurement, so the demo's ``--precision auto`` never picks what its trainers warn of).
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
            return (f"train.precision=bf16 on a CPU whose bf16 training steps run at {speedup:.2f}x the speed of "
                    f"float32 ({probe_description(threads)}): train.precision=fp32 would train faster here (its "
                    "results differ from bf16's by about what another seed gives: docs/results.md, section 1b)")
    return None
