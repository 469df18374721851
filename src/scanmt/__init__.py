"""scanmt: sparse and constrained attention for neural machine translation.

Layers (imports point downward only)::

    cli → experiments → training → decoding → model → data → metrics → ops

``scanmt.ops`` is usable on its own (sparsemax, csoftmax, csparsemax).
"""

__version__ = "0.1.0"
