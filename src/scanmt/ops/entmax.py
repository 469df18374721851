"""alpha-entmax and its constrained form: ``entmax15``, ``entmax_bisect`` and ``centmax``.

Definitions
-----------
With the Tsallis entropy ``H_a(p) = sum_j (p_j - p_j^a) / (a (a - 1))`` (``a > 1``;
Shannon's entropy at ``a -> 1``), alpha-entmax is (Peters, Niculae and Martins, 2019;
Blondel et al.'s Fenchel-Young losses)

    entmax_a(z) = argmax_{p in simplex}  p . z + H_a(p),

and its constrained form, with per-position upper bounds ``u``, is

    centmax_a(z, u) = argmax_{p in simplex, p <= u}  p . z + H_a(p).

``a = 1`` is softmax / csoftmax (``argmin KL(p || softmax(z))``, with or without ``p <= u``),
``a = 2`` is sparsemax / csparsemax (``argmin ||p - z||^2``): the existing ops are the special
cases, and ``centmax`` with a Python number ``alpha`` of exactly 1 or 2 *calls* them.

Forward (the KKT conditions)
----------------------------
Write ``b = a - 1 > 0``.  The Lagrangian of ``centmax`` is
``p.z + H_a(p) - lam (sum p - 1) + sum_j mu_j p_j - sum_j nu_j (p_j - u_j)``
with ``mu, nu >= 0``.  ``dH_a/dp_j = (1 - a p_j^b) / (a b)``, so stationarity is
``p_j^b = b z_j - tau + b (mu_j - nu_j)`` with ``tau = b lam - 1/a``, and complementary
slackness leaves three cases per entry: ``p_j = 0`` (``mu_j >= 0``), ``p_j = u_j``
(``nu_j >= 0``) and, in between, ``p_j^b = b z_j - tau``.  In one formula, with the threshold
written in the units of ``z`` (``t = tau / b``):

    p_j = min(u_j, [b (z_j - t)]_+^(1/b)),      t such that  sum_j p_j = 1.

``phi(t) = sum_j min(u_j, [b (z_j - t)]_+^(1/b))`` is continuous and non-increasing, from
``sum_j u_j`` (every entry capped) to 0 (every entry zero), so ``t`` exists when
``sum(u) >= 1``, and ``p`` is unique (the objective is strictly concave).  Algorithms:

* ``entmax15`` (``a = 1.5``, no bounds): exact, by sorting (Peters et al., Algorithm 2), in
  the units of ``y = z - max z`` (``T = 2 tau``): with ``y`` sorted in decreasing order, the
  candidate ``T_k = m_k - sqrt(max(0, 4 / k - (q_k - m_k^2)))`` (``m``, ``q`` the means of the
  first ``k`` entries and of their squares) is the smaller root of ``sum_{j <= k} (y_j - T)^2 = 4``;
  the threshold is ``T = max_k min(T_k, y_k)`` (the candidates up to the support size are at most
  ``T`` and reach it there, the entries beyond it are at most ``T``: no mask, no count) and
  ``p = [y - T]_+^2 / sum``.  Entries below ``max(y) - 2`` are never in the support, so ``y`` is
  clamped at ``-4`` (no overflow of the squares at huge scores; ``-inf`` included).  The row
  maxima are the sort's first column, and one host synchronisation (their sum is finite) rules
  out NaN, ``+inf`` and fully masked rows at once; only then are the maxima guarded.  No other
  data-dependent control flow, except on CPU rows of at least ``PARTIAL_MIN_J`` (256) entries
  (long attention rows, an output layer's vocabulary): there only the ``TOP_K_15`` (32) largest
  entries are sorted (``torch.topk``), and again twice as many for the rows whose support they do
  not hold (``T_K > y_K``), as the entmax package does; the prefix sums are those of the full sort
  (``cumsum`` adds in order), so ``p`` is the same, bit for bit.  Rows with more than
  ``PARTIAL_MAX_REACH`` (3/4) of their usable entries within reach of the support (``y > -2``,
  counted on about 256 columns; flat rows, as at initialisation) are sorted whole at once instead:
  their doublings would end there, after 2-3 times the work.
* ``entmax_bisect`` and ``centmax``: Newton's method on ``t``, in float64 (the power ``1/b``
  amplifies the relative error of ``b (z - t)`` by ``1/b``), on ``z - max(z)``.  Each step
  solves ``(sum_F q)^b = B^b`` with the partition held fixed (``F`` the free entries,
  ``q = [b (z - t)]_+^(1/b)``, ``B`` one minus the capped mass): a single free entry is solved in
  one step.  Without bounds and for ``a <= 2`` the function is ``||[b (z - t)]_+||_(1/b) - 1``,
  convex and decreasing, so from ``t = -1/b`` (where the maximum alone gets 1) the steps increase
  to the root without overshooting it: 4 to 6 steps on random rows, down to rounding.  With
  bounds, or for ``a > 2`` (where the slope is unbounded near an entry at the threshold), a step
  is taken only inside a bracket (``[-1/b, -(1/n)^b / b]`` without bounds, ``n`` usable entries;
  ``[min z - 1/b, max z]`` with bounds: every entry capped, resp. none positive) and
  when it is at most half the step before last, else the bracket is halved; a row is done once
  ``sum_j min(u_j, q_j) = 1`` to rounding (each term, hence ``p``, is then within as much of the
  solution: they all move the same way with ``t``), its bracket holds no float but its ends, or,
  for ``a <= 2``, its step is at rounding.  The number of steps is bounded by the halvings a
  bisection would take (60, times ``ceil(a - 1)`` for ``a > 2``, plus the bracket's width in powers
  of 2; one host synchronisation to read it, and one per step); rows that are done leave the
  working set once they are half of it, and rows that end on their bracket take its lower end.
  The powers are ``torch.pow`` (``exp(log(y) / b)`` is as fast where ``y > 0``, several times
  slower at ``y = 0``).  The result is finished exactly: without bounds ``p / sum(p)``; with
  bounds the free entries are rescaled to the budget ``1 - sum_capped u`` and clipped at ``u``.
  Without bounds, on the same long CPU rows (within reach: ``z - max z > -1/b``), the steps run
  on the ``TOP_K`` largest entries (more where the ``K``-th is in the support, starting from the
  threshold found on fewer: it is below the row's): the others are zero at the threshold and at
  every step below it (the sums differ by rounding: ``p`` agrees to 1e-15 in float64, bit for bit
  in float32 in the tests); the finish is on the whole row.
* a row whose ``a`` is within ``ALPHA_ONE_TOL`` (1e-6) of 1 is solved as ``a = 1`` (by
  softmax / csoftmax); a Python ``alpha`` of exactly 1 or 2 calls softmax / csoftmax /
  sparsemax / csparsemax.

Backward (implicit differentiation of the KKT system)
-----------------------------------------------------
Fix the sets ``S = {0 < p < u}`` (free), ``C = {p = u}`` (capped; ``u = 0`` included) and the
zero set; they are locally constant almost everywhere.  On ``S``, ``p_j^b = b (z_j - t)``, so

    b p_j^(b-1) dp_j = b (dz_j - dt)   =>   dp_j = g_j (dz_j - dt),   g_j = p_j^(2-a),

on ``C`` ``dp_j = du_j``, and elsewhere ``dp_j = 0``.  ``sum dp = 0`` fixes
``dt = (sum_S g dz + sum_C du) / sum_S g``.  Hence, for an output gradient ``v`` and
``m = sum_S g v / sum_S g`` (``m = 0`` where ``S`` is empty, as for the other ops),

    dz = 1[S] g (v - m),        du = 1[C] (v - m).

``a = 1`` gives csoftmax's backward (``g = p``), ``a = 2`` csparsemax's (``g = 1[S]``),
``a = 1.5`` entmax15's (``g = sqrt(p)``).

Gradient with respect to alpha
------------------------------
On ``S``, ``log p_j = log(b (z_j - t)) / b``; differentiating in ``b`` with ``t = t(b)``
(``s_j = log p_j``)

    dp_j/db = (1/b) [ g_j (z_j - t - b dt/db) - p_j s_j ] = (1/b) (q_j - g_j c),

with ``q_j = g_j z_j - p_j s_j``, ``c = t + b dt/db`` fixed by ``sum_S dp/db = 0`` (capped and zero entries
do not move), ``c = sum_S q / sum_S g``.  So ``dalpha = sum_S v dp/db = (1/b) sum_S q (v - m)``
(``sum_S g (v - m) = 0``).  On ``S``, ``g_j z_j = (p_j + g_j t b) / b``, and the ``g_j`` part drops
out of ``sum_S q (v - m)`` for the same reason, so

    dalpha = (1/b) sum_S (v_j - m) (p_j / b - p_j s_j).

(Without bounds and with ``sum p = 1`` this is entmax's ``d_alpha``.)  As written it cancels
terms of size ``1/b^2`` down to ``O(1)``; it is evaluated, in float64, as
``sum_S (v - m) (A / b - p s) / b`` with ``A_j = p_j - g_j P / G`` (``P = sum_S p``,
``G = sum_S g``; ``sum_S (v - m) p = sum_S (v - m) A``) computed without cancellation as
``A_j = p_j (e1 - E_j) / (1 + e1)``, ``E = expm1(-b s)`` (so ``g = p (1 + E)``),
``e1 = sum_S (p / P) E``: its error is ``O(eps / b)``.  At ``a = 1`` (``b -> 0``) the limit is

    dp_j/da = -(1/2) p_j (s_j^2 - sum_S p s^2 / P)   on S,

used for the rows solved as ``a = 1``.

Double backward: the backward is written with differentiable operations of the saved output
``p`` and of ``alpha`` (the sets held fixed), so ``create_graph=True`` works.

Semantics (masks, ``-inf``, fully masked rows, bounds, errors, half precision) are those of the
other ops (see :mod:`scanmt.ops`); in addition ``alpha`` must be finite and ``>= 1`` (``ValueError``
naming the smallest value), a number or a tensor broadcastable to the shape of ``z`` with size 1
along ``dim`` (one ``alpha`` per row: per head, per layer...).

Huge scores: the thresholds are found on ``z - max(z)`` in float64.  Where ``centmax``'s
threshold lies far below the maximum (bounds binding at the top and the mass far below them,
``z = [1e30, 0.3, 0]`` with ``u_1 = 0.5``), ``z - max(z)`` has rounded the entries that carry the
mass; for ``a > 2`` even a little rounding moves the small entries (``dp_j / dz_j = p_j^(2 - a)``;
at ``a = 10`` an entry ``1e4`` below a capped maximum loses 0.07 of mass).  The rows where that
rounding may move ``p`` by more than ``FRAME_TOL`` (1e-9, :func:`_frame_error`) are solved again in
frames centred at the threshold (:func:`._checks.recentre`, as csoftmax and csparsemax do).  The
powers ``q = (b (z - t))^(1/b)`` overflow far above the threshold (``a`` close to 1): they are
clipped at ``u`` before anything multiplies them (``inf * 0`` is NaN), and ``-1e30`` acts as
``-inf`` (the Newton steps end at the rounding of ``t``, not of the bracket's ends).  There are no
compiled kernels for these ops: the PyTorch algorithms run everywhere.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Callable, Optional, Tuple

import torch
from torch import Tensor

from . import _checks, _function
from .csoftmax import csoftmax
from .csparsemax import csparsemax
from .softmax import softmax
from .sparsemax import sparsemax

#: rows whose alpha is within this of 1 are solved (and differentiated) as alpha = 1
ALPHA_ONE_TOL = 1e-6
#: the most steps of _newton: those a bisection would take beyond the halvings that shrink the
#: bracket to the scale 1/b of the free entries (Newton's method takes far fewer)
BISECT_STEPS = 60
#: most bisection steps in one call (float64 from 1e308 down to rounding)
MAX_BISECT_STEPS = 2200
#: a row of _newton_guarded is done once its ``sum(p)`` is 1 to this times ``eps sqrt(J)`` (the
#: rounding of a sum of ``J`` terms of order ``1 / J``)
RESIDUAL_TOL = 8.0
#: centmax rows where the rounding of ``z - max z`` near the threshold may move ``p`` by more than this
#: (:func:`_frame_error`) are re-solved in recentred frames
FRAME_TOL = 1e-9
#: CPU rows of at least this many entries find entmax15's and entmax_bisect's threshold among their
#: largest entries (``torch.topk``): first the ``TOP_K`` largest, twice as many for the rows whose
#: support they do not hold, and so on (the entmax package's partial sort, exact) ...
PARTIAL_MIN_J = 256
TOP_K = 128
#: entmax15's first ``K``: its supports are small (an entmax15 output layer over 8k words, halfway through
#: training: median 3 words, 13 % of the rows above 32, 2 % above 128), and ``torch.topk`` costs about
#: as much as ``K`` (8000 entries on one CPU thread: 30 ms for 1500 rows at K = 32, 123 ms at 128)
TOP_K_15 = 32
#: ... except the rows with more than this fraction of their usable entries within reach of the
#: support (flat rows, as at initialisation: the doublings would end at the whole row, 2-3 times
#: slower than the sort); the bounds on the support are loose (at alpha 1.3 on N(0, 1) scores,
#: half the entries are within reach and a tenth in the support)
PARTIAL_MAX_REACH = 0.75


# ----------------------------------------------------------------------------
# entmax15: sort-based, on the shared TransformFunction
# ----------------------------------------------------------------------------


def _long(x: Tensor) -> bool:
    """Whether the threshold of ``x [R, J]`` may be looked for among its largest entries: CPU rows of
    at least ``PARTIAL_MIN_J`` entries (``use_method("sort")``: never)."""
    return x.shape[-1] >= PARTIAL_MIN_J and _checks.choose_method(x, 0, 0, 0) == "iter"


def _wide(x: Tensor, reach: Tensor) -> Tensor:
    """``[R]`` bool: the long rows of ``x [R, J]`` (:func:`_long`) whose threshold is looked for among
    all their entries: those with more than ``PARTIAL_MAX_REACH`` of their usable entries (``> -inf``)
    above ``reach`` ``[R, 1]``, below which an entry is never in the support.  The others start with
    the ``TOP_K`` largest (:func:`_on_largest`).  Counted on every ``J // 256``-th column (a
    vocabulary-sized pass costs as much as the rest of entmax15)."""
    xs = x[:, :: max(1, x.shape[-1] // 256)]
    usable = _checks.gt_float(xs, torch.full((), float("-inf"), dtype=x.dtype, device=x.device)).sum(-1)
    return _checks.gt_float(xs, reach).sum(-1).gt_(usable.mul_(PARTIAL_MAX_REACH))


def _on_largest(
    x: Tensor, solve: Callable[[Tensor, Optional[Tensor], Optional[Tensor]], Tuple[Tensor, Tensor]], wide: Tensor,
    first_k: int,
) -> Tensor:
    """A threshold ``[R, 1]`` per row of ``x [R, J]``, found on the row's largest entries (the
    partial sort of the entmax package).

    ``solve(xs, rows, prev)`` gets the ``K`` largest entries of the rows ``rows`` (``None``: every
    row) in decreasing order and their thresholds from the previous round (``prev``, ``None`` in the
    first), and returns their thresholds and whether each one is final (``[n, 1]`` bool): the
    ``K``-th largest entry is outside the support, so the smaller ones are too and the threshold is
    the whole row's.  The other rows are solved again with twice as many entries, at most all of
    them (``first_k`` first).  The ``wide`` rows (``[R]`` bool, :func:`_wide`) are solved on all their
    entries (sorted) at once."""
    J = x.shape[-1]
    tau = torch.empty((x.shape[0], 1), dtype=x.dtype, device=x.device)
    rows: Optional[Tensor] = None
    w = wide.nonzero().reshape(-1)
    if w.numel():
        xs = torch.sort(x.index_select(0, w), dim=-1, descending=True).values
        tau.index_copy_(0, w, solve(xs, w, None)[0])
        rows = wide.logical_not().nonzero().reshape(-1)
        if rows.numel() == 0:
            return tau
    K = min(first_k, J)
    prev: Optional[Tensor] = None
    while True:
        xr = x if rows is None else x.index_select(0, rows)
        xs = torch.topk(xr, K, dim=-1).values if K < J else torch.sort(xr, dim=-1, descending=True).values
        t, final = solve(xs, rows, prev)
        if rows is None:
            tau.copy_(t)
        else:
            tau.index_copy_(0, rows, t)
        if K == J:
            return tau
        left = (~final).reshape(-1).nonzero().reshape(-1)
        if left.numel() == 0:
            return tau
        rows = left if rows is None else rows.index_select(0, left)
        prev = tau.index_select(0, rows)
        K = min(2 * K, J)


def _entmax15_candidates(ys: Tensor, k: _checks.Consts) -> Tensor:
    """The candidate thresholds ``T_k`` ``[R, K]`` of 1.5-entmax, in the units of ``y = z - max z``
    (``T = 2 tau``), from the largest entries ``ys`` ``[R, K]`` of each row in decreasing order,
    clamped at -4 (``-inf`` included): the smaller root of ``sum_{j <= k} (y_j - T)^2 = 4``,

        T_k = m_k - sqrt(max(0, 4 / k - (q_k - m_k^2))),

    ``m``, ``q`` the means of the first ``k`` entries and of their squares.  ``T_k <= y_k``
    exactly for ``k`` up to the support size, and there ``T_k`` increases to the threshold."""
    m = ys.cumsum(-1).mul_(k.inv_arange1(ys.shape[-1]))
    q = (ys * ys).cumsum(-1).mul_(k.inv_arange1(ys.shape[-1]))
    delta = torch.sub(k.inv_arange1(ys.shape[-1], 4.0), q).addcmul_(m, m).clamp_(min=k.zero)
    return m.sub_(delta.sqrt_())


def _entmax15_pick(ys: Tensor, cand: Tensor) -> Tensor:
    """The threshold ``T = max_k min(T_k, y_k)`` ``[R, 1]`` (overwrites ``cand``): the candidates
    ``T_k`` with ``T_k <= y_k`` (``k`` up to the support size) are at most ``T`` and reach it at
    the support size, and the entries beyond the support are at most ``T``."""
    return torch.minimum(cand, ys, out=cand).amax(-1, keepdim=True)


def _entmax15(z2: Tensor, k: _checks.Consts, validate: bool) -> Tensor:
    """``p`` ``[R, J]`` of 1.5-entmax for the masked scores ``z2`` (``-inf`` = unusable; not written
    to).  The row maxima come with the sort (from ``amax`` on long rows), and a
    single host synchronisation (on the CPU, or to validate) checks that they are all finite: then
    there is no fully masked row, no NaN and no ``+inf``; otherwise ``validate`` raises the detailed
    error and fully masked rows are guarded (their ``p`` is 0: every entry is ``-inf``)."""
    four = k.scalar(-4.0)
    zs: Optional[Tensor] = None
    wide: Optional[Tensor] = None
    if _long(z2):
        zmax = z2.amax(-1, keepdim=True)
        wide = _wide(z2, zmax - 2.0)  # y = z - max z <= -2 is never in the support
        if bool(wide.all()):
            zs = torch.sort(z2, dim=-1, descending=True).values
    else:
        zs = torch.sort(z2, dim=-1, descending=True).values
        zmax = zs[:, :1]
    if validate or z2.device.type == "cpu":
        safe = not math.isfinite(float(zmax.sum()))  # NaN, +inf, a fully masked row (or overflow)
        if safe and validate:
            _checks.raise_if_invalid(Entmax15Function.op_name, zmax, k)
    else:
        safe = True
    if safe:
        zmax = zmax.clamp(min=k.fmin)
    if zs is None:
        # the prefix sums of the largest entries are those of the full sort (cumsum adds in order)
        def solve(zk: Tensor, rows: Optional[Tensor], prev: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
            ys = torch.sub(zk, zmax if rows is None else zmax.index_select(0, rows)).clamp_(min=four)
            cand = _entmax15_candidates(ys, k)
            final = torch.gt(cand[:, -1:], ys[:, -1:])  # the K-th largest is outside the support
            return _entmax15_pick(ys, cand), final

        T = _on_largest(z2, solve, wide, TOP_K_15)  # type: ignore[arg-type]
    else:
        ys = torch.sub(zs, zmax).clamp_(min=four)
        T = _entmax15_pick(ys, _entmax15_candidates(ys, k))
    # p = [y/2 - tau]_+^2 = [y - T]_+^2 / 4, made exact to rounding: rows sum to 1
    p = torch.sub(z2, zmax).sub_(T).relu_()
    p.mul_(p)
    total = p.sum(-1, keepdim=True)
    return p.div_(total.clamp_(min=k.tiny) if safe else total)


class Entmax15Function(_function.TransformFunction):
    """1.5-entmax; backward with ``w = sqrt(p)`` on the support."""

    op_name, p_weighted = "entmax15", True

    @classmethod
    def _torch_forward(
        cls, rows: _checks.Rows, z: Tensor, u: Optional[Tensor], mask: Optional[Tensor], cdt: torch.dtype,
        validate: bool,
    ) -> _function.Solved:
        """Mask, validate and solve (:func:`_entmax15`: the row maxima come with the sort)."""
        k = _checks.consts(cdt, z.device)
        p = _entmax15(_checks.masked_scores(rows, z, mask, cdt), k, validate)
        return p, (p,)

    @classmethod
    def _solve(cls, z2: Tensor, zmax: Tensor, b: Optional[_checks.Bounds], k: _checks.Consts) -> _function.Solved:
        """The base class's hook (``_torch_forward`` above does not call it): ``zmax`` is not used."""
        p = _entmax15(z2, k, False)
        return p, (p,)

    @classmethod
    def _vjp(
        cls, g: Tensor, saved: Tuple[Tensor, ...], need_z: bool, need_u: bool
    ) -> Tuple[Optional[Tensor], Optional[Tensor]]:
        """The shared closed form with ``w = sqrt(p)`` (``p^(2 - 1.5)`` on the support, 0 elsewhere) as
        ``dz = w g - w m``: one operation fewer than ``w (g - m)`` (per-operation overhead is most of
        the time on decoder-step inputs)."""
        w = saved[0].sqrt()
        wg = w * g
        m = wg.sum(-1, keepdim=True).div_(w.sum(-1, keepdim=True).clamp_(min=_checks.consts(w.dtype, w.device).tiny))
        return (wg.addcmul_(w, m, value=-1.0) if need_z else None), None

    @classmethod
    def _vjp_differentiable(
        cls, g: Tensor, saved: Tuple[Tensor, ...], p: Optional[Tensor], need_z: bool, need_u: bool
    ) -> Tuple[Optional[Tensor], Optional[Tensor]]:
        assert p is not None
        pos = torch.gt(p, 0)
        w = torch.where(pos, torch.where(pos, p, 1.0).sqrt(), 0.0)  # no inf derivative at p = 0
        m = (w * g).sum(-1, keepdim=True) / w.sum(-1, keepdim=True).clamp(min=torch.finfo(w.dtype).tiny)
        return (w * (g - m) if need_z else None), None


def entmax15(z: Tensor, dim: int = -1, mask: Optional[Tensor] = None, *, validate: bool = True) -> Tensor:
    """1.5-entmax of ``z`` along ``dim`` (exact, by sorting): ``p = [z/2 - tau]_+^2``.

    Args:
        z: scores, any floating dtype (half precision is computed in float32).
        dim: the dimension that sums to 1.
        mask: optional bool tensor broadcastable to ``z`` (True = may receive attention);
            masked positions (and ``z == -inf``) get 0 and a zero gradient; a fully masked
            row gives all zeros.
        validate: check for NaN or +inf in ``z`` (one host synchronisation).

    Raises:
        ValueError: NaN or +inf at an unmasked position of ``z`` (if ``validate``).
    """
    return Entmax15Function.transform(z, None, dim, mask, validate)


# ----------------------------------------------------------------------------
# entmax_bisect and centmax: Newton's method, alpha differentiable
# ----------------------------------------------------------------------------


def _alpha_dtype(device: torch.device) -> torch.dtype:
    return torch.float32 if device.type == "mps" else torch.float64


def _threshold(x: Tensor, uc: Optional[Tensor], am1: Tensor, live: Tensor, lo: Optional[Tensor] = None) -> Tensor:
    """The threshold ``t`` (units of ``z``) of alpha-entmax (``uc is None``) or centmax, by Newton's
    method (:func:`_newton`): ``x`` float64 scores (``-inf`` = unusable; the row maximum 0, or at most
    ``-lo`` for the recentred rows), bounds ``uc`` in ``[0, 1]`` (0 where unusable), per-row ``am1 = alpha - 1``;
    rows without ``live`` are not solved (0).  ``lo`` overrides the lower end of the bracket."""
    inv = 1.0 / am1
    if uc is None:
        n = torch.gt(x, float("-inf")).sum(-1, keepdim=True).clamp(min=1).to(x.dtype)
        lo_, hi = -inv, -torch.pow(1.0 / n, am1) * inv
    else:
        # every usable entry is capped at t <= min z - 1/b (q >= 1 >= u there), none positive at max z
        lo_ = torch.where(live, x.nan_to_num(neginf=float("inf")).amin(-1, keepdim=True) - inv, -inv)
        hi = x.amax(-1, keepdim=True).clamp(min=lo_)
    lo = lo_ if lo is None else torch.minimum(lo, lo_)
    # at most as many steps as the halvings down to rounding at the scale 1/b of the free entries
    steps = BISECT_STEPS
    if uc is not None:
        # and for b > 1, b times as many: an entry at the threshold holds (b (z - t))^(1/b), so p to 2^-60
        # takes t to 2^(-60 b) (alpha = 10: p = 0.005 is 1e-22 above t)
        ratio, b_max = (float(v) for v in torch.cat([((hi - lo) * am1).amax().clamp(min=1.0).reshape(1),
                                                     am1.amax().clamp(min=1.0).reshape(1)]))
        steps = min(MAX_BISECT_STEPS, BISECT_STEPS * math.ceil(b_max) + math.ceil(math.log2(ratio)))
    elif _long(x):
        wide = _wide(x, -inv)  # the threshold is at least -1/b
        if not bool(wide.all()):
            # the same steps on the largest entries: an entry below the threshold adds 0 to the sums
            # (and to the slope) there and beyond it; the threshold on the K largest is below the
            # row's (it leaves out positive terms), so a row solved again starts from there
            def solve(xs: Tensor, rows: Optional[Tensor], prev: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
                def pick(t: Tensor) -> Tensor:
                    return t if rows is None else t.index_select(0, rows)

                start = pick(lo) if prev is None else torch.maximum(prev, pick(lo))
                t = _newton(xs, None, pick(am1), start, pick(hi), pick(live), steps)
                return t, torch.le(xs[:, -1:], t)

            return _on_largest(x, solve, wide, TOP_K)
    return _newton(x, uc, am1, lo, hi, live, steps)


def _sums(x: Tensor, t: Tensor, uc: Optional[Tensor], am1: Tensor, inv: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    """At the thresholds ``t`` ``[n, 1]``: ``phi(t) = sum_j min(u_j, q_j)``, the mass of the free entries
    ``sum_F q`` (``F = {q < u}``) and minus the slope of ``phi`` there, ``sum_F q_j / y_j``, with
    ``y = [b (x - t)]_+`` and ``q = y^(1/b)`` (``[n, 1]`` each; ``x`` ``[n, J]``, ``uc`` ``[n, J]`` or
    ``None``).  ``torch.pow`` rather than ``exp(log(y) / b)``: as fast where ``y > 0`` and several
    times faster at ``y = 0`` (``log(0)`` and ``exp(-inf)`` leave the vectorised code)."""
    y = torch.sub(x, t).mul_(am1).relu_()
    q = torch.pow(y, inv)
    if uc is None:
        phi = q.sum(-1, keepdim=True)
        return phi, phi, q.div_(y.clamp_(min=torch.finfo(y.dtype).tiny)).sum(-1, keepdim=True)
    free = _checks.gt_float(uc, q)
    q = torch.minimum(q, uc, out=q)  # finite: q overflows far above the threshold (and inf * 0 is NaN)
    phi = q.sum(-1, keepdim=True)
    mass = q.mul_(free).sum(-1, keepdim=True)
    return phi, mass, q.div_(y.clamp_(min=torch.finfo(y.dtype).tiny)).sum(-1, keepdim=True)


def _newton(
    x: Tensor, uc: Optional[Tensor], am1: Tensor, lo: Tensor, hi: Tensor, live: Tensor, max_steps: int
) -> Tensor:
    """The root ``t`` ``[R, 1]`` of ``phi(t) = 1`` in the bracket ``[lo, hi]`` (``phi(lo) >= 1 >= phi(hi)``)
    by Newton steps; ``x`` ``[R, J]``, ``uc`` ``[R, J]`` or ``None``, ``am1`` ``[R, 1]``; rows without
    ``live`` get 0.

    The steps solve ``(sum_F q)^b = B^b`` with the partition held fixed (``F`` free, ``B = 1 -`` the
    capped mass): ``dt = -S expm1(b log(B / S)) / (b S')``, ``S = sum_F q``, ``S' = sum_F q / y``, so a
    single free entry is solved in one step.  Without bounds and for ``a <= 2`` the function is
    ``||y||_(1/b) - 1``, convex and decreasing in ``t``, so from ``lo`` the steps increase to the root
    without overshooting it (:func:`_newton_monotone`: at most 6 steps on random rows from
    ``lo = -1/b``, down to rounding); otherwise (bounds, ``a > 2``) they are safeguarded
    (:func:`_newton_guarded`).  Done rows leave the working set once they are half of it.  One host
    synchronisation per step."""
    t_out = torch.zeros_like(lo)
    idx = live.reshape(-1).nonzero().reshape(-1)
    if idx.numel() == 0:
        return t_out
    if idx.numel() < x.shape[0]:
        x, am1, lo, hi = (v.index_select(0, idx) for v in (x, am1, lo, hi))
        uc = None if uc is None else uc.index_select(0, idx)
    if uc is None and not bool(torch.gt(am1, 1.0).any()):
        _newton_monotone(x, am1, lo, max_steps, idx, t_out)
    else:
        _newton_guarded(x, uc, am1, lo, hi, max_steps, idx, t_out)
    return t_out


def _newton_monotone(x: Tensor, am1: Tensor, lo: Tensor, max_steps: int, idx: Tensor, t_out: Tensor) -> None:
    """:func:`_newton` without bounds for ``a <= 2``: plain steps from ``t = lo`` (increasing, each
    below the root, where ``phi >= 1`` and ``S' > 0``); a row is done once its step is at rounding,
    ``4 eps (1 + |lo|)`` (``|t| <= |lo|``), and takes that last step.  Writes ``t_out[idx]``."""
    inv = 1.0 / am1
    neg_am1 = -am1
    tol = lo.abs().add_(1.0).mul_(4.0 * torch.finfo(x.dtype).eps)
    t = lo.clone()
    for _ in range(max_steps):
        phi, _, slope = _sums(x, t, None, am1, inv)
        # dt = -S expm1(-b log S) / (b S')
        step = phi.log().mul_(neg_am1).expm1_().mul_(phi).div_(slope.mul_(neg_am1))
        t.add_(step)
        done = torch.le(step.abs_(), tol).reshape(-1)
        n_done = int(done.sum())
        if n_done == idx.numel():
            break
        if 2 * n_done >= idx.numel():  # done rows leave the working set
            rows = done.nonzero().reshape(-1)
            t_out[idx[rows]] = t.index_select(0, rows)
            keep = done.logical_not_().nonzero().reshape(-1)
            idx, x, t = idx.index_select(0, keep), x.index_select(0, keep), t.index_select(0, keep)
            am1, neg_am1, inv, tol = (v.index_select(0, keep) for v in (am1, neg_am1, inv, tol))
    t_out[idx] = t


def _newton_guarded(
    x: Tensor, uc: Optional[Tensor], am1: Tensor, lo: Tensor, hi: Tensor, max_steps: int, idx: Tensor,
    t_out: Tensor,
) -> None:
    """:func:`_newton` with bounds, or ``a > 2``, from ``t = -1/b`` (clipped to the bracket): a step is
    taken only inside the bracket, which each evaluation shrinks, and where it is at most half the
    step before last; else the bracket is halved.  A row is done once ``phi(t) = 1`` to
    ``RESIDUAL_TOL eps sqrt(J)`` (the rounding of a sum of ``J`` terms; every ``min(u_j, q_j)``, hence
    ``p``, is then within it of the solution: they all move the same way with ``t``), or its bracket
    holds no float but its ends, or, for ``a <= 2`` (where the slope is at most the number of free
    entries), its step is at the rounding of ``t``, ``4 eps (1 + |t|)`` (then it takes it).  For
    ``a > 2`` a small step says nothing: the slope is unbounded near an entry at the threshold.
    Rows that end on their bracket (no float between its ends, or still running after ``max_steps``
    steps) take its lower end, where ``phi >= 1``: the free entries there hold at least the budget,
    which :func:`_finish` rescales them to.  Writes ``t_out[idx]``."""
    k = _checks.consts(x.dtype, x.device)
    inv, neg_am1 = 1.0 / am1, -am1
    res_tol = RESIDUAL_TOL * torch.finfo(x.dtype).eps * math.sqrt(x.shape[-1])
    # a <= 2: a step at rounding of t ends the row (not of the bracket's ends: an entry at -1e30 puts lo
    # there, and a step at its rounding, 1e14, would end the row anywhere)
    steady = torch.le(am1, 1.0)
    eps4 = 4.0 * torch.finfo(x.dtype).eps
    t = torch.maximum(torch.minimum(-inv, hi), lo)
    dx1 = hi - lo
    dx2 = dx1
    for step in range(max_steps + 1):
        phi, mass, slope = _sums(x, t, uc, am1, inv)
        res = phi - k.one  # (phi is mass itself without bounds)
        above = torch.ge(res, k.zero)
        lo = torch.where(above, t, lo)
        hi = torch.where(above, hi, t)
        budget = mass - res  # 1 - the capped mass
        ok = torch.gt(torch.minimum(torch.minimum(mass, slope), budget), k.zero)
        # NaN or inf where not ok (rejected below)
        dt = budget.div_(mass).log_().mul_(am1).expm1_().mul_(mass).div_(slope.mul_(neg_am1))
        t_new = t + dt
        adt = dt.abs_()
        small = torch.le(adt, t.abs().add_(1.0).mul_(eps4)).logical_and_(ok).logical_and_(steady)
        mid = (lo + hi).mul_(k.half)
        converged = torch.le(res.abs_(), res_tol)
        done = converged.logical_or(small)
        done.logical_or_(torch.le(mid, lo)).logical_or_(torch.ge(mid, hi))  # no float between lo and hi
        n_done = int(done.sum())
        # a row that ends on its bracket takes lo: phi(lo) >= 1, so the free entries hold at least the budget
        # there (the finish rescales them to it); at hi they may hold nothing (alpha = 10: sum(p) = 0.94)
        t_done = torch.where(small, t_new, torch.where(converged, t, lo))
        if step == max_steps or n_done == idx.numel():
            t_out[idx] = torch.where(done, t_done, lo)
            return
        inside = torch.gt(t_new, lo).logical_and_(torch.lt(t_new, hi)).logical_and_(ok)
        inside.logical_and_(torch.le(adt, dx2 * k.half))  # (dx2 may be dx1: not in place)
        t_new = torch.where(done, t_done, torch.where(inside, t_new, mid))
        dx2, dx1 = dx1, (t_new - t).abs_()
        t = t_new
        if 2 * n_done >= idx.numel():  # done rows leave the working set
            done = done.reshape(-1)
            rows = done.nonzero().reshape(-1)
            t_out[idx[rows]] = t.index_select(0, rows)
            keep = done.logical_not_().nonzero().reshape(-1)
            state = torch.cat([t, lo, hi, dx1, dx2, am1, neg_am1, inv, steady.to(x.dtype)], 1)
            state = state.index_select(0, keep)
            t, lo, hi, dx1, dx2, am1, neg_am1, inv, steady_f = state.split(1, dim=1)
            steady = torch.gt(steady_f, 0.5)
            idx, x = idx.index_select(0, keep), x.index_select(0, keep)
            uc = None if uc is None else uc.index_select(0, keep)


def _finish(x: Tensor, t: Tensor, uc: Optional[Tensor], am1: Tensor, live: Tensor) -> Tensor:
    """``p`` from the threshold ``t``, made exact to rounding: without bounds ``p / sum(p)``;
    with bounds the free entries rescaled to the budget ``1 - sum_capped u``, clipped at ``u``.
    Rows without ``live`` get 0 (the caller fills them).  Masks as 0/1 floats: ``torch.where`` is
    ten times slower than a product on large inputs."""
    q = torch.sub(x, t).mul_(am1).relu_().pow_(1.0 / am1)  # in place: one [R, J] tensor at vocabulary size
    if uc is None:
        p = q.div_(q.sum(-1, keepdim=True).clamp(min=torch.finfo(q.dtype).tiny))
    else:
        free = _checks.gt_float(uc, q)  # q < u (0 where u = 0, unusable entries included)
        qf = torch.minimum(q, uc, out=q).mul_(free)  # finite first: q may overflow above the threshold
        capped = torch.addcmul(uc, uc, free, value=-1.0)  # u where q >= u, else 0
        budget = 1.0 - capped.sum(-1, keepdim=True)
        mass = qf.sum(-1, keepdim=True)
        scale = torch.where(torch.gt(mass, 0) & torch.gt(budget, 0), budget / mass.clamp(min=1e-300), 1.0)
        p = torch.minimum(capped.addcmul_(qf, scale), uc)
    return p.mul_(live.to(p.dtype))


def _frame_error(zs: Tensor, uc: Tensor, t: Tensor, am1: Tensor, rows: Optional[Tensor]) -> Tensor:
    """``[R, 1]``: how far the rounding of the frame ``zs = z - max z`` ``[R, J]`` may have moved ``p``
    (bounds ``uc`` ``[R, J]``, threshold ``t`` and ``am1`` ``[R, 1]``) in the rows ``rows`` (indices),
    or a bound on it in every row where ``rows`` is None (no pass over ``[R, J]``).

    Near the threshold ``zs`` and ``t`` are known to ``d = 4 eps |t|``: ``p_j = min(u_j, [b (z_j - t)]_+^(1/b))``
    may be anything between its values at ``z_j -+ d``: the estimate is that spread summed over the row.
    The spread is at most ``2 d`` for ``b <= 1`` (the slope ``p_j^(1 - b)`` is at most 1) and
    ``(2 b d)^(1/b)`` for ``b > 1`` (the slope is unbounded as ``p_j -> 0``: at ``a = 10``, ``t = -1e4``
    an entry at the threshold may hold 0.07): ``J`` times their maximum is the bound."""
    d = t.abs().mul_(4.0 * torch.finfo(zs.dtype).eps)
    if rows is None:
        spread = d.mul(am1).mul_(2.0).pow_(1.0 / am1)
        return torch.maximum(spread, d.mul_(2.0)).mul_(zs.shape[-1])
    zs, uc, t, am1, d = (v.index_select(0, rows) for v in (zs, uc, t, am1, d))
    y = torch.sub(zs, t).mul_(am1)
    bd = d.mul_(am1)
    hi = torch.add(y, bd).relu_().pow_(1.0 / am1)
    lo = y.sub_(bd).relu_().pow_(1.0 / am1)
    return torch.minimum(hi, uc, out=hi).sub_(torch.minimum(lo, uc, out=lo)).sum(-1, keepdim=True)


def _imprecise_rows(zs: Tensor, uc: Tensor, t: Tensor, am1: Tensor, live: Tensor) -> Tensor:
    """The indices ``[n]`` of the ``live`` rows whose ``p`` the frame ``zs`` may have moved by more than
    ``FRAME_TOL`` (:func:`_frame_error`; arguments as there).  One host synchronisation where the bound
    rules every row out (``alpha <= 2`` and ``|t| < 5e5 / J``: most rows), else two."""
    maybe = torch.gt(_frame_error(zs, uc, t, am1, None), FRAME_TOL).logical_and_(live).reshape(-1)
    rows = maybe.nonzero().reshape(-1)
    if rows.numel() == 0:
        return rows
    return rows[torch.gt(_frame_error(zs, uc, t, am1, rows), FRAME_TOL).reshape(-1)]


def _solve(z2: Tensor, zmax: Tensor, zs: Tensor, uc: Optional[Tensor], am1: Tensor, live: Tensor) -> Tensor:
    """``p`` on the shifted scores ``zs = z - max(z)``; rows where the rounding of ``zs`` near the
    threshold may have moved ``p`` by more than ``FRAME_TOL`` (:func:`_frame_error`: bounds binding at
    the top and the mass far below, huge scores, or ``alpha > 2``, where tiny ``p`` are sensitive to
    ``z``) are solved again in frames centred at the threshold (:func:`._checks.recentre`)."""
    t = _threshold(zs, uc, am1, live)
    p = _finish(zs, t, uc, am1, live)
    if uc is None:
        return p
    rows = _imprecise_rows(zs, uc, t, am1, live)
    if rows.numel():
        z_f, uc_f, b_f = z2[rows], uc[rows], am1[rows]
        scale = torch.where(z_f > float("-inf"), zs[rows].abs(), 0.0).amax(-1, keepdim=True)
        bound = scale.mul(2.0).add(t[rows].abs())
        margin = 1.0 / b_f + 4.0  # beyond it an entry is capped (above) or zero (below) anyway
        live_f = live[rows]

        def solve(x: Tensor, B: Tensor) -> Tensor:
            return _threshold(x, uc_f, b_f, live_f, lo=-B - margin)

        x, t_x = _checks.recentre(z_f, zmax[rows] + t[rows], bound, margin, solve)  # type: ignore[arg-type]
        p[rows] = _finish(x, t_x, uc_f, b_f, live_f)
    return p


def _alpha_rows(alpha: Tensor, shape: torch.Size, dim: int) -> Tuple[Tensor, torch.Size]:
    """``alpha`` expanded to ``shape`` with size 1 along ``dim``, and that shape."""
    ashape = list(shape)
    ashape[dim] = 1
    return alpha.expand(ashape), torch.Size(ashape)


class AlphaEntmaxFunction(torch.autograd.Function):
    """entmax_bisect (``u is None``) and centmax; gradients to ``z``, ``u`` and ``alpha``.

    ``apply(z, u, alpha, mask, dim, validate, out_dtype, name)`` with ``z``, ``u``, ``mask`` of one
    shape and ``alpha`` of that shape with size 1 along ``dim``.
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any, z: Tensor, u: Optional[Tensor], alpha: Tensor, mask: Optional[Tensor], dim: int,
        validate: bool, out_dtype: torch.dtype, name: str,
    ) -> Tensor:
        rows = _checks.Rows(z.shape, dim)
        dt = _alpha_dtype(z.device)
        k = _checks.consts(dt, z.device)
        z2 = _checks.masked_scores(rows, z, mask, dt)
        zmax = z2.amax(-1, keepdim=True)
        a2 = alpha.movedim(dim, -1).reshape(-1, 1).to(dt)
        b = None
        if u is not None:
            b = _checks.Bounds(z2, u, mask, rows, k, validate, cap=1.0)
        if validate:
            _checks.raise_if_invalid(name, zmax, k, b)
            bad = ~(torch.ge(a2, 1.0) & torch.lt(a2, float("inf")))
            if bool(bad.any()):
                worst = a2[bad].reshape(-1)[0]
                raise ValueError(f"{name}: alpha must be finite and >= 1, got {float(worst):.6g} "
                                 f"in {int(bad.sum())} of {a2.shape[0]} rows")
        zs = _checks.shift(z2, zmax, k)
        am1 = a2 - 1.0  # alpha - 1: entmax's p = [am1 (z - t)]_+ ^ (1 / am1)
        one = torch.lt(am1, ALPHA_ONE_TOL).reshape(-1)
        live = torch.gt(zmax, k.ninf)
        if b is not None:
            live = live & torch.gt(b.usum, k.one)
        p = _solve(z2, zmax, zs, None if b is None else b.uc, am1.clamp(min=ALPHA_ONE_TOL), live)
        if b is not None:  # sum(u) <= 1 over the usable positions (or none usable): p = u
            live_f = live.to(dt)
            p = p.mul_(live_f).addcmul_(b.uc, 1.0 - live_f)
        ctx.any_one = bool(one.any())
        if ctx.any_one:  # alpha = 1: softmax / csoftmax
            idx = one.nonzero().reshape(-1)
            if b is None:
                p[idx] = softmax(z2[idx], validate=False)
            else:
                p[idx] = csoftmax(z2[idx], b.uv[idx].clamp(min=0.0), validate=False)
        usable = None if b is None else _checks.gt_float(z2, k.ninf)
        out = rows.give(p, out_dtype)
        ctx.rows, ctx.dim, ctx.dt = rows, dim, dt
        ctx.z_dtype, ctx.u_dtype, ctx.a_dtype = z.dtype, None if u is None else u.dtype, alpha.dtype
        ctx.a_shape = alpha.shape
        ctx.save_for_backward(out, alpha, None if b is None else b.uv, usable)  # no bounds: no uv
        return out

    @staticmethod
    def backward(ctx: Any, grad: Tensor):  # type: ignore[override]
        out, alpha, uv, usable = ctx.saved_tensors
        rows: _checks.Rows = ctx.rows
        dt = ctx.dt
        need_z, need_u, need_a = ctx.needs_input_grad[0], ctx.needs_input_grad[1], ctx.needs_input_grad[2]
        tiny = torch.finfo(dt).tiny
        p = rows.take(out, dt)
        v = rows.take(grad, dt)
        am1 = alpha.movedim(ctx.dim, -1).reshape(-1, 1).to(dt) - 1.0
        # masks as 0/1 floats (torch.where is ten times slower than a product on large inputs)
        free = _checks.gt_float(p, torch.zeros((), dtype=dt, device=p.device))
        if uv is None:  # p = 0 at the unusable entries
            pf = p
        else:
            free = free.mul_(_checks.gt_float(uv, p))
            pf = p * free
        s = torch.log(pf + (1.0 - free))  # log p on S, 0 elsewhere
        E = torch.expm1(s * -am1)  # p^(-b) - 1 on S
        g = pf + pf * E  # p^(2 - a) on S, 0 elsewhere
        m = (g * v).sum(-1, keepdim=True) / g.sum(-1, keepdim=True).clamp(min=tiny)
        vm = v - m
        dz = rows.give(g * vm, ctx.z_dtype) if need_z else None
        du = None
        if need_u and uv is not None:
            du = rows.give(vm * torch.ge(p, uv).to(dt).mul_(usable), ctx.u_dtype)
        da = None
        if need_a:
            # dalpha = (1/b) sum_S (v - m) (A / b - p s) with A = p - g P / G = p (e1 - E) / (1 + e1),
            # e1 = sum_S p E / P: the cancellation of the terms of size 1/b^2 done exactly
            W = vm * pf
            P = pf.sum(-1, keepdim=True).clamp(min=tiny)
            bb = am1.clamp(min=ALPHA_ONE_TOL)
            Eb = torch.expm1(s * -bb) if ctx.any_one else E  # the rows solved as alpha = 1 aside
            e1 = (pf * Eb).sum(-1, keepdim=True) / P
            Ws = W * s
            da2 = ((W * (e1 - Eb)).sum(-1, keepdim=True) / ((1.0 + e1) * bb) - Ws.sum(-1, keepdim=True)) / bb
            if ctx.any_one:  # the limit at alpha = 1: -(1/2) sum_S (v - m) p (s^2 - sum_S p s^2 / P)
                ps2 = (pf * s * s).sum(-1, keepdim=True) / P
                limit = ((Ws * s).sum(-1, keepdim=True) - ps2 * W.sum(-1, keepdim=True)) * -0.5
                da2 = torch.where(torch.lt(am1, ALPHA_ONE_TOL), limit, da2)
            ashape = list(rows.moved_shape)
            ashape[-1] = 1
            da = da2.reshape(ashape).movedim(-1, ctx.dim).to(ctx.a_dtype)
        return dz, du, da, None, None, None, None, None


def _alpha_transform(
    name: str, z: Tensor, u: Optional[object], alpha: Any, dim: int, mask: Optional[Tensor], validate: bool
) -> Tensor:
    z, u_t, mask, dim, out_dtype = _checks.broadcast_inputs(name, z, u, mask, dim)
    if isinstance(alpha, numbers.Real) and not isinstance(alpha, bool):
        alpha = torch.tensor(float(alpha), dtype=z.dtype if z.dtype.is_floating_point else torch.float32,
                             device=z.device)
    elif not isinstance(alpha, Tensor) or not alpha.dtype.is_floating_point:
        what = f"dtype {alpha.dtype}" if isinstance(alpha, Tensor) else type(alpha).__name__
        raise TypeError(f"{name}: alpha must be a real number or a floating-point tensor, got {what}")
    if alpha.device != z.device:
        raise ValueError(f"{name}: z is on {z.device} but alpha is on {alpha.device}")
    try:
        alpha_e, _ = _alpha_rows(alpha, z.shape, dim)
    except RuntimeError:
        ashape = list(z.shape)
        ashape[dim] = 1
        raise ValueError(f"{name}: alpha of shape {tuple(alpha.shape)} cannot be broadcast to {tuple(ashape)} "
                         f"(the shape of z with size 1 along dim {dim}: one alpha per row)") from None
    if z.numel() == 0:
        return (z * 0 + alpha_e * 0 if u_t is None else z * 0 + u_t * 0 + alpha_e * 0).to(out_dtype)
    return AlphaEntmaxFunction.apply(z, u_t, alpha_e, mask, dim, validate, out_dtype, name)


def entmax_bisect(
    z: Tensor, alpha: Any = 1.5, dim: int = -1, mask: Optional[Tensor] = None, *, validate: bool = True
) -> Tensor:
    """alpha-entmax of ``z`` along ``dim``: ``p = [(a - 1) (z - t)]_+^(1/(a - 1))``, the threshold ``t`` by
    Newton's method (the name is the entmax package's, which bisects).

    Args:
        z: scores, any floating dtype (computed in float64, returned in ``z``'s dtype).
        alpha: a number ``>= 1`` or a floating tensor broadcastable to ``z``'s shape with size 1
            along ``dim`` (one alpha per row); the gradient flows to it.  A number of exactly 1
            or 2 gives :func:`softmax` / :func:`sparsemax`.
        dim, mask, validate: as for the other ops (a fully masked row gives zeros).

    Raises:
        ValueError: NaN or +inf at an unmasked position of ``z``, ``alpha`` below 1, NaN or
            infinite (if ``validate``), or shapes that do not broadcast.
    """
    if isinstance(alpha, numbers.Real) and not isinstance(alpha, bool) and float(alpha) in (1.0, 2.0):
        if float(alpha) == 1.0:
            return softmax(z, None, dim, mask, validate=validate)
        return sparsemax(z, dim, mask, validate=validate)
    return _alpha_transform("entmax_bisect", z, None, alpha, dim, mask, validate)


def centmax(
    z: Tensor, u, alpha: Any = 1.5, dim: int = -1, mask: Optional[Tensor] = None, *, validate: bool = True
) -> Tensor:
    """Constrained alpha-entmax: ``argmax p.z + H_alpha(p)`` s.t. ``p`` in the simplex, ``p <= u``.

    ``p_j = min(u_j, [(a - 1) (z_j - t)]_+^(1/(a - 1)))`` with ``t`` such that ``sum(p) = 1``
    (derivation in :mod:`scanmt.ops.entmax`).  ``alpha = 1`` is :func:`csoftmax`, ``alpha = 2``
    :func:`csparsemax` (a number of exactly 1 or 2 calls them).

    Args:
        z: scores, any floating dtype (computed in float64, returned in the promoted dtype of
            ``z`` and a floating ``u``).
        u: upper bounds, broadcastable with ``z``; ``+inf`` means unbounded, ``u >= 1`` never
            binds, ``u`` in ``[-1e-6, 0)`` is read as 0.
        alpha: a number ``>= 1`` or a floating tensor broadcastable to ``z``'s shape with size 1
            along ``dim`` (one alpha per row); the gradient flows to it.
        dim: the dimension that sums to 1.
        mask: optional bool tensor (True = may receive attention); masked positions (and
            ``z == -inf``) get 0 and a zero gradient; a fully masked row gives all zeros.
        validate: check inputs (one host synchronisation); False skips it.

    Returns:
        ``p``; ``0 <= p <= u``, rows sum to 1.  If the bounds over the unmasked positions sum
        to at most 1 (within ``FEASIBILITY_TOL``), ``p = u`` there.

    Raises:
        ValueError: NaN or +inf in ``z``, NaN or negative ``u`` at an unmasked position,
            infeasible rows (``sum(u) < 1 - 1e-5``), ``alpha`` below 1, NaN or infinite, or
            shapes that do not broadcast.
        TypeError: ``u`` is None.
    """
    _checks.require_bounds("centmax", u)
    if isinstance(alpha, numbers.Real) and not isinstance(alpha, bool) and float(alpha) in (1.0, 2.0):
        if float(alpha) == 1.0:
            return csoftmax(z, u, dim, mask, validate=validate)
        return csparsemax(z, u, dim, mask, validate=validate)
    return _alpha_transform("centmax", z, u, alpha, dim, mask, validate)
