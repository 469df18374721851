"""csparsemax: sparsemax with upper bounds (Malaviya, Ferreira and Martins, 2018).

``csparsemax(z, u) = argmin ||p - z||^2  s.t.  p in simplex, p <= u``.

The KKT conditions (paper, Appendix A.1) give ``p_j = clip(z_j - tau, 0, u_j)``
with the scalar ``tau`` fixed by ``sum(p) = 1``, i.e. ``tau`` is the root of

    f(tau) = sum_j clip(z_j - tau, 0, u_j) - 1
           = sum_j relu(z_j - tau) - sum_j relu(z_j - u_j - tau) - 1,

a non-increasing piecewise-linear function with breakpoints ``z_j`` and
``z_j - u_j``.  Bounds are read as ``min(u, 2)``: a bound above 1 never binds
(``p <= 1`` on the simplex), ``u = +inf`` becomes finite, and, unlike ``min(u,
1)``, the cap leaves ``tau`` unique when one entry takes all the mass.  ``tau``
is found exactly by one of three algorithms (same results; the choice is speed):

* ``_dense`` (small CPU inputs): ``f`` at all ``2J`` breakpoints at once
  (``O(J^2)`` per row in a dozen tensor ops; per-op overhead dominates small
  inputs).  The breakpoints around the sign change of ``f`` bound a linear piece;
  interpolation gives ``tau``.
* ``_tau_newton`` (larger CPU inputs; no sort): safeguarded Newton's method.  One
  pass over ``[z, z - u]`` gives ``f(tau)`` and the counts ``#{z_j > tau}`` and
  ``#{z_j - u_j > tau}``, whose difference is the number of free entries, i.e.
  minus the slope of ``f`` just right of ``tau``.  A bracket ``[lo, hi]`` with
  ``f(lo) >= 0 >= f(hi)`` is kept; a Newton step is taken when it lands inside
  the bracket and a bisection step otherwise (``f`` is not convex: plain Newton
  can cycle).  Both counts are monotone in ``tau``, so when they are equal at two
  consecutive iterates no breakpoint lies between them, ``f`` is linear there and
  the Newton step landed on the root: the row is done.  Done rows leave the
  working set, so the cost follows the average number of steps (about 3 on
  decoder-like bounds, 5 to 10 when most of the support is capped), not the
  worst row's.  The last few rows, or rows still running after ``MAX_STEPS``
  steps, are solved by the sort.
* ``_tau_sort`` (other devices, and the fallback): sort the ``2J`` breakpoints,
  accumulate the number of free entries and the sums of ``z`` (free) and ``u``
  (capped) across them, and solve the linear piece where ``f`` changes sign.
  This is the breakpoint search of Pardalos and Kovoor (paper, Appendix A.3)
  with a sort in place of median selection; no data-dependent control flow,
  hence no host synchronisation.

Each ends with one *Newton finish* on the piece found, ``tau <- tau + (sum_j
clip(z_j - tau, 0, u_j) - 1) / #free``, computed from ``x = z - tau`` without
cancellation, so that ``sum(p) = 1`` to rounding.  All work on ``z - max z``, exact
near the maximum.  Where ``tau`` lies far below it (``tau < -8`` in float32, ``-1e6``
in float64: the top entries capped and the mass far below them, ``|z| ~ 1e4``, or
``z = [1e30, 0.3, 0]``), ``z - max(z)`` rounds the entries near ``tau`` too coarsely:
those rows are solved again by the sort in float64 frames centred ever closer at
``tau`` (:func:`._checks.recentre`), then finished there.  Finding such rows costs one
host synchronisation.

Backward (paper, Proposition 1): with the free set ``A = {j : 0 < p_j < u_j}``,
the capped set ``A_R = {j : p_j = u_j, z_j > tau}`` (this includes entries with
``u_j = 0`` that would otherwise be positive) and ``m = mean_{A}(dp)`` (``m = 0``
if ``A`` is empty): ``dz = 1[A] (dp - m)`` and ``du = 1[A_R] (dp - m)``.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _checks, _function

#: Newton/bisection steps before the remaining rows are finished by the sort.
MAX_STEPS = 60
#: CPU inputs with ``rows * J * 2J`` at most this use ``_dense``.
DENSE_MAX_WORK = 1 << 17
#: Larger CPU inputs with at least this many elements use ``_tau_newton``.
ITER_MIN_NUMEL = 2048
#: ``_tau_newton`` sorts the last rows once at most this many are left (after 4
#: steps), if they are at most ``SORT_TAIL_MAX_J`` long.
SORT_TAIL_ROWS = 4
SORT_TAIL_MAX_J = 128


def _dense(z2: Tensor, uc: Tensor, k: _checks.Consts) -> Tensor:
    """``tau`` for small inputs, up to rounding: ``f`` is evaluated at all ``2J``
    breakpoints at once (``O(J^2)`` work per row, a dozen tensor ops).  With ``lo``
    the largest breakpoint where ``f >= 0`` and ``hi`` the smallest where ``f < 0``,
    ``f`` is linear on ``[lo, hi]`` and ``tau = lo + f(lo) (hi - lo) / (f(lo) - f(hi))``
    (nan where no breakpoint has ``f >= 0``, i.e. ``sum(u)`` exceeds 1 by rounding
    only: the caller then sets ``p = u``).  Works on the shifted scores; the
    Newton finish makes it exact.
    """
    zc = torch.clamp(z2, min=k.fmin4)  # masked entries: finite, far below everything
    bp = torch.cat([zc, zc - uc], dim=-1)  # [R, 2J]
    x = torch.sub(zc.unsqueeze(2), bp.unsqueeze(1)).relu_()  # [R, J, 2J]
    fp1 = torch.minimum(x, uc.unsqueeze(2)).sum(1)  # f + 1 at each breakpoint
    ge = torch.ge(fp1, k.one)
    # f is non-increasing in the breakpoint: f(lo) is the smallest f >= 0, f(hi) the largest < 0
    lo = torch.where(ge, bp, k.ninf).amax(-1, keepdim=True)
    hi = torch.where(ge, k.pinf, bp).amin(-1, keepdim=True)
    f_lo = torch.where(ge, fp1, k.pinf).amin(-1, keepdim=True)
    f_hi = torch.where(ge, k.ninf, fp1).amax(-1, keepdim=True)
    return (hi - lo).mul_(f_lo - k.one).div_(f_lo - f_hi).add_(lo)


def _tau_sort(zs: Tensor, uc: Tensor) -> Tensor:
    """``tau`` per row by sorting the ``2J`` breakpoints.

    ``zs``: ``[R, J]`` scores (``-inf`` = unusable), ``uc``: bounds in ``[0, 2]`` (0 where
    unusable).  Rows must satisfy ``sum(uc) > 1``.  ``f`` is -1 at the largest breakpoint
    and grows by ``n (v_k - v_{k+1})`` between consecutive ones, ``n`` the number of free
    entries there: a sum of nonnegative terms, so no cancellation, whatever the magnitude
    of the scores (the sums of ``z`` over the free entries, minus ``n v``, cancel at 1e30);
    and ``f + 1`` lies between the sum of the bounds of the capped entries and that of all
    entries above (which keeps the rise of an entry right where ``z - u`` rounds).
    """
    R, J = zs.shape
    fmin = torch.finfo(zs.dtype).min
    usable = zs > float("-inf")
    # breakpoints: z_j (entry j becomes free as tau decreases past it) and
    # z_j - u_j (entry j becomes capped); unusable entries sort last with no effect
    vals = torch.cat([zs, zs - uc], dim=-1).clamp(min=fmin)
    one = usable.to(zs.dtype)
    d_n = torch.cat([one, -one], dim=-1)
    d_u = torch.cat([torch.zeros_like(uc), uc], dim=-1)
    v, idx = torch.sort(vals, dim=-1, descending=True)
    n = d_n.gather(-1, idx).cumsum(-1)  # free entries just below each breakpoint
    # f at each breakpoint (non-decreasing along the sorted order); a gap with n = 0 adds 0
    rise = torch.where(n[:, :-1] != 0, n[:, :-1] * (v[:, :-1] - v[:, 1:]), torch.zeros((), dtype=zs.dtype))
    f = torch.cat([torch.full((R, 1), -1.0, dtype=zs.dtype, device=zs.device), rise.cumsum(-1).sub_(1.0)], -1)
    # at least the bounds of the capped entries and at most those of all entries above: where
    # z - u rounds (u below ulp(z)), the rise between z and z - u is not u
    d_above = torch.cat([uc, torch.zeros_like(uc)], dim=-1)
    f = torch.minimum(f, d_above.gather(-1, idx).cumsum(-1).sub_(1.0))
    f = torch.maximum(f, d_u.gather(-1, idx).cumsum(-1).sub_(1.0))
    kk = (f < 0).sum(-1, keepdim=True)  # first breakpoint with f >= 0 (always >= 1: f(max z) = -1)
    kk = kk.clamp(1, 2 * J - 1)
    # the root lies in [v_k, v_{k-1}], where f falls with slope -n from f(v_{k-1}) < 0
    km1 = kk - 1
    n_piece = n.gather(-1, km1)
    lo, hi = v.gather(-1, kk), v.gather(-1, km1)
    tau = hi + f.gather(-1, km1) / n_piece.clamp(min=1.0)
    # a flat piece (no free entry) holds the root only where rounding merged breakpoints
    # (z and z - u at |z| ~ 1e30): f steps up at its lower end
    return torch.where(n_piece > 0, torch.minimum(torch.maximum(tau, lo), hi), lo)


def _tau_newton(zs: Tensor, uc: Tensor, usable: Optional[Tensor], live: Tensor, k: _checks.Consts) -> Tensor:
    """``tau`` per row by safeguarded Newton steps (see the module docstring).

    Only rows with ``live`` (``sum(uc) > 1``) are solved; the others get
    ``tau = 0`` (the caller overwrites them).  ``usable`` is the 0/1 mask of
    ``zs > -inf`` (``None``: all).  Done rows leave the working set.
    """
    R, J = zs.shape
    dt, dev = zs.dtype, zs.device
    tau_out = torch.zeros((R, 1), dtype=dt, device=dev)
    idx = live.reshape(-1).nonzero().reshape(-1)
    if idx.numel() == 0:
        return tau_out
    zs_a, uc_a = (zs, uc) if idx.numel() == R else (zs.index_select(0, idx), uc.index_select(0, idx))
    uc_a = uc_a.contiguous()
    # both halves of f in one pass: zb = [z, z - u] (one row of length 2J)
    zb = torch.cat([zs_a, zs_a - uc_a], dim=1)
    # bracket: hi = max z = 0 (f = -1); lo = the smallest z - u over the usable entries
    # (all capped: f = sum u - 1 >= 0), as -max(u - z) with unusable entries made
    # finite and zeroed
    w = (uc_a - zs_a).clamp_(max=torch.finfo(dt).max)
    if usable is not None:
        w.mul_(usable if idx.numel() == R else usable.index_select(0, idx))
    hi = torch.zeros((idx.numel(), 1), dtype=dt, device=dev)
    lo = w.amax(-1, keepdim=True).neg_()
    tau = torch.maximum(lo, hi - k.one)  # the sparsemax lower bound, where it is one
    buf = torch.empty_like(zb)
    active = torch.ones(idx.numel(), dtype=torch.bool, device=dev)
    c_prev: Optional[Tensor] = None
    was_newton: Optional[Tensor] = None
    for step in range(MAX_STEPS + 1):
        Ra = zb.shape[0]
        x = torch.sub(zb, tau, out=buf[:Ra]).relu_()
        # f(tau) + 1 = sum clip(z - tau, 0, u) = sum min(relu(z - tau), u): no cancellation
        # (sum relu(z - tau) - sum relu(z - u - tau) loses the Newton steps to rounding)
        fp1 = torch.minimum(x[:, :J], uc_a).sum(-1, keepdim=True)
        c = x.sign_().view(Ra, 2, J).sum(-1)  # [Ra, 2]: #{z > tau}, #{z - u > tau}
        if c_prev is not None:
            # the last Newton step stayed on one linear piece of f: tau is its root
            done = torch.eq(c, c_prev).all(-1).logical_and_(was_newton.reshape(-1)).logical_and_(active)
            if bool(done.any()):
                tau_out[idx[done]] = tau[done]
                active.logical_and_(done.logical_not_())
                n_active = int(active.sum())
                if n_active == 0:
                    return tau_out
                if n_active <= SORT_TAIL_ROWS and step >= 4 and J <= SORT_TAIL_MAX_J:
                    idx = idx[active]
                    break  # a handful of slow rows: one sort is cheaper than more steps
                # finished rows keep iterating harmlessly until the working set halves
                if 2 * n_active <= Ra:
                    keep = active.nonzero().reshape(-1)
                    idx, zb, uc_a = idx.index_select(0, keep), zb.index_select(0, keep), uc_a.index_select(0, keep)
                    state = torch.cat([tau, lo, hi, fp1, c], 1).index_select(0, keep)
                    tau, lo, hi, fp1, c = state[:, :1], state[:, 1:2], state[:, 2:3], state[:, 3:4], state[:, 4:]
                    active = torch.ones(n_active, dtype=torch.bool, device=dev)
        if step == MAX_STEPS:
            idx = idx[active]
            break
        f = fp1.sub_(k.one)
        nfree = c[:, :1] - c[:, 1:]  # number of free entries just right of tau
        pos = torch.ge(f, k.zero)
        lo = torch.where(pos, tau, lo)
        hi = torch.where(pos, hi, tau)
        newton = f.div_(nfree.clamp(min=k.one)).add_(tau)
        ok = torch.gt(nfree, k.zero).logical_and_(
            torch.gt(newton, lo).logical_and_(torch.lt(newton, hi)).logical_or_(torch.eq(newton, tau))
        )
        tau = torch.where(ok, newton, (lo + hi).mul_(k.half))
        c_prev, was_newton = c, ok
    # the last few slow rows, or rows not settled after MAX_STEPS steps: sort them
    tau_out[idx] = _tau_sort(zs.index_select(0, idx), uc.index_select(0, idx))
    return tau_out


def _finish(x: Tensor, uc: Tensor, k: _checks.Consts) -> Tensor:
    """One Newton step on ``x = z - t``, for ``t`` on (or within rounding of) the
    linear piece of ``f`` that holds the root; returns ``z - tau`` (in place).

    The free set is read off at ``t`` and ``tau - t = (sum_j clip(x_j, 0, u_j) - 1) /
    #{0 < x_j < u_j}``.  Computed from ``x`` rather than from ``t``, so entries near
    ``tau`` keep full precision when ``x`` comes from a frame centred near ``tau``.
    """
    free = _checks.gt_float(x, k.zero).mul_(_checks.gt_float(uc, x))
    f = torch.minimum(x.relu(), uc).sum(-1, keepdim=True).sub_(k.one)
    return x.sub_(f.div_(free.sum(-1, keepdim=True).clamp_(min=k.one)))


class CSparsemaxFunction(_function.TransformFunction):
    """Autograd function for csparsemax on tensors already broadcast by the caller."""

    op_name, kernel = "csparsemax", "csparsemax_forward"  # the kernel's aux output: x = z - tau
    # bounds read as min(u, 2): a bound above 1 never binds, and with a cap above 1
    # (unlike min(u, 1)) an entry that takes all the mass still has a unique tau
    bound_cap = 2.0

    @staticmethod
    def _saved_by_kernel(p: Tensor, aux: Optional[Tensor], u2: Optional[Tensor]) -> Tuple[Tensor, ...]:
        assert aux is not None and u2 is not None
        # x = z - tau is -inf at unusable positions, so the backward pass
        # needs u there neither masked nor clamped
        return aux, u2

    @classmethod
    def _solve(cls, z2: Tensor, zmax: Tensor, b: Optional[_checks.Bounds], k: _checks.Consts) -> _function.Solved:
        assert b is not None
        live = torch.gt(b.usum, k.one)  # rows with sum(u) <= 1 (tight, fully masked) get p = u
        R, J = z2.shape
        zs = _checks.shift(z2, zmax, k)
        method = _checks.choose_method(zs, max(R * J * J * 2, 1), DENSE_MAX_WORK, ITER_MIN_NUMEL)
        if method == "dense":
            tau = _dense(zs, b.uc, k)
            # nan where no breakpoint has f >= 0: sum(u) exceeds 1 by rounding only, or the
            # breakpoints z - u rounded away (|z| ~ 1e30): the sort decides
            nan = torch.isnan(tau).logical_and_(live).reshape(-1)
            if bool(nan.any()):
                tau[nan] = _tau_sort(zs[nan], b.uc[nan])
        elif method == "iter":
            tau = _tau_newton(zs, b.uc, b.usable, live, k)
        else:
            tau = _tau_sort(zs, b.uc)
        # where tau lies far below max(z), zs = z - max(z) may have rounded the entries near
        # it: solve those rows again in frames centred at tau
        far = torch.lt(tau, -k.polish_at).logical_and_(live).reshape(-1)
        x_far = None
        if bool(far.any()):
            rows = far.nonzero().reshape(-1)
            # (tau again by the sort: where breakpoints merged in zs's rounding, the others
            # may interpolate across the lost rise; the sort keeps it, see _tau_sort)
            z_f, uc_f, tau_f = z2[rows], b.uc[rows].double(), _tau_sort(zs[rows], b.uc[rows])
            scale = torch.where(z_f > k.ninf, zs[rows].abs(), k.zero).amax(-1, keepdim=True) + zmax[rows].abs()
            # the sort errs by at most 4 J eps times the magnitudes it worked with
            bound = (scale + tau_f.abs()).mul_(4.0 * J * torch.finfo(zs.dtype).eps)
            xr, t = _checks.recentre(z_f, zmax[rows] + tau_f, bound, 4.0, lambda xf, B: _tau_sort(xf, uc_f))
            x_far = _finish(_finish(xr - t, uc_f, k), uc_f, k).to(zs.dtype)
        x = _finish(zs.sub_(torch.where(live, tau, k.fmin).nan_to_num_(nan=k.fmin_py).clamp_(min=k.fmin)), b.uc, k)
        if x_far is not None:
            x[rows] = x_far
        p = torch.clamp(x, min=k.zero, max=b.uc)
        return p, (x, b.uv)

    @staticmethod
    def _free_set(x: Tensor, uv: Tensor) -> Tuple[Tensor, Optional[Tensor]]:  # type: ignore[override]
        """From ``x = z - tau``: the free set ``0 < z_j - tau < u_j`` and the capped set
        ``z_j - tau >= u_j`` (and ``> 0``)."""
        pos = torch.gt(x, 0.0, out=torch.empty_like(x))  # z_j > tau
        free = torch.gt(uv, x, out=torch.empty_like(x)).mul_(pos)
        return free, pos.sub_(free)


@_function.constrained_doc(
    "Constrained sparsemax: ``argmin ||p - z||^2`` s.t. ``p`` in the simplex, ``p <= u``."
)
def csparsemax(z: Tensor, u, dim: int = -1, mask: Optional[Tensor] = None, *, validate: bool = True) -> Tensor:
    return CSparsemaxFunction.transform(z, u, dim, mask, validate)
