"""Input handling shared by the ops: types, broadcasting, layout, dtype, validation.

Everything here is private.  The ops (through :class:`._function.TransformFunction`)
call, in this order:

1. :func:`broadcast_inputs` (outside autograd): type checks, broadcasting of
   ``z``, ``u`` and ``mask`` to one shape, normalisation of ``dim``;
2. :class:`Rows` (inside the autograd ``Function``): moves ``dim`` last,
   flattens everything else into rows, upcasts to the compute dtype, and puts
   results back into the caller's layout and dtype;
3. :class:`Bounds` and :func:`raise_if_invalid`: per-row views of ``u`` and,
   when ``validate=True``, a few reductions and a single host synchronisation;
   the detailed error message is only assembled on the (slow) failure path;
4. :func:`native_kernels`: on the CPU, the compiled kernels of :mod:`._native`
   replace steps 3 and 4 (validation included) in one call when available;
5. :func:`choose_method`: otherwise, which exact PyTorch algorithm runs
   (``dense``, ``iter`` or ``sort``).  :func:`use_method` forces one of these
   or ``native``, and :func:`use_native` forbids the kernels, for tests and
   benchmarks.

Performance notes (CPU, PyTorch 2.x): each tensor op costs a couple of
microseconds of overhead, a Python scalar argument about one more (hence the
cached constants of :class:`Consts`), and kernels that read or write bool
tensors (comparisons into bool, ``where``, ``masked_fill``) are several times
slower than float arithmetic on large inputs (hence :func:`gt_float`).
"""

from __future__ import annotations

import contextlib
import numbers
from typing import Callable, Iterator, Optional, Tuple

import torch
from torch import Tensor

from . import _native, deferred

#: Rows whose sum of ``u`` over unmasked positions is below ``1 - FEASIBILITY_TOL``
#: are infeasible (``ValueError``).  Rows with ``sum(u) <= 1`` that are not
#: infeasible return ``p = u`` (clamped at 0) exactly.
FEASIBILITY_TOL = 1e-5

#: Entries of ``u`` in ``[-NEGATIVE_TOL, 0)`` (rounding noise) are read as 0;
#: anything more negative raises ``ValueError``.
NEGATIVE_TOL = 1e-6

# Algorithm selection, for tests and benchmarks only.  ``None`` = automatic, see
# native_kernels and choose_method.
_FORCED_METHOD: Optional[str] = None
_NATIVE_ALLOWED = True
METHODS = ("native", "dense", "iter", "sort")


@contextlib.contextmanager
def use_method(method: Optional[str]) -> Iterator[None]:
    """Force ``"native"``, ``"dense"``, ``"iter"`` or ``"sort"`` (``None``: automatic)
    in a ``with`` block.

    ``"native"`` forces the compiled CPU kernels for the forward passes of
    sparsemax, csparsemax and csoftmax (``RuntimeError`` if they are unavailable;
    other devices and ops choose automatically); the others force that PyTorch
    algorithm.  An op without a ``"dense"`` variant uses ``"sort"`` instead.
    """
    global _FORCED_METHOD
    if method is not None and method not in METHODS:
        raise ValueError(f"method must be None or one of {METHODS}, got {method!r}")
    old, _FORCED_METHOD = _FORCED_METHOD, method
    try:
        yield
    finally:
        _FORCED_METHOD = old


@contextlib.contextmanager
def use_native(enabled: bool) -> Iterator[None]:
    """Allow (default) or forbid the native kernels in automatic selection."""
    global _NATIVE_ALLOWED
    old, _NATIVE_ALLOWED = _NATIVE_ALLOWED, bool(enabled)
    try:
        yield
    finally:
        _NATIVE_ALLOWED = old


def native_kernels(t: Tensor):
    """The compiled kernels (``_native``) to run the forward pass of ``t`` with, or ``None``.

    Automatic selection uses them for every CPU input when they are available
    (built on the first call, see :mod:`._native`); a forced PyTorch method,
    ``use_native(False)`` and other devices never do.
    """
    forced = _FORCED_METHOD
    if forced is None:
        if not _NATIVE_ALLOWED or t.device.type != "cpu":
            return None
        return _native.get()
    if forced != "native" or t.device.type != "cpu":
        return None
    mod = _native.get()
    if mod is None:
        raise RuntimeError(f"use_method('native'): the native kernels are unavailable ({_native.info()['reason']})")
    return mod


def choose_method(t: Tensor, dense_work: int, dense_max: int, iter_min: int) -> str:
    """Pick the PyTorch algorithm for a ``[rows, J]`` input ``t``.

    Off the CPU: the sort (no data-dependent control flow, so no host
    synchronisation).  On the CPU, where branching on data is free: the dense
    algorithm when its largest temporary (``dense_work`` elements; 0 if the op has
    none) is at most ``dense_max``, else the iteration for inputs of at least
    ``iter_min`` elements, else the sort.
    """
    if _FORCED_METHOD is not None and _FORCED_METHOD != "native":
        return "sort" if _FORCED_METHOD == "dense" and not dense_work else _FORCED_METHOD
    if t.device.type != "cpu":
        return "sort"
    if dense_work and dense_work <= dense_max:
        return "dense"
    return "iter" if t.numel() >= iter_min else "sort"


# ----------------------------------------------------------------------------
# Types, broadcasting, dim
# ----------------------------------------------------------------------------


def compute_dtype(*dtypes: torch.dtype) -> torch.dtype:
    """At least float32: half precision inputs are upcast internally."""
    dt = dtypes[0]
    for other in dtypes[1:]:
        dt = torch.promote_types(dt, other)
    if dt in (torch.float16, torch.bfloat16) or not dt.is_floating_point:
        return torch.float32
    return dt


def require_bounds(name: str, u: Optional[object]) -> None:
    """``TypeError`` naming the argument when a constrained op is called without bounds."""
    if u is None:
        raise TypeError(
            f"{name}: u (the upper bounds) is required: pass a tensor broadcastable with z or a number "
            f"(u >= 1 never binds), got None"
        )


def check_mask(name: str, mask: object, z: Tensor) -> None:
    """``TypeError`` for a mask that is not a bool tensor, ``ValueError`` for one on another device than ``z``."""
    if not isinstance(mask, Tensor) or mask.dtype != torch.bool:
        what = f"dtype {mask.dtype}" if isinstance(mask, Tensor) else type(mask).__name__
        raise TypeError(f"{name}: mask must be a bool tensor (True = may receive attention), got {what}")
    if mask.device != z.device:
        raise ValueError(f"{name}: z is on {z.device} but mask is on {mask.device}")


def broadcast_inputs(
    name: str,
    z: Tensor,
    u: Optional[object],
    mask: Optional[Tensor],
    dim: int,
) -> Tuple[Tensor, Optional[Tensor], Optional[Tensor], int, torch.dtype]:
    """Check types, broadcast ``z``, ``u`` and ``mask`` together, normalise ``dim``.

    Returns ``(z, u, mask, dim, out_dtype)`` with all tensors of one shape (via
    ``expand``, so gradients are summed back over broadcast dimensions by
    autograd) and ``0 <= dim < z.dim()``.
    """
    if not isinstance(z, Tensor):
        raise TypeError(f"{name}: z must be a torch.Tensor, got {type(z).__name__}")
    if not z.dtype.is_floating_point:
        raise TypeError(f"{name}: z must be a floating-point tensor, got dtype {z.dtype}")
    out_dtype = z.dtype
    if u is not None:
        if isinstance(u, numbers.Real) and not isinstance(u, bool):
            u = torch.tensor(float(u), dtype=z.dtype, device=z.device)
        elif not isinstance(u, Tensor):
            raise TypeError(f"{name}: u must be a torch.Tensor or a real number, got {type(u).__name__}")
        if u.dtype == torch.bool or u.is_complex():
            raise TypeError(f"{name}: u must be a real (integer or floating) tensor, got dtype {u.dtype}")
        if u.device != z.device:
            raise ValueError(f"{name}: z is on {z.device} but u is on {u.device}")
        if u.dtype.is_floating_point:
            out_dtype = torch.promote_types(z.dtype, u.dtype)
    if mask is not None:
        check_mask(name, mask, z)

    shape = z.shape
    if u is not None and u.shape != shape:
        try:
            shape = torch.broadcast_shapes(shape, u.shape)
        except RuntimeError:
            raise ValueError(
                f"{name}: z of shape {tuple(z.shape)} and u of shape {tuple(u.shape)} cannot be broadcast together"
            ) from None
    if mask is not None and mask.shape != shape:
        try:
            mshape = torch.broadcast_shapes(shape, mask.shape)
        except RuntimeError:
            mshape = None
        if mshape != shape:
            target = "z" if u is None else "the broadcast shape of z and u"
            raise ValueError(
                f"{name}: mask of shape {tuple(mask.shape)} cannot be broadcast to {target}, {tuple(shape)}"
            )
    nd = len(shape)
    if nd == 0:
        raise ValueError(f"{name}: z must have at least one dimension (the one to normalise over)")
    if not isinstance(dim, int) or isinstance(dim, bool):
        raise TypeError(f"{name}: dim must be an int, got {type(dim).__name__}")
    if not -nd <= dim < nd:
        raise IndexError(f"{name}: dim {dim} is out of range for a tensor with {nd} dimensions")
    dim %= nd

    if z.shape != shape:
        z = z.expand(shape)
    if u is not None and u.shape != shape:
        u = u.expand(shape)
    if mask is not None and mask.shape != shape:
        mask = mask.expand(shape)
    return z, u, mask, dim, out_dtype


# ----------------------------------------------------------------------------
# Row layout
# ----------------------------------------------------------------------------


class Rows:
    """Moves ``dim`` last and flattens the other dimensions into rows.

    ``take`` returns a ``[rows, J]`` view (or a copy where the layout or the
    dtype requires one); ``give`` inverts it.  Input tensors are never written to.
    """

    __slots__ = ("dim", "last", "moved_shape", "J")

    def __init__(self, shape: torch.Size, dim: int) -> None:
        self.dim = dim
        self.last = dim == len(shape) - 1
        if self.last:
            self.moved_shape = shape
        else:
            s = list(shape)
            s.append(s.pop(dim))
            self.moved_shape = torch.Size(s)
        self.J = shape[dim]

    def take(self, t: Tensor, dtype: Optional[torch.dtype] = None) -> Tensor:
        if not self.last:
            t = t.movedim(self.dim, -1)
        if t.dim() != 2:  # [rows, J] already: no view needed (a microsecond on small inputs)
            t = t.reshape(-1, self.J)
        if dtype is not None and t.dtype != dtype:
            t = t.to(dtype)
        return t

    def give(self, t: Tensor, dtype: torch.dtype) -> Tensor:
        if t.shape != self.moved_shape:
            t = t.reshape(self.moved_shape)
        if not self.last:
            t = t.movedim(-1, self.dim)
        if t.dtype != dtype:
            t = t.to(dtype)
        return t


# ----------------------------------------------------------------------------
# Masking and validation
# ----------------------------------------------------------------------------
#
# Implementation note: on CPUs, PyTorch kernels that read or write bool tensors
# (comparisons into bool, ``where``, ``masked_fill``) are several times slower
# than float arithmetic on the same number of elements.  The hot paths below
# therefore use float 0/1 masks (``torch.gt(a, b, out=float)``), ``relu``,
# ``sign``, ``clamp`` and sums; bool tensors appear only per row or on small inputs.


class Consts:
    """Cached 0-dim tensors for one dtype and device.

    PyTorch converts a Python scalar argument into a tensor on every call (about a
    microsecond each); the small-input paths make dozens of calls, so they pass
    these instead.
    """

    def __init__(self, dtype: torch.dtype, device: torch.device) -> None:
        fi = torch.finfo(dtype)

        def c(v: float) -> Tensor:
            return torch.full((), v, dtype=dtype, device=device)

        self.zero, self.half, self.one, self.two = c(0.0), c(0.5), c(1.0), c(2.0)
        self.ninf, self.pinf, self.nan = c(float("-inf")), c(float("inf")), c(float("nan"))
        #: sums of exp(z - max z) below this are too imprecise to be trusted
        self.underflow = c(1e-30 if dtype == torch.float32 else 1e-290)
        self.fmin, self.fmin4, self.tiny, self.big = c(fi.min), c(fi.min / 4), c(fi.tiny), c(1e30)
        self.feasible = c(1.0 - FEASIBILITY_TOL)
        self.negtol = c(-NEGATIVE_TOL)
        #: below this |reference| the rounding of z - reference costs < 1e-6 (float32)
        self.polish_at = c(8.0 if dtype == torch.float32 else 1e6)
        self.fmin_py = fi.min
        #: a residual of f at most this (times the scale of its terms) is rounding noise
        self.eps4 = c(4 * fi.eps)
        self._ar: dict = {}
        self.dtype, self.device = dtype, device

    def plus_minus(self, n: int) -> Tensor:
        """``[2n, 1]``: ``+1`` n times, then ``-1`` n times."""
        key = ("pm", n)
        t = self._ar.get(key)
        if t is None:
            t = torch.ones((2 * n, 1), dtype=self.dtype, device=self.device)
            t[n:] = -1.0
            self._ar[key] = t
        return t

    def arange1(self, n: int) -> Tensor:
        """``1, 2, ..., n``."""
        t = self._ar.get(n)
        if t is None:
            t = self._ar[n] = torch.arange(1, n + 1, dtype=self.dtype, device=self.device)
        return t

    def inv_arange1(self, n: int, num: float = 1.0) -> Tensor:
        """``num / 1, num / 2, ..., num / n``."""
        key = ("inv", n, num)
        t = self._ar.get(key)
        if t is None:
            t = torch.arange(1, n + 1, dtype=self.dtype, device=self.device).reciprocal_().mul_(num)
            self._ar[key] = t
        return t

    def scalar(self, v: float) -> Tensor:
        """``v`` as a cached 0-dim tensor (for the constants that have no attribute)."""
        key = ("s", v)
        t = self._ar.get(key)
        if t is None:
            t = self._ar[key] = torch.full((), v, dtype=self.dtype, device=self.device)
        return t


_CONSTS: dict = {}


def consts(dtype: torch.dtype, device: torch.device) -> Consts:
    k = _CONSTS.get((dtype, device))
    if k is None:
        k = _CONSTS[(dtype, device)] = Consts(dtype, device)
    return k


def gt_float(a: Tensor, b: Tensor) -> Tensor:
    """``(a > b)`` as a 0/1 tensor of ``a``'s dtype (much faster than bool on CPU)."""
    return torch.gt(a, b, out=torch.empty_like(a))


def masked_scores(rows: Rows, z: Tensor, mask: Optional[Tensor], dtype: torch.dtype) -> Tensor:
    """``z`` as ``[rows, J]`` in ``dtype`` with masked positions set to ``-inf``.

    May return a view of the caller's tensor: callers must not write to it.
    """
    z2 = rows.take(z, dtype)
    if mask is not None:
        z2 = z2.masked_fill(~rows.take(mask), float("-inf"))
    return z2


#: rows whose threshold lies further than this from max(z) (in units of the scores) are
#: re-solved in a frame centred at the threshold (:func:`recentre`)
RECENTRE_AT = 1024.0


def recentre(
    z2: Tensor, r: Tensor, bound: Tensor, margin: float, solve: Callable[[Tensor, Tensor], Tensor]
) -> Tuple[Tensor, Tensor]:
    """Re-solve rows in frames centred at their threshold; returns ``(x, t)``: the solution
    is read off ``x - t`` (``p = clip(x - t, 0, u)``, or ``min(exp(x - t), u)``).

    A threshold found in the frame ``z - max(z)`` is only as precise as that frame: an entry
    far below the maximum is rounded there to ``eps |z - max(z)|``, so where the mass sits far
    below a capped maximum (``z = [1e30, 0.3, 0]``) the entries that carry it are lost.
    ``z2``: ``[R, J]`` scores of the rows to re-solve (``-inf`` = unusable) in their own
    frame; ``r``: ``[R, 1]``, their threshold there to within ``bound``.  Each round,
    in float64 (the compute dtype where a device lacks it), solves ``x = clamp(z - r, -B, B)``
    with ``B`` the error bound of ``r`` plus ``margin``: an entry beyond ``B`` keeps its status
    (capped above; zero, or negligible for csoftmax, below), and no value exceeds ``B``, so the
    threshold ``t = solve(x, B)`` in that frame errs by at most ``4 J eps B``.  ``r`` is kept
    as an unevaluated sum ``r_hi + r_lo`` (``r_hi`` the nearest number to it), so that
    ``x = (z - r_hi) - r_lo`` is exact near the threshold however large ``r`` is; ``r += t``.
    Rounds end once ``B`` is at most :data:`RECENTRE_AT` (three from 1e30 in float32).
    """
    dt = z2.dtype if z2.device.type == "mps" else torch.float64
    J = z2.shape[-1]
    z64, r_hi = z2.to(dt), r.to(dt).nan_to_num(nan=0.0)
    r_lo = torch.zeros_like(r_hi)
    usable = torch.gt(z64, float("-inf"))
    B = bound.to(dt).add(margin)
    shrink = 4.0 * J * torch.finfo(dt).eps
    for _ in range(16):
        x = torch.where(usable, torch.maximum(torch.minimum(z64 - r_hi - r_lo, B), -B), z64)
        t = solve(x, B)
        if float(B.amax()) <= RECENTRE_AT:
            break
        # r_hi + r_lo + t as r_hi + r_lo again, without rounding (Knuth's two-sum)
        b = r_lo + t.nan_to_num(nan=0.0)
        s = r_hi + b
        bb = s - r_hi
        r_hi, r_lo = s, (r_hi - (s - bb)) + (b - bb)
        B = B.mul(shrink).add(margin)
    return x, t


def shift(z2: Tensor, zmax: Tensor, k: Consts) -> Tensor:
    """``z - max(z)`` per row (a new tensor); rows that are entirely ``-inf`` stay ``-inf``."""
    return z2 - zmax.clamp(min=k.fmin)


class Bounds:
    """The bounds ``u`` of a constrained op, prepared per row.

    Attributes:
        uv: ``u`` as ``[rows, J]`` with masked positions set to 0 (unclamped: may
            hold ``+inf`` or ``-1e-7``); used by the backward pass.
        uc: ``clamp(u, 0, cap)`` at usable positions (``z > -inf``), 0 elsewhere.
            ``p <= 1`` on the simplex, so a bound above 1 never binds: any
            ``cap >= 1`` keeps the solution (``cap = 2`` also keeps the threshold
            of csparsemax unique).
        usum: row sums of ``uc``: a row is feasible iff ``usum >= 1`` and its
            bounds bind everywhere (``p = u``) iff ``usum <= 1``, for either cap.
        usable: 0/1 float, 1 where ``z > -inf``; ``None`` when every position is
            usable (no mask and no ``-inf`` score, known for free on the CPU).
        umin: the smallest entry of ``uv`` (a 0-dim tensor), when validating.
    """

    __slots__ = ("uv", "uc", "usum", "usable", "umin")

    def __init__(
        self, z2: Tensor, u: Tensor, mask: Optional[Tensor], rows: Rows, k: Consts, validate: bool, cap: float = 1.0
    ):
        uv = rows.take(u, k.dtype)
        if mask is not None:
            uv = uv.masked_fill(~rows.take(mask), 0.0)
        self.uv = uv
        self.uc = torch.clamp(uv, k.zero, k.one if cap == 1.0 else k.two)
        # skipping the mask saves two passes on large inputs; the test costs a sync
        if mask is None and z2.device.type == "cpu" and z2.numel() >= 4096 and bool(z2.amin() > k.ninf):
            self.usable: Optional[Tensor] = None
        else:
            self.usable = gt_float(z2, k.ninf)
            self.uc.mul_(self.usable)
        self.usum = self.uc.sum(-1, keepdim=True)
        self.umin = uv.amin() if validate and uv.numel() else None


def raise_if_invalid(name: str, zmax: Tensor, k: Consts, b: Optional[Bounds] = None) -> None:
    """Raise ``ValueError`` for NaN/+inf scores, NaN/negative bounds, infeasible rows.

    ``zmax`` is the per-row max of the masked scores (NaN propagates; ``-inf`` marks
    a fully masked row).  A few reductions, one host synchronisation; the message
    is assembled only on failure.  Off the CPU inside :func:`scanmt.ops.deferred_checks`
    the check is queued and runs at the block's end.
    """
    ok = torch.lt(zmax, k.pinf)  # False for NaN and +inf
    if b is not None:
        ok.logical_and_(torch.ge(b.usum, k.feasible).logical_or_(torch.eq(zmax, k.ninf)))
        flag = ok.all()
        if b.umin is not None:
            flag.logical_and_(torch.ge(b.umin, k.negtol))
    else:
        flag = ok.all()
    if zmax.device.type != "cpu" and deferred.deferring():  # one host read at the block's end
        deferred.defer(flag.reshape(1), _not_all, lambda: _raise_unless(flag, name, zmax, b))
        return
    _raise_unless(flag, name, zmax, b)


def _not_all(flags: Tensor) -> Tensor:
    return torch.logical_not(flags.all())


def _raise_unless(flag: Tensor, name: str, zmax: Tensor, b: Optional[Bounds]) -> None:
    if not bool(flag):
        _raise_details(name, zmax, b)


def _raise_details(name: str, zmax: Tensor, b: Optional[Bounds]) -> None:
    zmax = zmax.detach().reshape(-1).double().cpu()
    n = zmax.numel()
    nan_z = int(torch.isnan(zmax).sum())
    if nan_z:
        raise ValueError(f"{name}: z contains NaN at an unmasked position in {nan_z} of {n} rows")
    inf_z = int((zmax == float("inf")).sum())
    if inf_z:
        raise ValueError(
            f"{name}: z contains +inf at an unmasked position in {inf_z} of {n} rows "
            "(use mask, or -inf, to exclude a position)"
        )
    assert b is not None
    uv = b.uv.detach().double().cpu()
    nan_u = torch.isnan(uv).any(-1)
    if bool(nan_u.any()):
        raise ValueError(f"{name}: u contains NaN at an unmasked position in {int(nan_u.sum())} of {n} rows")
    neg = (uv < -NEGATIVE_TOL).any(-1)
    if bool(neg.any()):
        raise ValueError(
            f"{name}: u must be >= 0 (values down to -{NEGATIVE_TOL:g} are read as 0); "
            f"{int(neg.sum())} of {n} rows have a negative entry, the smallest is {float(uv.min()):.6g}"
        )
    usum = b.usum.detach().reshape(-1).double().cpu()
    live = zmax > float("-inf")
    infeasible = live & (usum < 1.0 - FEASIBILITY_TOL)
    k = int(infeasible.sum())
    worst = float(usum[infeasible].min())
    raise ValueError(
        f"{name}: infeasible upper bounds in {k} of {n} rows: the sum of u over unmasked positions "
        f"must be at least 1 (tolerance {FEASIBILITY_TOL:g}) but is as low as {worst:.6g} "
        f"(short by up to {1.0 - worst:.6g})"
    )

