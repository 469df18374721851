"""The Triton kernels of :func:`scanmt.ops.bounded_recurrence`: one program per row (or per group of rows).

A program holds a tile ``[BLOCK_G, BLOCK_S]``: the ``G`` rows of one group (the heads that share one
cumulative attention with ``shared``; a single row otherwise) over the ``S`` source columns, and loops
over the ``T`` target positions with the cumulative attention in registers::

    u     = max(0, f - attention_sum)
    z'    = z_t + c * u                      (c * 0 where u is +inf: the sink)
    p_t   = transform(z', u)                 (csoftmax, csparsemax or centmax)
    attention_sum += p_t                     (or the group's mean of p_t with SHARED)

Each transform's threshold is found per row by a safeguarded Newton iteration on
``phi(t) = sum_j min(u_j, q(z'_j - t)) = 1``: a bracket ``[lo, hi]`` with ``phi(lo) >= 1 >= phi(hi)``
shrinks at every evaluation, and a step is taken only inside it, else the bracket is halved.  The steps:

* csparsemax (float32), ``q(x) = [x]_+``: ``t += (phi - 1) / #free``, exact for a fixed partition of the
  columns into capped, free and zero ones (``_tau_newton`` of :mod:`scanmt.ops.csparsemax`); a row is done
  when two consecutive iterates have the same partition (the piece of ``phi`` between them is linear, so
  the second is the root), then takes one more such step (the *finish*).
* csoftmax (float32), ``q(x) = exp(x)``: from softmax's threshold, the exact threshold of the partition,
  ``t = log(sum_free exp(z')) - log(1 - sum_capped u)`` (the greedy capping of :mod:`scanmt.ops.csoftmax`);
  done as csparsemax.
* centmax (float64, as :mod:`scanmt.ops.entmax`), ``q(x) = [(a - 1) x]_+^(1/(a - 1))``: the step of
  :func:`scanmt.ops.entmax._newton_guarded`, taken only when it is also at most half the step before last;
  done when ``phi = 1`` to ``8 eps sqrt(S)``, when the bracket holds no float but its ends, or (``a <= 2``)
  when the step is at rounding; the free columns are then rescaled to the budget the capped ones leave
  (``_finish``).  Rows with ``a - 1 < 1e-6`` are csoftmax rows (in float64), as in the PyTorch op.

Scores are shifted by their row maximum first (``z' - max z'``), as the PyTorch ops do.  Rows whose bounds
sum to at most 1 over their usable columns (``u`` capped at 2 for csparsemax, 1 otherwise) get ``p = u``
(zeros for a fully masked row).

The backward kernel runs over ``t = T - 1, ..., 0`` with the adjoint ``A`` of the cumulative attention
after step ``t`` in registers, starting from the gradient of the returned attention sum.  With ``v = dp_t
+ A`` (``A / H`` with SHARED) it applies the transform's closed-form Jacobian (the one of the PyTorch op:
``m = sum_S w v / sum_S w``, ``dz' = w (v - m)``, ``du = 1[C] (v - m)`` with ``w = 1[S]`` for csparsemax,
``p 1[S]`` for csoftmax and ``p^(2 - a) 1[S]`` for centmax, ``S`` the free set and ``C`` the capped one,
plus centmax's gradient to ``a``), adds the exhaustion bonus's share ``c dz'`` to ``du`` where ``u`` is
finite, and passes ``du`` through ``u = max(0, f - attention_sum)`` where ``f - attention_sum >= 0``
(``torch.clamp_min``'s rule): ``df += du``, ``A -= du`` (summed over the group with SHARED).  It reads
the cumulative attention before each step and each step's threshold, which the forward kernel wrote
(``SAVE``), so that every set is decided as in the forward pass, bit for bit.

Layouts (all contiguous; ``R`` rows = ``NG`` groups of ``H`` rows): ``z`` ``[R, T, S]`` (float32, bfloat16
or float16, read as float32); ``f`` ``[R, S]`` float32; ``mask`` ``[R, S]`` uint8 (when ``HAS_MASK``);
``alpha`` ``[R]`` float64 (centmax); the cumulative attention ``[NG, S]`` with SHARED, else ``[R, S]``;
``p`` and ``dz`` ``[R, T, S]`` float32; ``tau`` ``[R, T]`` float32; ``hist`` (cumulative attention before
each step) ``[NG, T, S]`` / ``[R, T, S]``; ``stats`` ``[R, 2]`` float32: the number of unmasked columns
with a NaN or ``+inf`` score or a NaN bound, and the smallest sum of the capped bounds over the steps
of a row that is not fully masked (``+inf`` if none).
"""

from __future__ import annotations

import triton
import triton.language as tl

#: the transforms, as the kernels' TRANSFORM
CSOFTMAX: int = 0
CSPARSEMAX: int = 1
CENTMAX: int = 2

#: centmax rows with ``a - 1`` below this are csoftmax rows (scanmt.ops.entmax.ALPHA_ONE_TOL)
ALPHA_ONE_TOL: float = 1e-6


@triton.jit
def _expm1(x):
    """``exp(x) - 1`` without cancellation near 0 (Kahan's: ``(e - 1) x / log(e)``); Triton has no expm1."""
    e = tl.exp(tl.minimum(x, 709.0))  # float64 (centmax): exp(709) is finite
    d = e - 1.0
    safe = (d != 0.0) & (d != -1.0) & (e < float("inf"))
    return tl.where(safe, d * x / tl.log(tl.where(safe, e, 2.0)), tl.where(d == 0.0, x, d))


# The loops below inline their small steps: under Triton's interpreter every call of a jit function
# from another costs about a millisecond (it patches triton.language again).


@triton.jit
def _csparsemax_tau(zs, uc, usable, live, MAX_ITER: tl.constexpr):
    """csparsemax's threshold ``[G]`` on the shifted scores ``zs`` (``-inf`` where unusable), bounds
    ``uc`` in ``[0, 2]`` (0 where unusable); rows without ``live`` get 0.  Newton steps inside the
    bracket, else bisection (``_tau_newton`` of :mod:`scanmt.ops.csparsemax`)."""
    hi = tl.where(live, 0.0, 0.0).to(zs.dtype)  # phi(max zs = 0) = 0
    lo = tl.min(tl.where(usable, zs - uc, float("inf")), axis=1)  # every column capped: phi = sum(uc) > 1
    lo = tl.where(live, lo, hi)
    t = tl.maximum(lo, hi - 1.0)  # the sparsemax lower bound, where it is one
    done = live == 0
    newton = done & (done == 0)
    code_prev = tl.where(live, -1, -1)
    it = 0
    while (it < MAX_ITER) & (tl.min(done.to(tl.int32), axis=0) == 0):
        x = zs - t[:, None]
        pos = usable & (x > 0.0)
        cap = pos & (x >= uc)
        res = tl.sum(tl.minimum(tl.where(pos, x, 0.0), uc), axis=1) - 1.0
        # the partition in one reduction: #{z > t} + #{z - u >= t} * 2^14 (S < 2^13)
        code = tl.sum(pos.to(tl.int32) + cap.to(tl.int32) * 16384, axis=1)
        nfree = (code % 16384) - code // 16384
        above = res >= 0.0
        lo = tl.where(above, t, lo)
        hi = tl.where(above, hi, t)
        mid = 0.5 * (lo + hi)
        # the last Newton step stayed on one linear piece of phi (the sets only shrink as t grows, so
        # equal counts are equal sets): t is its root
        done = done | (newton & (code == code_prev)) | (mid <= lo) | (mid >= hi)
        t_new = t + res / tl.maximum(nfree, 1).to(t.dtype)
        newton = (nfree > 0) & (((t_new > lo) & (t_new < hi)) | (t_new == t)) & (done == 0)
        t = tl.where(done, t, tl.where(newton, t_new, mid))
        code_prev = code
        it += 1
    # the finish: one more step on the piece found (sum(p) = 1 to rounding)
    x = zs - t[:, None]
    pos = usable & (x > 0.0)
    nfree = tl.sum((pos & (x < uc)).to(tl.int32), axis=1)
    res = tl.sum(tl.minimum(tl.where(pos, x, 0.0), uc), axis=1) - 1.0
    return tl.where(live, t + res / tl.maximum(nfree, 1).to(t.dtype), 0.0)


@triton.jit
def _csoftmax_t(zs, uc, usable, live, MAX_ITER: tl.constexpr):
    """csoftmax's threshold ``t`` ``[G]`` (``p = min(u, exp(zs - t))``), in the dtype of ``zs``: from
    softmax's, the exact threshold of the current partition (the greedy capping of
    :mod:`scanmt.ops.csoftmax`, which only moves down) inside the bracket, else bisection."""
    n = tl.sum(usable.to(tl.int32), axis=1)
    hi = tl.log(tl.maximum(n, 1).to(zs.dtype))  # phi <= sum exp(zs) / n <= 1
    # every column with room capped: phi = sum(uc) > 1
    lo = tl.min(tl.where(usable & (uc > 0.0), zs - tl.log(tl.where(uc > 0.0, uc, 1.0)), float("inf")), axis=1)
    lo = tl.where(live, tl.minimum(lo, hi), hi)
    total = tl.sum(tl.where(usable, tl.exp(zs), 0.0), axis=1)
    t = tl.maximum(lo, tl.minimum(hi, tl.log(tl.where(total > 0.0, total, 1.0))))
    done = live == 0
    newton = done & (done == 0)
    ncap_prev = tl.where(live, -1, -1)
    it = 0
    while (it < MAX_ITER) & (tl.min(done.to(tl.int32), axis=0) == 0):
        q = tl.where(usable, tl.exp(tl.minimum(zs - t[:, None], 80.0)), 0.0)  # q >= 1 >= u is capped anyway
        cap = usable & (q >= uc)
        capped = tl.sum(tl.where(cap, uc, 0.0), axis=1)
        mass = tl.sum(tl.where(cap, 0.0, q), axis=1)  # of the free columns
        ncap = tl.sum(cap.to(tl.int32), axis=1)
        res = capped + mass - 1.0
        above = res >= 0.0
        lo = tl.where(above, t, lo)
        hi = tl.where(above, hi, t)
        mid = 0.5 * (lo + hi)
        done = done | (newton & (ncap == ncap_prev)) | (mid <= lo) | (mid >= hi)
        # the exact threshold for this partition: sum_free exp(zs - t') = 1 - sum_capped u
        # (bisection where the free mass underflows at t)
        budget = 1.0 - capped
        ok = (budget > 0.0) & (mass > 0.0)
        t_new = t + tl.log(tl.where(ok, mass, 1.0)) - tl.log(tl.where(ok, budget, 1.0))
        newton = ok & (((t_new > lo) & (t_new < hi)) | (t_new == t)) & (done == 0)
        t = tl.where(done, t, tl.where(newton, t_new, mid))
        ncap_prev = ncap
        it += 1
    return tl.where(live, t, 0.0)


@triton.jit
def _centmax_p(zs, uc, usable, live, am1, S, MAX_ITER: tl.constexpr):
    """centmax's ``p`` ``[G, BS]`` (float64) for the rows' ``am1 = a - 1`` (at least 1e-6)."""
    inv = 1.0 / am1
    zmin = tl.min(tl.where(usable, zs, float("inf")), axis=1)
    lo = tl.where(live, zmin - inv, -inv)  # every usable column capped (q >= 1 >= u)
    hi = tl.maximum(lo, 0.0)  # none positive
    eps = 2.220446049250313e-16
    res_tol = 8.0 * eps * tl.sqrt(S * 1.0)
    tol = (tl.maximum(tl.abs(lo), tl.abs(hi)) + 1.0) * (4.0 * eps)
    steady = am1 <= 1.0
    t = tl.maximum(tl.minimum(-inv, hi), lo)
    dx1 = hi - lo
    dx2 = dx1
    done = live == 0
    it = 0
    while (it < MAX_ITER) & (tl.min(done.to(tl.int32), axis=0) == 0):
        y = tl.maximum(am1[:, None] * (zs - t[:, None]), 0.0)
        q = tl.where(y > 0.0, tl.exp(tl.minimum(tl.log(tl.where(y > 0.0, y, 1.0)) * inv[:, None], 80.0)), 0.0)
        free = uc > q
        mass = tl.sum(tl.where(free, q, 0.0), axis=1)
        slope = tl.sum(tl.where(free, q / tl.maximum(y, 2.2250738585072014e-308), 0.0), axis=1)
        res = tl.sum(tl.where(free, 0.0, uc), axis=1) + mass - 1.0
        above = res >= 0.0
        lo = tl.where(above, t, lo)
        hi = tl.where(above, hi, t)
        mid = 0.5 * (lo + hi)
        budget = mass - res  # 1 - the capped mass
        ok = (mass > 0.0) & (slope > 0.0) & (budget > 0.0)
        # dt = -S expm1(b log(B / S)) / (b S'), expm1 as Kahan's (e - 1) x / log(e) (Triton has none)
        x = am1 * tl.log(tl.where(ok, budget / tl.where(ok, mass, 1.0), 1.0))
        e = tl.exp(tl.minimum(x, 80.0))
        em1 = e - 1.0
        kahan = (em1 != 0.0) & (em1 != -1.0) & (e < float("inf"))
        em1 = tl.where(kahan, em1 * x / tl.log(tl.where(kahan, e, 2.0)), tl.where(em1 == 0.0, x, em1))
        dt = em1 * mass / (-am1 * tl.where(ok, slope, 1.0))
        t_new = t + dt
        small = (tl.abs(dt) <= tol) & ok & steady
        done = done | (tl.abs(res) <= res_tol) | small | (mid <= lo) | (mid >= hi)
        inside = ok & (t_new > lo) & (t_new < hi) & (tl.abs(dt) <= 0.5 * dx2)
        t_next = tl.where(done, tl.where(small, t_new, t), tl.where(inside, t_new, mid))
        dx2 = dx1
        dx1 = tl.abs(t_next - t)
        t = t_next
        it += 1
    t = tl.where(done, t, 0.5 * (lo + hi))
    # the finish: the free columns rescaled to the budget of the capped ones, clipped at u
    y = tl.maximum(am1[:, None] * (zs - t[:, None]), 0.0)
    q = tl.where(y > 0.0, tl.exp(tl.minimum(tl.log(tl.where(y > 0.0, y, 1.0)) * inv[:, None], 80.0)), 0.0)
    free = uc > q
    qf = tl.where(free, q, 0.0)
    capped = tl.where(free, 0.0, uc)
    budget = 1.0 - tl.sum(capped, axis=1)
    mass = tl.sum(qf, axis=1)
    scale = tl.where((mass > 0.0) & (budget > 0.0), budget / tl.where(mass > 0.0, mass, 1.0), 1.0)
    return tl.minimum(capped + qf * scale[:, None], uc)


@triton.jit
def _step_inputs(z_ptr, f, allowed, hist_t, offs_t, m2, exhaustion, CAP: tl.constexpr):
    """Step ``t``'s inputs (float32): the scores ``z'`` with the exhaustion bonus (``-inf`` where not
    usable), the bounds ``u``, the usable columns, the capped bounds ``uc``, the shifted scores and their
    row maxima, and the unmasked columns with a NaN / ``+inf`` score or a NaN bound."""
    z = tl.load(z_ptr + offs_t, mask=m2, other=float("-inf")).to(tl.float32)
    z = tl.where(allowed, z, float("-inf"))
    d = f - hist_t
    u = tl.where(d > 0.0, d, 0.0)
    bad = allowed & ((z != z) | (z == float("inf")) | (d != d))
    zp = z + exhaustion * tl.where(u < float("inf"), u, 0.0)
    usable = zp > float("-inf")
    uc = tl.where(usable, tl.minimum(u, CAP), 0.0)
    zmax = tl.max(tl.where(usable, zp, float("-inf")), axis=1)
    zs = tl.where(usable, zp - tl.where(zmax > float("-inf"), zmax, 0.0)[:, None], float("-inf"))
    return zp, u, d, usable, uc, zs, zmax, bad


@triton.jit
def _tile(pid, f_ptr, mask_ptr, H, S, SHARED: tl.constexpr, HAS_MASK: tl.constexpr, BLOCK_G: tl.constexpr,
          BLOCK_S: tl.constexpr):
    """The tile of program ``pid``: its rows (int64), the columns, the valid entries, the rows of the
    cumulative attention (the group's with SHARED), the entries that write it (the group's first row with
    SHARED), the offsets of ``[R, S]`` and of cumulative-attention tensors, the fertility (float32) and the
    unmasked entries."""
    g = tl.arange(0, BLOCK_G)
    cols = tl.arange(0, BLOCK_S)
    row = (pid * H + g).to(tl.int64)
    m2 = (g < H)[:, None] & (cols < S)[None, :]
    if SHARED:
        srow = pid.to(tl.int64) + 0 * row
        own = m2 & (g == 0)[:, None]
    else:
        srow = row
        own = m2
    rs = row[:, None] * S + cols[None, :]
    ss = srow[:, None] * S + cols[None, :]
    f = tl.load(f_ptr + rs, mask=m2, other=0.0)
    allowed = m2
    if HAS_MASK:
        allowed = allowed & (tl.load(mask_ptr + rs, mask=m2, other=0) != 0)
    return g, cols, row, m2, srow, own, rs, ss, f, allowed


@triton.jit
def bounded_forward(
    z_ptr, f_ptr, mask_ptr, s0_ptr, alpha_ptr,
    p_ptr, s_out_ptr, tau_ptr, hist_ptr, stats_ptr,
    T, S, H, exhaustion,
    TRANSFORM: tl.constexpr, SHARED: tl.constexpr, HAS_MASK: tl.constexpr, SAVE: tl.constexpr,
    HAS_ONE: tl.constexpr, BLOCK_G: tl.constexpr, BLOCK_S: tl.constexpr, MAX_ITER: tl.constexpr,
):
    g, cols, row, m2, srow, own, rs, ss, f, allowed = _tile(tl.program_id(0), f_ptr, mask_ptr, H, S, SHARED,
                                                            HAS_MASK, BLOCK_G, BLOCK_S)
    acc = tl.load(s0_ptr + ss, mask=m2, other=0.0)
    if TRANSFORM == 2:
        am1_raw = tl.load(alpha_ptr + row, mask=g < H, other=2.0) - 1.0
        one = am1_raw < 1e-6
        am1 = tl.maximum(am1_raw, 1e-6)
    bad_any = m2 & (m2 == 0)
    min_sum = tl.full([BLOCK_G], float("inf"), tl.float32)
    for t in range(T):
        offs_t = (row[:, None] * T + t) * S + cols[None, :]
        if SAVE:
            tl.store(hist_ptr + (srow[:, None] * T + t) * S + cols[None, :], acc, mask=own)
        if TRANSFORM == 1:
            zp, u, d, usable, uc, zs, zmax, bad = _step_inputs(z_ptr, f, allowed, acc, offs_t, m2, exhaustion, 2.0)
        else:
            zp, u, d, usable, uc, zs, zmax, bad = _step_inputs(z_ptr, f, allowed, acc, offs_t, m2, exhaustion, 1.0)
        usum = tl.sum(uc, axis=1)
        live = usum > 1.0
        bad_any = bad_any | bad
        min_sum = tl.where(zmax > float("-inf"), tl.minimum(min_sum, usum), min_sum)
        tau = tl.where(live, 0.0, 0.0)
        if TRANSFORM == 1:
            tau = _csparsemax_tau(zs, uc, usable, live, MAX_ITER)
            p = tl.where(usable, tl.minimum(tl.maximum(zs - tau[:, None], 0.0), uc), 0.0)
            tau = tl.where(live, tau, -3.4028234663852886e38)  # p = u: every usable column "capped", as the op
        elif TRANSFORM == 0:
            tau = _csoftmax_t(zs, uc, usable, live, MAX_ITER)
            p = tl.where(usable, tl.minimum(tl.exp(tl.minimum(zs - tau[:, None], 80.0)), uc), 0.0)
        else:
            zs64 = zs.to(tl.float64)
            uc64 = uc.to(tl.float64)
            p64 = _centmax_p(zs64, uc64, usable, live, am1, S, MAX_ITER)
            if HAS_ONE:
                t1 = _csoftmax_t(zs64, uc64, usable, live & one, MAX_ITER)
                p1 = tl.where(usable, tl.minimum(tl.exp(tl.minimum(zs64 - t1[:, None], 80.0)), uc64), 0.0)
                p64 = tl.where(one[:, None], p1, p64)
            p = p64.to(tl.float32)
        p = tl.where(live[:, None], p, uc)
        tl.store(p_ptr + offs_t, p, mask=m2)
        tl.store(tau_ptr + row * T + t, tau, mask=g < H)
        if SHARED:
            acc += (tl.sum(p, axis=0) / H)[None, :]
        else:
            acc += p
    tl.store(s_out_ptr + ss, acc, mask=own)
    tl.store(stats_ptr + row * 2, tl.sum(bad_any.to(tl.float32), axis=1), mask=g < H)
    tl.store(stats_ptr + row * 2 + 1, min_sum, mask=g < H)


@triton.jit
def _centmax_vjp(p, u, usable, v, am1_raw):
    """centmax's ``dz'``, ``du`` (float64 ``[G, BS]``) and ``dalpha`` ``[G]`` for the output gradient ``v``
    (:class:`scanmt.ops.entmax.AlphaEntmaxFunction`'s backward)."""
    tiny = 2.2250738585072014e-308
    free = (p > 0.0) & (u > p)
    pf = tl.where(free, p, 0.0)
    s = tl.log(tl.where(free, p, 1.0))  # log p on the free set, 0 elsewhere
    E = _expm1(s * -am1_raw[:, None])
    gw = pf + pf * E  # p^(2 - a) on the free set
    m = tl.sum(gw * v, axis=1) / tl.maximum(tl.sum(gw, axis=1), tiny)
    vm = v - m[:, None]
    dzp = gw * vm
    du = tl.where((p >= u) & usable, vm, 0.0)
    W = vm * pf
    P = tl.maximum(tl.sum(pf, axis=1), tiny)
    bb = tl.maximum(am1_raw, 1e-6)
    Eb = _expm1(s * -bb[:, None])
    e1 = tl.sum(pf * Eb, axis=1) / P
    Ws = W * s
    da = (tl.sum(W * (e1[:, None] - Eb), axis=1) / ((1.0 + e1) * bb) - tl.sum(Ws, axis=1)) / bb
    # alpha = 1: -(1/2) sum_S (v - m) p (s^2 - sum_S p s^2 / P)
    ps2 = tl.sum(pf * s * s, axis=1) / P
    limit = (tl.sum(Ws * s, axis=1) - ps2 * tl.sum(W, axis=1)) * -0.5
    return dzp, du, tl.where(am1_raw < 1e-6, limit, da)


@triton.jit
def bounded_backward(
    z_ptr, f_ptr, mask_ptr, alpha_ptr, p_ptr, tau_ptr, hist_ptr, dp_ptr, ds_out_ptr,
    dz_ptr, df_ptr, ds0_ptr, dalpha_ptr,
    T, S, H, exhaustion,
    TRANSFORM: tl.constexpr, SHARED: tl.constexpr, HAS_MASK: tl.constexpr, HAS_DP: tl.constexpr,
    BLOCK_G: tl.constexpr, BLOCK_S: tl.constexpr,
):
    g, cols, row, m2, srow, own, rs, ss, f, allowed = _tile(tl.program_id(0), f_ptr, mask_ptr, H, S, SHARED,
                                                            HAS_MASK, BLOCK_G, BLOCK_S)
    adj = tl.load(ds_out_ptr + ss, mask=m2, other=0.0)  # the adjoint of the cumulative attention after step t
    df = tl.zeros([BLOCK_G, BLOCK_S], dtype=tl.float32)
    if TRANSFORM == 2:
        am1_raw = tl.load(alpha_ptr + row, mask=g < H, other=2.0) - 1.0
        dalpha = tl.zeros([BLOCK_G], dtype=tl.float64)
    for i in range(T):
        t = T - 1 - i
        offs_t = (row[:, None] * T + t) * S + cols[None, :]
        hist_t = tl.load(hist_ptr + (srow[:, None] * T + t) * S + cols[None, :], mask=m2, other=0.0)
        if TRANSFORM == 1:
            zp, u, d, usable, uc, zs, zmax, bad = _step_inputs(z_ptr, f, allowed, hist_t, offs_t, m2, exhaustion, 2.0)
        else:
            zp, u, d, usable, uc, zs, zmax, bad = _step_inputs(z_ptr, f, allowed, hist_t, offs_t, m2, exhaustion, 1.0)
        p = tl.load(p_ptr + offs_t, mask=m2, other=0.0)
        if SHARED:
            v = adj / H
        else:
            v = adj
        if HAS_DP:
            v += tl.load(dp_ptr + offs_t, mask=m2, other=0.0)
        if TRANSFORM == 1:
            tau = tl.load(tau_ptr + row * T + t, mask=g < H, other=0.0)
            x = zs - tau[:, None]
            pos = usable & (x > 0.0)
            free = pos & (u > x)
            cap = pos & (u <= x)
            w = tl.where(free, 1.0, 0.0)
            m = tl.sum(w * v, axis=1) / tl.maximum(tl.sum(w, axis=1), 1.1754943508222875e-38)
            vm = v - m[:, None]
            dzp = w * vm
            du = tl.where(cap, vm, 0.0)
        elif TRANSFORM == 0:
            cap = usable & (u <= p)
            w = tl.where(usable & (u > p), p, 0.0)
            m = tl.sum(w * v, axis=1) / tl.maximum(tl.sum(w, axis=1), 1.1754943508222875e-38)
            vm = v - m[:, None]
            dzp = w * vm
            du = tl.where(cap, vm, 0.0)
        else:
            dzp64, du64, da = _centmax_vjp(p.to(tl.float64), u.to(tl.float64), usable, v.to(tl.float64), am1_raw)
            dalpha += da
            dzp = dzp64.to(tl.float32)
            du = du64.to(tl.float32)
        tl.store(dz_ptr + offs_t, dzp, mask=m2)
        du += exhaustion * tl.where(u < float("inf"), dzp, 0.0)
        gu = tl.where(m2 & (d >= 0.0), du, 0.0)
        df += gu
        if SHARED:
            adj -= tl.sum(gu, axis=0)[None, :]
        else:
            adj -= gu
    tl.store(df_ptr + rs, df, mask=m2)
    tl.store(ds0_ptr + ss, adj, mask=own)
    if TRANSFORM == 2:
        tl.store(dalpha_ptr + row, dalpha, mask=g < H)


def block_sizes(S: int, H: int) -> tuple[int, int]:
    """``(BLOCK_G, BLOCK_S)``: powers of two holding ``H`` rows and ``S`` columns (at least 16)."""
    return triton.next_power_of_2(max(H, 1)), max(16, triton.next_power_of_2(S))
