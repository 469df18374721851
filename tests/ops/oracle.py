"""Independent float64 NumPy reference implementations (tests only).

One row at a time, written from the papers and sharing no code with
``scanmt.ops``:

* :func:`sparsemax` — sort-based Euclidean projection onto the simplex
  (Martins and Astudillo, 2016, Alg. 1);
* :func:`csparsemax` — the Pardalos–Kovoor breakpoint search with median
  split points, exactly as Algorithm 1 of Malaviya et al. (2018), Appendix A,
  after the change of variables of Eqs. 20–24;
* :func:`csoftmax` — the greedy capping of Martins and Kreutzer (2017),
  in log space;
* ``*_vjp`` — the closed-form backward passes (Proposition 1 for csparsemax,
  Martins and Kreutzer for csoftmax), from the oracle's own solution.

``mask`` (True = may receive attention) drops entries before solving; they
get 0.  A row with no usable entry gives zeros.  The ``*_rows`` helpers map a
function over the rows of 2-D arrays.
"""

from __future__ import annotations

import math
from typing import Callable, Optional, Tuple

import numpy as np

Array = np.ndarray


def _usable(z: Array, mask: Optional[Array]) -> Array:
    ok = z > -np.inf
    if mask is not None:
        ok &= mask
    return ok


def _logsumexp(x: Array) -> float:
    if x.size == 0:
        return -np.inf
    m = x.max()
    if m == -np.inf:
        return -np.inf
    return float(m + np.log(np.exp(x - m).sum()))


# ----------------------------------------------------------------------------
# sparsemax
# ----------------------------------------------------------------------------


def sparsemax(z: Array, mask: Optional[Array] = None) -> Array:
    z = np.asarray(z, dtype=np.float64)
    p = np.zeros_like(z)
    ok = _usable(z, mask)
    if not ok.any():
        return p
    v = z[ok]
    srt = np.sort(v)[::-1]
    cs = np.cumsum(srt)
    k = np.arange(1, v.size + 1)
    kmax = k[1 + k * srt > cs].max()
    tau = (cs[kmax - 1] - 1.0) / kmax
    p[ok] = np.maximum(v - tau, 0.0)
    return p


# ----------------------------------------------------------------------------
# csparsemax: Pardalos and Kovoor (1990) as in the paper's Algorithm 1
# ----------------------------------------------------------------------------


def pardalos_kovoor(a: Array, b: Array, c: Array, d: float) -> Tuple[Array, float]:
    """argmin sum c x^2  s.t.  sum c x = d,  a <= x <= b  (Algorithm 1).

    Returns the solution ``x = max(a, min(b, y))`` and the constant ``y``.

    Two details the listing leaves implicit are made explicit: entries that
    leave the working set with a breakpoint *on* the boundary of
    ``[tau_L, tau_R]`` are still accounted for (as tight at ``b``, tight at
    ``a`` or free), and ``Median`` is the lower median element of the split
    distinct split points, so that it always lies strictly inside the interval
    and the working set shrinks at every step.
    """
    J = a.size
    W = np.ones(J, dtype=bool)
    P = np.concatenate([a, b, [-np.inf, np.inf]])
    tl, tr = -np.inf, np.inf
    s_tight, xi = 0.0, 0.0
    while W.any():
        Ps = np.unique(P)  # sorted; duplicates (ties, u = 0) would stall the median
        tau = Ps[(Ps.size - 1) // 2]
        aw, bw, cw = a[W], b[W], c[W]
        s = (
            s_tight
            + (cw * bw)[bw < tau].sum()
            + (cw * aw)[aw > tau].sum()
            + (xi + cw[(aw <= tau) & (tau <= bw)].sum()) * tau
        )
        if s <= d:
            tl = tau
        if s >= d:
            tr = tau
        P = P[(P >= tl) & (P <= tr)]
        inside = ((tl < aw) & (aw < tr)) | ((tl < bw) & (bw < tr))
        leave = ~inside
        hi = leave & (bw <= tl)  # x_j = b_j on the whole interval
        lo = leave & ~hi & (aw >= tr)  # x_j = a_j
        free = leave & ~hi & ~lo  # a_j <= tau_L and b_j >= tau_R
        s_tight += (cw * bw)[hi].sum() + (cw * aw)[lo].sum()
        xi += cw[free].sum()
        idx = np.flatnonzero(W)
        W[idx[leave]] = False
    y = (d - s_tight) / xi if xi > 0 else tl
    return np.maximum(a, np.minimum(b, y)), float(y)


def csparsemax(z: Array, u: Array, mask: Optional[Array] = None) -> Array:
    z = np.asarray(z, dtype=np.float64)
    u = np.broadcast_to(np.asarray(u, dtype=np.float64), z.shape)
    p = np.zeros_like(z)
    ok = _usable(z, mask)
    if not ok.any():
        return p
    zz = z[ok]
    # p <= 1 on the simplex, so bounds above 1 (and +inf) can be read as 1;
    # rounding noise below 0 is read as 0
    uu = np.clip(u[ok], 0.0, 1.0)
    if uu.sum() <= 1.0:
        p[ok] = uu
        return p
    # shifting z by a constant does not change the solution; it keeps the
    # change of variables well conditioned for |z| up to 1e4
    zz = zz - zz.max()
    # Eqs. 20-24: x = (p - z) / 2, a = -z / 2, b = (u - z) / 2, c = 1, d = (1 - sum z) / 2
    a, b = -zz / 2, (uu - zz) / 2
    x, y = pardalos_kovoor(a, b, np.ones_like(zz), (1.0 - zz.sum()) / 2)
    q = np.clip(zz + 2 * x, 0.0, uu)
    # The sums inside the search lose ~1e-16 * sum|z| (1e-9 at |z| = 1e4, J = 600).
    # Recompute tau on the sets found (free: a < y < b, pinned at u: y >= b),
    # tau = (sum_A z + sum_{A_R} u - 1) / |A|, with a correctly rounded sum.
    free = (a < y) & (y < b)
    if free.any():
        tau = math.fsum([*zz[free], *uu[y >= b], -1.0]) / free.sum()
        q = np.clip(zz - tau, 0.0, uu)
    p[ok] = q
    return p


def csparsemax_tau(z: Array, u: Array, p: Array, mask: Optional[Array] = None) -> float:
    """The threshold of a csparsemax solution, from its free set (nan if none)."""
    ok = _usable(np.asarray(z, dtype=np.float64), mask)
    free = ok & (p > 0) & (p < u)
    if not free.any():
        return float("nan")
    return float(np.mean(z[free] - p[free]))


# ----------------------------------------------------------------------------
# csoftmax: greedy capping of Martins and Kreutzer (2017)
# ----------------------------------------------------------------------------


def csoftmax(z: Array, u: Array, mask: Optional[Array] = None) -> Array:
    z = np.asarray(z, dtype=np.float64)
    u = np.broadcast_to(np.asarray(u, dtype=np.float64), z.shape)
    p = np.zeros_like(z)
    ok = _usable(z, mask)
    if not ok.any():
        return p
    zz = z[ok]
    uu = np.maximum(u[ok], 0.0)
    if np.minimum(uu, 1.0).sum() <= 1.0:
        p[ok] = np.minimum(uu, 1.0)
        return p
    capped = uu <= 0
    while True:
        budget = 1.0 - uu[capped].sum()
        if budget <= 0:  # sum(u) exceeds 1 by a rounding error only
            q = np.where(capped, uu, 0.0)
            break
        logz = _logsumexp(zz[~capped]) - np.log(budget)
        q = uu.copy()
        q[~capped] = np.exp(zz[~capped] - logz)
        viol = ~capped & (q > uu)
        if not viol.any():
            break
        capped |= viol
    p[ok] = q
    return p


# ----------------------------------------------------------------------------
# closed-form backward passes, from the oracle solutions
# ----------------------------------------------------------------------------


def sparsemax_vjp(p: Array, g: Array) -> Array:
    s = p > 0
    if not s.any():
        return np.zeros_like(g)
    return np.where(s, g - g[s].mean(), 0.0)


def csparsemax_vjp(z: Array, u: Array, p: Array, g: Array, mask: Optional[Array] = None) -> Tuple[Array, Array]:
    """Proposition 1.  ``A`` = free entries, ``A_R`` = entries pinned at their bound."""
    z = np.asarray(z, dtype=np.float64)
    u = np.broadcast_to(np.asarray(u, dtype=np.float64), z.shape)
    ok = _usable(z, mask)
    free = ok & (p > 0) & (p < u)
    if free.any():
        m = g[free].mean()
        tau = np.mean(z[free] - p[free])
        pinned = ok & ~free & (z - tau > 0)
    else:  # degenerate (e.g. sum(u) = 1): tau is not unique; m = 0 by convention
        m = 0.0
        pinned = ok & (p > 0) & (p >= u)
    dz = np.where(free, g - m, 0.0)
    du = np.where(pinned, g - m, 0.0)
    return dz, du


def csoftmax_vjp(z: Array, u: Array, p: Array, g: Array, mask: Optional[Array] = None) -> Tuple[Array, Array]:
    """Martins and Kreutzer (2017).  ``A`` = entries strictly below their bound."""
    z = np.asarray(z, dtype=np.float64)
    u = np.broadcast_to(np.asarray(u, dtype=np.float64), z.shape)
    ok = _usable(z, mask)
    A = ok & (p < np.maximum(u, 0.0))
    mass = p[A].sum()
    m = (p[A] * g[A]).sum() / mass if mass > 0 else 0.0
    dz = np.where(A, p * (g - m), 0.0)
    du = np.where(ok & ~A, g - m, 0.0)
    return dz, du


# ----------------------------------------------------------------------------
# row helpers
# ----------------------------------------------------------------------------


def rows(fn: Callable[..., Array], *arrays: Optional[Array]) -> Array:
    """Apply a one-row oracle to every row of 2-D arrays (``None`` passes through)."""
    n = next(a for a in arrays if a is not None).shape[0]
    return np.stack([fn(*[None if a is None else a[i] for a in arrays]) for i in range(n)])


def kkt_violation_csparsemax(z: Array, u: Array, p: Array, mask: Optional[Array] = None) -> float:
    """Largest violation of the optimality conditions of one csparsemax row."""
    z = np.asarray(z, dtype=np.float64)
    u = np.clip(np.broadcast_to(np.asarray(u, dtype=np.float64), z.shape), 0.0, None)
    ok = _usable(z, mask)
    if not ok.any():
        return float(np.abs(p).max())
    zz, uu, pp = z[ok], u[ok], p[ok]
    err = max(abs(pp.sum() - 1.0), float(np.maximum(-pp, 0).max()), float(np.maximum(pp - uu, 0).max()))
    if np.minimum(uu, 1.0).sum() <= 1.0:
        return err
    # stationarity: some tau has p = clip(z - tau, 0, u).  Any free entry gives tau;
    # without one, tau lies between the scores of the zero entries and z - u of
    # the entries at their bound: try both ends of that interval
    free = (pp > 1e-9) & (pp < uu - 1e-9)
    if free.any():
        taus = [float(np.mean(zz[free] - pp[free]))]
    else:
        lo = np.max(zz[(pp <= 1e-9) & (uu > 1e-9)], initial=-np.inf)
        hi = np.min((zz - uu)[pp >= uu - 1e-9], initial=np.inf)
        taus = [t for t in (lo, hi) if np.isfinite(t)] or [0.0]
    return max(err, min(float(np.abs(pp - np.clip(zz - t, 0.0, uu)).max()) for t in taus))
