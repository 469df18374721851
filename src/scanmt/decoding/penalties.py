"""Scoring penalties for beam search (Wu et al. 2016, Section 7).

``lp(Y) = ((5 + |Y|) / 6) ** alpha`` — the length penalty; ``|Y|`` counts the
output tokens including the final ``</s>``.  The final hypothesis score is
``log P(Y|X) / lp(Y)``.
"""

from __future__ import annotations

import torch


def length_penalty(length: torch.Tensor | int | float, alpha: float) -> torch.Tensor | float:
    """``((5 + |Y|) / 6) ** alpha`` (1 when alpha = 0)."""
    if isinstance(length, torch.Tensor):
        return ((5.0 + length.to(torch.float32)) / 6.0) ** alpha
    return ((5.0 + float(length)) / 6.0) ** alpha
