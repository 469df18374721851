"""Shared setup for the scanmt.ops tests.

The ops tests need only ``torch``, ``numpy``, ``pytest`` and ``hypothesis``.  If
scanmt is not installed (``pip install -e .``), ``src/`` is put on the path.
"""

from __future__ import annotations

import os
import sys

try:
    import scanmt.ops  # noqa: F401
except ImportError:  # running from a checkout without installing
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "src"))
