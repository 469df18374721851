"""csoftmax: softmax with upper bounds (Martins and Kreutzer, 2017).

``csoftmax(z, u) = argmin KL(p || softmax(z))  s.t.  p in simplex, p <= u``.

The KKT conditions give ``p_j = min(u_j, exp(z_j) / Z)`` where, with ``A`` the
set of entries strictly below their bound,
``Z = sum_{j in A} exp(z_j) / (1 - sum_{j not in A} u_j)``.  An entry is capped
iff its key ``z_j - log u_j`` is at least ``t = log Z``, so the capped set is a
prefix of the entries sorted by key (``u_j = 0`` first; ``u_j >= 1`` never binds,
so ``u`` is read as ``min(u, 1)`` and ``+inf`` is allowed).  ``t`` is found
exactly, on ``z - max(z)``, by one of three algorithms (the choice is speed):

* ``_logz_dense`` (small CPU inputs): ``sum_j min(u_j, exp(z_j - t))`` at every
  key at once (``O(J^2)`` per row); the smallest key where it drops below 1
  splits capped from free entries and ``t`` follows in closed form.
* ``_logz_iter`` (larger CPU inputs; no sort): the greedy capping of Martins and
  Kreutzer.  Compute ``Z`` from the uncapped entries and the remaining budget,
  cap every entry with ``exp(z_j) / Z > u_j``, repeat until none violates.
  Capping violators can only lower ``Z``, so a capped entry stays capped and the
  loop ends (in at most J rounds; 1 to 6 on random data) at the KKT point.  Rows
  not settled after ``MAX_ROUNDS`` rounds are finished with the sort.
* ``_logz_sort`` (other devices, and the fallback): sort by key, take the prefix
  sums of ``u`` and the suffix ``logcumsumexp`` of ``z``, and count the sorted
  entries that violate their bound when all before them are capped (a monotone
  test); no data-dependent control flow.

All work on ``z - max z``.  Where the mass sits far below a capped maximum (``t < -8``
in float32, ``-1e6`` in float64, e.g. ``|z| ~ 1e4``, or ``z = [1e30, 0.3, 0]``),
``z - max(z)`` rounds the entries that carry it too coarsely: those rows are solved
again in float64, from ``max(z)``, in frames centred ever closer at the threshold
(:func:`._checks.recentre`), by bisection on ``sum_j min(u_j, exp(x_j - t)) = 1``
evaluated directly (``_logz_bisect``; the sort's keys ``z - log u`` lose ``log u`` at
``|z| ~ 1e16``).  Finding such rows costs one host synchronisation.

Backward (Martins and Kreutzer, 2017; the talk states it):
``m = sum_{A} p_j dp_j / sum_{A} p_j``, ``dz = 1[A] p (dp - m)`` and
``du = 1[not A] (dp - m)`` over unmasked entries (``m = 0`` if ``A`` carries no
mass); ``A`` is read from ``p < u`` with the caller's ``u``, so a bound above 1
is never counted as binding.
"""

from __future__ import annotations

from functools import partial
from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _checks, _function

#: Capping rounds before the remaining rows are finished with the sort.
MAX_ROUNDS = 20
#: CPU inputs with ``rows * J * J`` at most this use ``_logz_dense``.
DENSE_MAX_WORK = 1 << 16
#: Larger CPU inputs with at least this many elements use the greedy capping.
ITER_MIN_NUMEL = 0


def _logz_sort(zs: Tensor, uc: Tensor) -> Tensor:
    """Exact ``log Z`` per row by sorting.

    ``zs``: ``[R, J]`` shifted scores (``-inf`` = unusable); ``uc``: bounds in
    ``[0, 1]`` (0 where unusable).  Rows must satisfy ``sum(uc) > 1``.
    """
    R, J = zs.shape
    ninf = torch.full((), float("-inf"), dtype=zs.dtype, device=zs.device)
    key = zs - torch.log(uc)  # u = 0 -> +inf (capped first); unusable -> -inf (never)
    key = torch.where(zs > float("-inf"), key, ninf)
    ks, idx = torch.sort(key, dim=-1, descending=True)
    zsrt = zs.gather(-1, idx)
    budget = 1.0 - uc.gather(-1, idx).cumsum(-1)  # budget after capping the first k+1
    # lse over the sorted entries after position k (k + 1 capped)
    tail = torch.logcumsumexp(zsrt.flip(-1), dim=-1).flip(-1)
    after = torch.cat([tail[:, 1:], ninf.expand(R, 1)], -1)
    # entry k is capped iff it still violates with entries 0..k capped
    tiny = torch.finfo(zs.dtype).tiny
    capped = (budget > 0) & (after - ks < torch.log(budget.clamp(min=tiny)))
    c = capped.sum(-1, keepdim=True)  # number of capped entries (a prefix)
    lse_all = torch.logsumexp(zs, -1, keepdim=True)
    lse = torch.cat([lse_all, after], -1).gather(-1, c)
    b = torch.cat([torch.ones((R, 1), dtype=zs.dtype, device=zs.device), budget], -1).gather(-1, c)
    return lse - torch.log(b.clamp(min=tiny))


def _logz_dense(zs: Tensor, uc: Tensor, k: _checks.Consts) -> Tensor:
    """``log Z`` per row for small inputs: ``phi(t) = sum_j min(u_j, exp(z_j - t))`` is
    evaluated at every candidate ``t = z_j - log u_j`` at once (``O(J^2)`` work per
    row).  With ``hi`` the smallest candidate where ``phi < 1``, the entries with
    ``z_j - log u_j >= hi`` are capped and the others free, and
    ``log Z = log sum_free exp(z) - log(1 - sum_capped u)``.  Gives ``-inf`` where no
    budget is left (``sum(u)`` within rounding of 1: ``p = u``) and ``nan`` where the
    free mass underflows (the caller falls back to the iteration).
    """
    zc = torch.clamp(zs, min=k.fmin4)  # masked entries: finite, with u = 0
    key = zc - torch.log(uc)  # u = 0 (and masked): +inf, capped from the start
    phi = torch.minimum(torch.sub(zc.unsqueeze(2), key.unsqueeze(1)).exp_(), uc.unsqueeze(2)).sum(1)
    hi = torch.where(torch.ge(phi, k.one), k.pinf, key).amin(-1, keepdim=True)
    capped = torch.ge(key, hi, out=torch.empty_like(key))
    e = torch.exp(zs)
    free_mass = torch.addcmul(e, e, capped, value=-1.0).sum(-1, keepdim=True)
    budget = (uc * capped).sum(-1, keepdim=True).neg_().add_(k.one)
    t = torch.log(free_mass).sub_(torch.log(budget))
    t = torch.where(torch.ge(free_mass, k.underflow), t, k.nan)
    return torch.where(torch.gt(budget, k.zero), t, k.ninf)


#: halvings of :func:`_logz_bisect` between two convergence tests off the CPU: each test reads a value
#: back to the host, which waits for the GPU; a training step of a bounded Transformer on real batches
#: made about 50 of them per csoftmax call when tested after every halving (benchmarks/op_launches.py)
BISECT_CHECK_EVERY = 8


def _logz_bisect(x: Tensor, B: Tensor, uc: Tensor, check_every: Optional[int] = None) -> Tensor:
    """``log Z`` of recentred rows (:func:`._checks.recentre`, ``x`` in ``[-B, B]``, the root in
    it), by bisection on ``phi(t) = sum_j min(u_j, exp(x_j - t))``, evaluated directly (every
    term is exact to rounding at any ``t``; the sort's keys ``x - log u`` are not, once
    ``ulp(x)`` exceeds ``|log u|``), then in closed form from the capped and free sets there:
    ``log Z = logsumexp_free(x) - log(1 - sum_capped u)``.  For the rows whose threshold lies
    far below their maximum (``polish_at``).

    The bracket is tested for convergence after every ``check_every`` halvings: by default after
    every one on the CPU, and after every :data:`BISECT_CHECK_EVERY` elsewhere (the halvings past
    convergence only narrow a bracket that is already within ``4 eps`` of the root).
    """
    lo, hi = -B, B.clone()
    tol = torch.finfo(x.dtype).eps * 4
    every = check_every or (1 if x.device.type == "cpu" else BISECT_CHECK_EVERY)
    for i in range(2200):  # enough to halve 2 * 1.8e308 down to eps
        mid = (lo + hi) * 0.5
        above = torch.ge(torch.minimum(torch.exp(x - mid), uc).sum(-1, keepdim=True), 1.0)
        lo, hi = torch.where(above, mid, lo), torch.where(above, hi, mid)
        if (i + 1) % every == 0 and not bool(
            torch.gt(hi - lo, tol * torch.maximum(hi.abs(), torch.ones_like(hi))).any()
        ):
            break
    # capped for every t in [lo, hi] (u = 0 included: key +inf); an entry at its bound
    # within the bracket counts as free (p is continuous there)
    capped = torch.gt(x - torch.log(uc), hi)
    budget = 1.0 - torch.where(capped, uc, 0.0).sum(-1, keepdim=True)
    t = torch.logsumexp(torch.where(capped, float("-inf"), x), -1, keepdim=True) - torch.log(budget)
    return torch.minimum(torch.maximum(t.nan_to_num(nan=0.0), lo), hi)


def _logz_iter(zs: Tensor, uc: Tensor, live: Tensor, k: _checks.Consts) -> Tensor:
    """Exact ``log Z`` per row by greedy capping (see the module docstring).

    Works with ``E = exp(z - max z)`` and float 0/1 masks only: entry ``j`` violates
    its bound iff ``E_j * budget / S > u_j``, with ``S`` the sum of ``E`` over the
    uncapped entries.  Rows where ``S`` underflows (every entry within ~70 of the
    maximum is capped) are finished with the sort.  ``-inf`` where the budget is
    used up (``sum(u)`` within rounding of 1: ``p = u``).
    """
    ec = torch.exp(zs).mul_(torch.sign(uc))  # u = 0 entries are capped from the start
    budget = torch.ones((zs.shape[0], 1), dtype=zs.dtype, device=zs.device)
    viol = torch.empty_like(zs)
    for _ in range(MAX_ROUNDS):
        s = ec.sum(-1, keepdim=True)
        torch.gt(ec * (budget / s), uc, out=viol)
        if not bool(viol.amax() > 0):
            break
        budget = budget - (uc * viol).sum(-1, keepdim=True)
        ec.addcmul_(ec, viol, value=-1.0)
    else:
        s = ec.sum(-1, keepdim=True)
        torch.gt(ec * (budget / s), uc, out=viol)
    t = torch.where(torch.gt(budget, k.zero), torch.log(s) - torch.log(budget), k.ninf)
    # rows not settled, or whose remaining mass underflowed: sort them
    redo = torch.gt(viol.amax(-1, keepdim=True), k.zero).logical_or_(torch.lt(s, k.underflow))
    redo = redo.logical_and_(live).reshape(-1)
    if bool(redo.any()):
        rows = redo.nonzero().reshape(-1)
        t[rows] = _logz_sort(zs[rows], uc[rows])
    return t


class CSoftmaxFunction(_function.TransformFunction):
    """Autograd function for csoftmax on tensors already broadcast by the caller."""

    op_name, kernel = "csoftmax", "csoftmax_forward"  # the kernel's aux output: capped
    bound_cap, p_weighted = 1.0, True

    @classmethod
    def _solve(cls, z2: Tensor, zmax: Tensor, b: Optional[_checks.Bounds], k: _checks.Consts) -> _function.Solved:
        assert b is not None
        live = torch.gt(b.usum, k.one)  # rows with sum(u) <= 1 (tight, fully masked) get p = u
        zs = _checks.shift(z2, zmax, k)
        R, J = zs.shape
        method = _checks.choose_method(zs, max(R * J * J, 1), DENSE_MAX_WORK, ITER_MIN_NUMEL)
        if method == "dense":
            t = _logz_dense(zs, b.uc, k)
        elif method == "iter":
            t = _logz_iter(zs, b.uc, live, k)
        else:
            t = _logz_sort(zs, b.uc)
        # the dense path's free mass underflowed (nan), or its capped set took the whole
        # budget (-inf: p = u would then overshoot where the others have room): iterate
        if method == "dense" and bool(torch.isnan(t).logical_or_(torch.eq(t, k.ninf)).logical_and_(live).any()):
            t = _logz_iter(zs, b.uc, live, k)
        solved = torch.gt(t, k.ninf).logical_and_(live)
        # exact in the frame of zs, except where zs = z - max(z) rounds coarsely (the mass
        # sits far below a capped maximum): those rows are solved again in frames centred at t
        far = torch.lt(t, -k.polish_at).logical_and_(solved).reshape(-1)
        p_far = None
        if bool(far.any()):
            rows = far.nonzero().reshape(-1)
            z_f, uc_f = z2[rows], b.uc[rows].double()
            # from max(z), with a bound that holds everything: the sorted keys' decisions err
            # by the gaps between the scores there, not by eps times them
            # (twice the largest |z - max z|, which is rounded in zs)
            bound = torch.where(z_f > k.ninf, zs[rows].abs(), k.zero).amax(-1, keepdim=True).double().mul_(2.0)
            x, t_x = _checks.recentre(z_f, zmax[rows], bound, 64.0, partial(_logz_bisect, uc=uc_f))
            p_far = torch.minimum(x.sub_(t_x).exp_(), uc_f).to(zs.dtype)
        # unsolved rows: exp(z - fmin) = inf, p = u
        p = torch.minimum(zs.sub_(torch.where(solved, t, k.fmin)).exp_(), b.uc)
        if p_far is not None:
            p[rows] = p_far
        # capped for the backward pass: the bound binds (u = 0 included)
        notcapped = _checks.gt_float(b.uv, p)
        if b.usable is None:
            capped = notcapped.neg_().add_(k.one)
        else:
            capped = torch.addcmul(b.usable, b.usable, notcapped, value=-1.0)
        return p, (p, capped)

    @staticmethod
    def _free_set(p: Tensor, capped: Tensor) -> Tuple[Tensor, Optional[Tensor]]:  # type: ignore[override]
        return torch.addcmul(p, p, capped, value=-1.0), capped  # p on the uncapped set A, 0 elsewhere


@_function.constrained_doc(
    "Constrained softmax: ``argmin KL(p || softmax(z))`` s.t. ``p`` in the simplex, ``p <= u``."
)
def csoftmax(z: Tensor, u, dim: int = -1, mask: Optional[Tensor] = None, *, validate: bool = True) -> Tensor:
    return CSoftmaxFunction.transform(z, u, dim, mask, validate)
