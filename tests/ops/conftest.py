"""Shared setup for the scanmt.ops tests.

The ops tests need only ``torch``, ``numpy``, ``pytest`` and ``hypothesis``.  If
scanmt is not installed (``pip install -e .``), ``src/`` is put on the path.

Two implementations of the forward passes are tested: the native CPU kernels
(``"native"``, compiled on first use) and the PyTorch algorithms
(``"pytorch"``).  Tests parametrised with ``path`` (see :func:`on_path`) or with
``method="native"`` are skipped, with the reason in the summary, when the
native kernels cannot be built here; set ``SCANMT_OPS_REQUIRE_NATIVE=1`` to make
that a failure instead (e.g. in CI).
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Iterator

import pytest
import torch

try:
    import scanmt.ops  # noqa: F401
except ImportError:  # running from a checkout without installing
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "src"))

from scanmt.ops import _checks, _native  # noqa: E402

#: the two implementations of the forward passes
PATHS = ("native", "pytorch")

#: devices for the tests that take ``device``: the CPU always, CUDA where there is
#: one (off the CPU the ops run their PyTorch algorithms; CI has no GPU, so there
#: the CUDA cases are skipped with this reason)
DEVICES = (
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")),
)


@contextlib.contextmanager
def on_path(path: str) -> Iterator[None]:
    """Run the ops on ``path``: ``"native"`` forces the native kernels (where an op
    has them), ``"pytorch"`` the automatic choice among the PyTorch algorithms."""
    if path == "native":
        with _checks.use_method("native"):
            yield
    elif path == "pytorch":
        with _checks.use_native(False):
            yield
    else:
        raise ValueError(path)


def _native_skip_reason() -> str:
    if _native.get() is not None:
        return ""
    return f"native kernels unavailable: {_native.info()['reason']}"


def pytest_runtest_setup(item: pytest.Item) -> None:
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return
    params = callspec.params
    if params.get("path") == "native" or params.get("method") == "native":
        reason = _native_skip_reason()
        if reason:
            if os.environ.get("SCANMT_OPS_REQUIRE_NATIVE", "0") == "1":
                pytest.fail(reason + " (SCANMT_OPS_REQUIRE_NATIVE=1)")
            pytest.skip(reason)
