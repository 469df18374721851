"""Random test rows for the ops tests: random, masked, tight, ties and extreme.

Every generator returns float64 NumPy arrays ``(z, u, mask)`` of shape ``[R, J]``
(``mask`` True = may receive attention) whose bounds are feasible: the sum of
``u`` over the usable positions of every row with one is at least 1.
"""

from __future__ import annotations

import os
from typing import Tuple

import numpy as np
from hypothesis import settings

Case = Tuple[np.ndarray, np.ndarray, np.ndarray]

KINDS = ("random", "masked", "tight", "ties", "extreme", "nmt")

#: Hypothesis settings for the property tests.  SCANMT_OPS_EXAMPLES scales them;
#: SCANMT_OPS_RANDOM=1 draws fresh examples instead of the fixed, reproducible ones.
EXAMPLES = int(os.environ.get("SCANMT_OPS_EXAMPLES", "60"))
PROPERTY_SETTINGS = settings(
    max_examples=EXAMPLES, deadline=None, derandomize=os.environ.get("SCANMT_OPS_RANDOM", "0") != "1"
)


def _feasible(z: np.ndarray, u: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Scale up the bounds of rows whose usable bounds sum to less than 1."""
    u = u.copy()
    ok = mask & (z > -np.inf)
    s = np.where(ok, np.minimum(u, 1.0), 0.0).sum(-1)
    for i in np.flatnonzero((s < 1.0) & ok.any(-1)):
        if s[i] > 0 and rng.random() < 0.7:
            u[i] = u[i] * (1.0 / s[i]) * rng.uniform(1.0, 1.5)
        else:
            u[i, rng.choice(np.flatnonzero(ok[i]))] = np.inf
    return u


def make_case(kind: str, R: int, J: int, seed: int) -> Case:
    rng = np.random.default_rng(seed)
    scale = rng.choice([0.1, 1.0, 3.0, 10.0], size=(R, 1))
    z = rng.standard_normal((R, J)) * scale
    mask = np.ones((R, J), dtype=bool)
    # bounds: a mix of loose, binding, zero and unbounded entries
    u = rng.uniform(0.0, 3.0 / J, (R, J)) * rng.choice([1.0, 2.0, 10.0, 1e3], size=(R, 1))
    u[rng.random((R, J)) < 0.1] = 0.0
    u[rng.random((R, J)) < 0.03] = np.inf
    if kind == "masked":
        mask = rng.random((R, J)) < rng.uniform(0.2, 1.0, (R, 1))
        mask[rng.random(R) < 0.1] = False  # fully masked rows
        z[rng.random((R, J)) < 0.05] = -np.inf  # -inf scores act like masked positions
        u = _feasible(z, u, mask, rng)
        # whatever masked positions hold is ignored, even NaN
        z = np.where(mask, z, rng.choice([np.nan, 7.0, -3.0, np.inf]))
        u = np.where(mask, u, rng.choice([np.nan, -5.0, 0.0, np.inf]))
        return z, u, mask
    if kind == "tight":
        # sum(u) = 1 exactly (p = u), or just above 1 (almost every entry capped)
        w = rng.exponential(1.0, (R, J)) * (rng.random((R, J)) < 0.8)
        w[:, 0] += 1e-3
        u = w / w.sum(-1, keepdims=True)
        u *= np.where(rng.random((R, 1)) < 0.5, 1.0, 1.0 + rng.choice([1e-4, 1e-2, 0.2], size=(R, 1)))
    elif kind == "ties":
        z = rng.integers(-2, 3, (R, J)) * rng.choice([0.25, 0.5, 1.0], size=(R, 1))
        u = rng.choice([0.0, 0.1, 0.25, 0.5, 1.0, np.inf], size=(R, J), p=[0.2, 0.2, 0.2, 0.2, 0.1, 0.1])
    elif kind == "extreme":
        big = rng.choice([1e2, 1e3, 1e4], size=(R, 1))
        z = np.where(rng.random((R, 1)) < 0.5, rng.uniform(-big, big, (R, J)), big + rng.standard_normal((R, J)))
        z = np.clip(z, -1e4, 1e4)
        u[rng.random((R, J)) < 0.3] = 0.0
        u = np.where(rng.random((R, J)) < 0.2, 1e-8 * rng.random((R, J)), u)
    elif kind == "nmt":
        # decoder-like bounds u = f - beta with a <sink> column (u = +inf)
        f = rng.integers(1, 4, (R, J)).astype(float)
        beta = f * rng.uniform(0.0, 1.05, (R, J))
        u = np.maximum(f - beta, 0.0)
        u[:, -1] = np.inf
    return z, _feasible(z, u, mask, rng), mask


def margin_csparsemax(z: np.ndarray, u: np.ndarray, p: np.ndarray) -> float:
    """Distance of one row from the nearest breakpoint (for gradcheck)."""
    free = (p > 0) & (p < u)
    if not free.any():
        return 0.0
    tau = np.mean(z[free] - p[free])
    d = np.concatenate([np.abs(z - tau), np.abs(z - tau - u)[np.isfinite(u)]])
    return float(d.min())


def margin_csoftmax(z: np.ndarray, u: np.ndarray, p: np.ndarray) -> float:
    """Relative distance of one row from the nearest cap switch (for gradcheck)."""
    free = p < u
    if not free.any() or p[free].sum() <= 0:
        return 0.0
    m = z[free].max()
    logz = m + np.log(np.exp(z[free] - m).sum()) - np.log(p[free].sum())
    with np.errstate(divide="ignore", invalid="ignore"):
        d = np.abs(z - np.log(u) - logz)
    return float(d[np.isfinite(d)].min(initial=np.inf))
