"""The Triton backend of :func:`scanmt.ops.bounded_recurrence` (optional: ``pip install scanmt[gpu]``).

Nothing here imports Triton until a kernel is launched, so the CPU install (no Triton) can import
:mod:`scanmt.ops`.  :mod:`.kernels` holds the kernels, :mod:`.function` the autograd ``Function`` that
launches them.  On the CPU the kernels run only under Triton's interpreter (``TRITON_INTERPRET=1`` in the
environment before the kernels are first imported), which is how the tests check them without a GPU.
"""

from __future__ import annotations

import functools
import importlib.util
import os


@functools.lru_cache(maxsize=None)
def available() -> bool:
    """Whether Triton can be imported (it is not imported here)."""
    return importlib.util.find_spec("triton") is not None


def interpreted() -> bool:
    """Whether Triton's interpreter is on (``TRITON_INTERPRET=1``): the kernels then run on CPU tensors."""
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")
