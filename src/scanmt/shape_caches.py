"""Bounds on oneDNN's per-shape caches, which made bf16 training on a CPU grow without levelling off.

Under ``train.precision=bf16`` every matrix product on a CPU runs through oneDNN (fp32 ones through MKL),
and two caches keep one entry per distinct product shape: oneDNN's primitive cache
(``ONEDNN_PRIMITIVE_CACHE_CAPACITY``) and ideep's cache in front of it (``LRU_CACHE_CAPACITY``), 1,024
entries each by default.  An entry holds a JIT-compiled kernel and its buffers: bf16 products of 1,200
shapes left 0.56 GB held after ``malloc_trim``, 0.04 GB with both caches at 64.  Token-bucketed batches
differ in sentences, lengths and tokens, so an update of ``cpu-small`` brings about 19 product shapes not
seen before (counted with a dispatch mode over six updates), and entries are made and evicted all the
time; the memory freed between them stays in the heap (with ``malloc_trim`` after every update the
resident memory stayed at 1.1 GB, but the peak within an update still rose).  Over 1,000 updates of
``cpu-small`` bf16's peak reached 3.3 GB and was still rising, against fp32's 1.09 GB; with both caches
at 64 entries it levelled off at 1.13 GB from update 300 on (``benchmarks/precision_memory.py``,
docs/precision.md).  autocast's weight-cast cache is not a cause (it is emptied when the outermost
autocast block ends): switching it off (``cache_enabled=False``) changed nothing.

64 entries are about three updates' shapes, so the products repeated within an update (every decoder
step of a batch has the same shapes) still find their kernel; a product of a new shape compiles one
(about 0.15 ms), as it did with the larger caches, since a batch's shapes are mostly new anyway.

Both variables are read once, when the first bf16 product of a process runs (setting them later changes
nothing), so :func:`bound_shape_caches` is called before any: by the training loop
(:class:`~scanmt.training.loop.TrainLoop`) and by the precision probe
(:func:`~scanmt.training.precision.bf16_speedup`), the only places where scanmt multiplies in bf16.  It
puts them into the environment, so that child processes (the demo's trainers, grid workers) start with
them too.  A value the user set is left as it is.
"""

from __future__ import annotations

import os

#: entries per cache: about three updates' new product shapes (19 each) of ``cpu-small``
CAPACITY = 64
#: the environment variables of oneDNN's primitive cache and of ideep's cache in front of it
CACHE_ENV = ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY")


def bound_shape_caches(capacity: int = CAPACITY) -> dict[str, str]:
    """Set each of :data:`CACHE_ENV` to ``capacity`` unless the user set it; returns the values in effect for
    processes started from now on (and for this one, unless it ran a oneDNN product before)."""
    for name in CACHE_ENV:
        os.environ.setdefault(name, str(capacity))
    return {name: os.environ[name] for name in CACHE_ENV}
