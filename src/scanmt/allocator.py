"""glibc malloc settings that keep large temporary tensors from being faulted in again at every update.

PyTorch's CPU allocator takes every tensor from ``malloc`` and frees it when the tensor dies.  glibc
serves a block above its mmap threshold (adjusted at run time, never above 32 MiB) with a fresh ``mmap``
and unmaps it when it is freed, so each large temporary of an update (the ``[target words, vocabulary]``
logits, log-probabilities and their gradients: 47 MB each for a batch of 1,500 target words and an 8k
vocabulary) is faulted in page by page again at every update.  On this project's machine a fresh
47 MB ``clone`` took about 33 ms and a reused one 6 ms.  Raising the mmap threshold to 1 GiB and the trim
threshold to 2 GiB lets freed blocks stay in the heap for the next update: training runs 12-32 % more
target words per second (``benchmarks/malloc_tuning.py``, ``docs/results.md`` section 1b).  The
arithmetic is unchanged (only where the memory comes from), so results are bit for bit the same; the
resident memory stays near its peak instead of shrinking after every update.

:func:`tune_malloc` is called by the ``scanmt`` command (``scanmt.cli.main``) and by the grid
runner's worker processes.  It also puts the settings into the environment
(``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_``), so that child processes (grid workers, the demo's
trainers) start with them.  It does nothing where the C library is not glibc, when either variable
or ``GLIBC_TUNABLES`` is already set (the user's own choice), or when ``SCANMT_MALLOC=0``.
"""

from __future__ import annotations

import ctypes
import os
import sys

#: mallopt parameters (malloc.h)
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD = 1 << 30  # 1 GiB: larger blocks still come from mmap
TRIM_THRESHOLD = 2**31 - 1  # the largest value mallopt takes (an int)
ENV = {"MALLOC_MMAP_THRESHOLD_": MMAP_THRESHOLD, "MALLOC_TRIM_THRESHOLD_": TRIM_THRESHOLD}
OPT_OUT = "SCANMT_MALLOC"


def tune_malloc() -> bool:
    """Raise glibc's mmap and trim thresholds in this process and its future children (see the module
    docstring); True when this process now has them."""
    if os.environ.get(OPT_OUT, "1") == "0" or not sys.platform.startswith("linux"):
        return False
    if all(os.environ.get(k) == str(v) for k, v in ENV.items()):
        return True  # a child of a tuned process: glibc read them from the environment at its start
    if "GLIBC_TUNABLES" in os.environ or any(k in os.environ for k in ENV):
        return False  # the user's own settings, left as they are
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 - only glibc has it (not musl)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    if mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) != 1 or mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) != 1:
        return False
    os.environ.update({k: str(v) for k, v in ENV.items()})
    return True
