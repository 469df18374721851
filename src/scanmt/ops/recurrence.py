"""``bounded_recurrence``: fertility-bounded attention over ``T`` consecutive target positions, as one op.

Bounded attention (Malaviya, Ferreira and Martins, 2018) is sequential over the target positions: the
bounds of position ``t`` are what the fertility ``f`` leaves after the attention of the positions before
it.  For scores ``z [..., T, S]`` and, per row, fertilities ``f [..., S]`` (``inf`` at a sink) and the
cumulative attention ``attention_sum [..., S]`` before the first position::

    for t in 0 .. T-1:
        u   = max(0, f - attention_sum)                 # what each column may still receive
        p_t = transform(z_t + c * u, u)                 # c * 0 where u = inf (the sink); mask applied
        attention_sum = attention_sum + p_t             # or + mean over the heads of p_t (shared)

with ``transform`` one of csoftmax, csparsemax and centmax (``alpha`` fixed, or one per row: per head),
``c`` the exhaustion bonus.  It returns every ``p_t`` (``[..., T, S]``, exactly: attention files, AER,
the REP analysis and the coverage penalty read them) and the cumulative attention after the last
position, from which incremental decoding continues (``T = 1`` per step).

``shared``: the heads of dimension -3 of ``z`` share one cumulative attention, the running sum of their
mean; ``attention_sum`` then has size 1 there (``[..., 1, S]``).

Backends
--------
``"torch"``
    The loop above, one call of :func:`csoftmax` / :func:`csparsemax` / :func:`centmax` per position
    (their validation, their exact algorithms, autograd through the loop, double backward).  It is the
    reference, and on the CPU what the models have always computed, bit for bit.
``"triton"``
    One kernel program per row (per group of heads with ``shared``) loops over ``t`` with the cumulative
    attention in registers; the backward pass is a second kernel running backwards in time with the
    closed-form Jacobians of the transforms (csparsemax's is the paper's Proposition 1) and the adjoint
    of the cumulative attention (:mod:`scanmt.ops._triton.kernels`).  Inputs are float32, bfloat16 or
    float16, computed in float32 (centmax in float64, as its PyTorch op); ``S`` up to
    :data:`TRITON_MAX_S`.  Needs Triton (``pip install scanmt[gpu]``) and CUDA tensors, or Triton's
    interpreter for CPU tensors (``TRITON_INTERPRET=1``; the tests).  Its backward pass is not
    differentiable again.  It agrees with ``"torch"`` to float32 rounding (the tests: 1e-5 forward,
    1e-4 gradients).
``"auto"`` (default)
    ``"triton"`` for CUDA tensors when Triton imports and the input suits it (not float64, ``S`` at most
    :data:`TRITON_MAX_S`), else ``"torch"``.  :func:`use_backend` overrides it in a ``with`` block
    (benchmarks, tests).

Both backends compute in ``promote(z, f, attention_sum, float32)`` and return ``p`` and the attention
sum in that dtype.  Validation (``validate=True``): the errors of the transforms (NaN or ``+inf`` scores
at an unmasked position, NaN bounds, infeasible rows: the bounds of a row not fully masked sum below
``1 - FEASIBILITY_TOL`` at some step, as happens without a sink), as ``ValueError``; the triton backend
checks all steps at once after its kernel (one host synchronisation per call, the torch backend's
transforms one per step).
"""

from __future__ import annotations

import contextlib
import numbers
from typing import Any, Iterator, Optional, Tuple

import torch
from torch import Tensor

from . import _checks, _triton, deferred
from .csoftmax import csoftmax
from .csparsemax import csparsemax
from .entmax import ALPHA_ONE_TOL, centmax

#: the transforms the recurrence takes
TRANSFORMS = ("csoftmax", "csparsemax", "centmax")
#: the backends
BACKENDS = ("auto", "torch", "triton")
#: the most source columns the triton backend takes (one row lives in registers)
TRITON_MAX_S = 8192
#: centmax's alpha when none is given (scanmt.ops.centmax's default)
DEFAULT_ALPHA = 1.5

_FORCED_BACKEND: Optional[str] = None


@contextlib.contextmanager
def use_backend(backend: Optional[str]) -> Iterator[None]:
    """Make ``backend="auto"`` mean ``backend`` (``"torch"`` or ``"triton"``; None: automatic) in a
    ``with`` block."""
    global _FORCED_BACKEND
    if backend is not None and backend not in ("torch", "triton"):
        raise ValueError(f"use_backend: backend must be None, 'torch' or 'triton', got {backend!r}")
    old, _FORCED_BACKEND = _FORCED_BACKEND, backend
    try:
        yield
    finally:
        _FORCED_BACKEND = old


def _transform(name: str, z: Tensor, u: Tensor, mask: Optional[Tensor], alpha: Any, validate: bool) -> Tensor:
    """One position's transform (the ops' public functions, as the model registry calls them)."""
    if name == "csoftmax":
        return csoftmax(z, u, dim=-1, mask=mask, validate=validate)
    if name == "csparsemax":
        return csparsemax(z, u, dim=-1, mask=mask, validate=validate)
    return centmax(z, u, alpha, dim=-1, mask=mask, validate=validate)


def _torch_loop(
    z: Tensor, f: Tensor, s: Tensor, transform: str, mask: Optional[Tensor], exhaustion: float, alpha: Any,
    shared: bool, validate: bool,
) -> Tuple[Tensor, Tensor]:
    """The reference: one transform call per position (module docstring)."""
    rows = []
    for z_t in z.unbind(-2):
        u = (f - s).clamp_min(0.0)
        if exhaustion:
            z_t = z_t + exhaustion * torch.where(torch.isfinite(u), u, torch.zeros_like(u))
        p_t = _transform(transform, z_t, u, mask, alpha, validate)
        s = s + (p_t.mean(-2, keepdim=True) if shared else p_t)
        rows.append(p_t)
    return torch.stack(rows, dim=-2), s


def _broadcast(name: str, what: str, t: Tensor, shape: torch.Size) -> Tensor:
    """``t`` expanded to ``shape`` (``ValueError`` where it does not broadcast to exactly that)."""
    if t.shape == shape:  # the models' usual case, without torch.broadcast_shapes's Python (once per LSTM step)
        return t
    try:
        ok = torch.broadcast_shapes(t.shape, shape) == shape
    except RuntimeError:
        ok = False
    if not ok:
        raise ValueError(f"{name}: {what} of shape {tuple(t.shape)} cannot be broadcast to {tuple(shape)}")
    return t.expand(shape)


def _check_tensor(name: str, what: str, t: Any, z: Tensor) -> Tensor:
    if not isinstance(t, Tensor):
        raise TypeError(f"{name}: {what} must be a torch.Tensor, got {type(t).__name__}")
    if not t.dtype.is_floating_point:
        raise TypeError(f"{name}: {what} must be a floating-point tensor, got dtype {t.dtype}")
    if t.device != z.device:
        raise ValueError(f"{name}: z is on {z.device} but {what} is on {t.device}")
    return t


def _alpha(name: str, transform: str, alpha: Any, z: Tensor, row_shape: torch.Size) -> Any:
    """centmax's alpha: a number, or a tensor broadcast to one value per row (``[..., 1]``); None for the
    other transforms."""
    if transform != "centmax":
        if alpha is not None:
            raise ValueError(f"{name}: alpha is for centmax only, got alpha with transform={transform!r}")
        return None
    if alpha is None:
        return DEFAULT_ALPHA
    if isinstance(alpha, numbers.Real) and not isinstance(alpha, bool):
        return float(alpha)
    alpha = _check_tensor(name, "alpha", alpha, z)
    _broadcast(name, "alpha (one per row)", alpha, row_shape[:-1] + (1,))
    return alpha  # not expanded: the torch backend gives it to the transforms as it is


def _pick(backend: str, z: Tensor, ct: torch.dtype, name: str) -> str:
    if backend not in BACKENDS:
        raise ValueError(f"{name}: backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if backend == "auto":
        if _FORCED_BACKEND is not None:
            return _FORCED_BACKEND
        suits = ct != torch.float64 and z.shape[-1] <= TRITON_MAX_S
        return "triton" if z.device.type == "cuda" and suits and _triton.available() else "torch"
    return backend


def _check_triton(name: str, z: Tensor, ct: torch.dtype) -> None:
    if not _triton.available():
        raise RuntimeError(f"{name}: backend='triton' needs Triton (pip install scanmt[gpu])")
    if z.device.type != "cuda" and not _triton.interpreted():
        raise ValueError(f"{name}: backend='triton' needs CUDA tensors (or TRITON_INTERPRET=1 for Triton's "
                         f"interpreter), got z on {z.device}")
    if ct == torch.float64:
        raise ValueError(f"{name}: backend='triton' computes in float32; float64 inputs need backend='torch'")
    if z.shape[-1] > TRITON_MAX_S:
        raise ValueError(f"{name}: backend='triton' takes at most {TRITON_MAX_S} source columns, got {z.shape[-1]}")


def bounded_recurrence(
    z: Tensor,
    fertility: Tensor,
    transform: str,
    *,
    mask: Optional[Tensor] = None,
    exhaustion: float = 0.0,
    attention_sum: Optional[Tensor] = None,
    alpha: Any = None,
    shared: bool = False,
    backend: str = "auto",
    validate: bool = True,
) -> Tuple[Tensor, Tensor]:
    """Fertility-bounded attention over ``T`` consecutive positions (see :mod:`scanmt.ops.recurrence`).

    Args:
        z: scores ``[..., T, S]`` of ``T`` consecutive target positions over ``S`` source columns.
        fertility: bounds ``f``, broadcastable to the rows ``[..., S]`` (``inf`` at a sink, 0 at padding).
        transform: ``"csoftmax"``, ``"csparsemax"`` or ``"centmax"``.
        mask: bool, broadcastable to ``[..., S]``; True = may receive attention (False gets exactly 0).
        exhaustion: ``c``, the bonus ``c * u`` added to the scores of columns with a finite bound.
        attention_sum: the cumulative attention before the first position, broadcastable to ``[..., S]``
            (``[..., 1, S]`` with ``shared``); zeros if None.
        alpha: centmax's alpha (a number >= 1, default 1.5, or a tensor broadcastable to ``[..., 1]``: one
            per row, e.g. per head; it receives a gradient); None for the other transforms.
        shared: the heads (dimension -3 of ``z``) share one cumulative attention: the running sum of
            their mean.
        backend: ``"auto"``, ``"torch"`` or ``"triton"`` (module docstring).
        validate: check the inputs (the ops' errors); False skips the host synchronisation.

    Returns:
        ``p [..., T, S]`` (every position's attention; ``0 <= p <= u``, rows sum to 1, exactly 0 where
        masked) and the cumulative attention after the last position (``[..., S]``, or ``[..., 1, S]``
        with ``shared``), both in ``promote(z, fertility, attention_sum, float32)``.

    Raises:
        ValueError: an unknown transform or backend, shapes that do not broadcast, the transforms'
            invalid inputs (if ``validate``), a backend that cannot run these inputs.
        TypeError: non-tensor or non-floating ``z`` / ``fertility``, a non-bool mask.
    """
    name = "bounded_recurrence"
    if transform not in TRANSFORMS:
        raise ValueError(f"{name}: transform must be one of {', '.join(TRANSFORMS)}, got {transform!r}")
    row_shape, state_shape, ct = _check_shapes(name, z, fertility, mask, attention_sum, shared)
    if not isinstance(exhaustion, numbers.Real) or isinstance(exhaustion, bool):
        raise TypeError(f"{name}: exhaustion must be a real number, got {type(exhaustion).__name__}")
    a = _alpha(name, transform, alpha, z, row_shape)
    s0 = attention_sum.to(ct) if attention_sum is not None else torch.zeros(state_shape, dtype=ct, device=z.device)
    if z.numel() == 0:  # no position (or no row, or no column): nothing changes
        return z.to(ct) * 0, s0
    if _pick(backend, z, ct, name) == "torch":
        return _torch_loop(z.to(ct), fertility.to(ct), s0, transform, mask, float(exhaustion), a, shared, validate)
    _check_triton(name, z, ct)
    return _triton_apply(name, z, fertility, s0, transform, mask, float(exhaustion), a, shared, validate, ct)


def _check_shapes(
    name: str, z: Any, fertility: Any, mask: Any, attention_sum: Any, shared: bool
) -> Tuple[torch.Size, torch.Size, torch.dtype]:
    """Check the tensors; returns the rows' shape ``[..., S]``, the attention sum's (size 1 at the heads
    with ``shared``) and the compute dtype."""
    if not isinstance(z, Tensor):
        raise TypeError(f"{name}: z must be a torch.Tensor, got {type(z).__name__}")
    _check_tensor(name, "z", z, z)
    if z.dim() < (3 if shared else 2):
        raise ValueError(f"{name}: z must be [..., T, S]" + (" with the heads at dimension -3 (shared)" if shared
                         else "") + f", got shape {tuple(z.shape)}")
    if fertility is None:
        raise TypeError(f"{name}: fertility (the bounds f) is required, got None")
    _check_tensor(name, "fertility", fertility, z)
    row_shape = z.shape[:-2] + z.shape[-1:]
    state_shape = row_shape[:-2] + (1,) + row_shape[-1:] if shared else row_shape
    _broadcast(name, "fertility", fertility, row_shape)
    if mask is not None:
        _checks.check_mask(name, mask, z)
        _broadcast(name, "mask", mask, row_shape)
    ct = torch.promote_types(torch.promote_types(z.dtype, fertility.dtype), torch.float32)
    if attention_sum is not None:
        _check_tensor(name, "attention_sum", attention_sum, z)
        _broadcast(name, "attention_sum" + (" (shared: size 1 at the heads)" if shared else ""), attention_sum,
                   state_shape)
        ct = torch.promote_types(ct, attention_sum.dtype)
    return row_shape, state_shape, ct


def _bad_alphas(alpha: Tensor) -> Tensor:
    """Where alpha is NaN, infinite or below 1."""
    return ~(torch.ge(alpha, 1.0) & torch.lt(alpha, float("inf")))


def _alpha_bad(alpha: Tensor) -> Tensor:
    """Whether some alpha is NaN, infinite or below 1 (a 0-d bool tensor, no host read)."""
    return _bad_alphas(alpha).any()


def _raise_if_bad_alpha(name: str, alpha: Tensor) -> None:
    bad = _bad_alphas(alpha)
    if bool(bad.any()):
        raise ValueError(f"{name}: alpha must be finite and >= 1, got {float(alpha[bad][0]):.6g}")


def _triton_apply(
    name: str, z: Tensor, fertility: Tensor, s0: Tensor, transform: str, mask: Optional[Tensor],
    exhaustion: float, alpha: Any, shared: bool, validate: bool, ct: torch.dtype,
) -> Tuple[Tensor, Tensor]:
    """The triton backend: centmax's alpha as one float64 value per row (a number of exactly 1 or 2 is
    csoftmax / csparsemax, as :func:`centmax` does), checked, then the kernels."""
    from ._triton.function import BoundedRecurrenceFunction

    row_shape = z.shape[:-2] + z.shape[-1:]
    state_shape = row_shape[:-2] + (1,) + row_shape[-1:] if shared else row_shape
    has_one = isinstance(alpha, Tensor)  # a tensor may hold rows at 1 (csoftmax rows): the kernel looks for them
    if transform == "centmax" and not isinstance(alpha, Tensor):
        if alpha in (1.0, 2.0):
            transform, alpha = ("csoftmax" if alpha == 1.0 else "csparsemax"), None
        else:
            if validate and not 1.0 <= alpha < float("inf"):
                raise ValueError(f"{name}: alpha must be finite and >= 1, got {alpha:.6g}")
            has_one = alpha - 1.0 < ALPHA_ONE_TOL
            alpha = torch.full(row_shape[:-1] + (1,), alpha, dtype=torch.float64, device=z.device)
    elif isinstance(alpha, Tensor):
        if validate:
            values = alpha.detach().reshape(-1)
            if deferred.deferring():
                deferred.defer(values, _alpha_bad, lambda: _raise_if_bad_alpha(name, values))
            else:
                _raise_if_bad_alpha(name, values)
        alpha = alpha.expand(row_shape[:-1] + (1,))
    p, s = BoundedRecurrenceFunction.apply(
        z, fertility.expand(row_shape), s0.expand(state_shape), alpha, None if mask is None else mask.expand(row_shape),
        transform, exhaustion, shared, validate, has_one,
    )
    return p.to(ct), s.to(ct)
