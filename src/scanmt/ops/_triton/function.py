"""The autograd ``Function`` that launches the Triton kernels of :mod:`.kernels`.

:class:`BoundedRecurrenceFunction` takes inputs already checked and broadcast by
:func:`scanmt.ops.bounded_recurrence` (``fertility``, ``mask`` and ``alpha`` expanded to the rows of ``z``,
``attention_sum`` to the rows or, with ``shared``, to one row per group of heads), lays them out as the
kernels read them, launches one program per row (per group with ``shared``), checks the kernel's
statistics (one host synchronisation, or queued by :func:`scanmt.ops.deferred_checks`; none with
``validate=False``) and saves what the backward kernel reads: the probabilities, each step's threshold and
the cumulative attention before each step.
"""

from __future__ import annotations

import contextlib
from typing import Any, ContextManager, Optional, Tuple

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from .. import _checks, deferred
from . import kernels

#: the kernels' TRANSFORM for each transform name
TRANSFORM_IDS = {"csoftmax": kernels.CSOFTMAX, "csparsemax": kernels.CSPARSEMAX, "centmax": kernels.CENTMAX}

#: the most iterations of a threshold's search at one step (bisection from the widest float64 bracket
#: down to rounding, at one halving every other step); rows end after 2 to 8 on attention rows
MAX_ITER = 256


def _num_warps(block_g: int, block_s: int) -> int:
    return max(1, min(8, block_g * block_s // 256))


def _stats_bad(stats: Tensor) -> Tensor:
    """Whether ``_raise_if_invalid`` would raise for ``stats [R, 2]`` (a 0-d bool tensor, no host read)."""
    return (torch.gt(stats[:, 0], 0) | torch.lt(stats[:, 1], 1.0 - _checks.FEASIBILITY_TOL)).any()


def _raise_if_invalid(name: str, stats: Tensor) -> None:
    """``ValueError`` for the rows the forward kernel flagged (``stats [R, 2]``: invalid entries, the
    smallest sum of the bounds)."""
    n_bad, low = (int(v) for v in torch.stack([
        torch.gt(stats[:, 0], 0).sum(), torch.lt(stats[:, 1], 1.0 - _checks.FEASIBILITY_TOL).sum()
    ]).tolist())
    rows = stats.shape[0]
    if n_bad:
        raise ValueError(f"{name}: z contains NaN or +inf, or fertility - attention_sum NaN, at an unmasked "
                         f"position in {n_bad} of {rows} rows")
    if low:
        worst = float(stats[:, 1].min())
        raise ValueError(
            f"{name}: infeasible upper bounds in {low} of {rows} rows: the sum of u = max(0, f - attention_sum) "
            f"over unmasked positions must be at least 1 at every step (tolerance {_checks.FEASIBILITY_TOL:g}) "
            f"but is as low as {worst:.6g} (short by up to {1.0 - worst:.6g})"
        )


class BoundedRecurrenceFunction(torch.autograd.Function):
    """``apply(z, f, s0, alpha, mask, transform, exhaustion, shared, validate, has_one) -> (p, attention_sum)``.

    ``z [..., T, S]`` (float32, bfloat16 or float16), ``f [..., S]`` and ``mask [..., S]`` (or None) with
    the rows of ``z``; ``s0`` ``[..., S]``, or ``[..., 1, S]`` with ``shared`` (the heads are dimension -3
    of ``z``); ``alpha`` ``[..., 1]`` (centmax) or None; ``has_one``: some alpha may be within
    ``ALPHA_ONE_TOL`` of 1 (those rows are csoftmax rows; the kernel then looks for them).  ``p`` is
    float32 of ``z``'s shape, the attention sum float32 of ``s0``'s shape.  Gradients flow to ``z``, ``f``,
    ``s0`` and ``alpha``; the backward pass is not differentiable again (``backend="torch"`` is).
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any, z: Tensor, f: Tensor, s0: Tensor, alpha: Optional[Tensor], mask: Optional[Tensor],
        transform: str, exhaustion: float, shared: bool, validate: bool, has_one: bool,
    ) -> Tuple[Tensor, Tensor]:
        *lead, T, S = z.shape
        R = z.numel() // (T * S)
        H = z.shape[-3] if shared else 1
        f32 = torch.float32
        zc = z.reshape(R, T, S).contiguous()
        fc = f.reshape(R, S).to(f32).contiguous()
        sc = s0.reshape(R // H, S).to(f32).contiguous()
        mc = mask.reshape(R, S).to(torch.uint8).contiguous() if mask is not None else zc
        ac = alpha.reshape(R).to(torch.float64).contiguous() if alpha is not None else fc
        has_one = alpha is not None and has_one
        save = any(ctx.needs_input_grad[:4])
        p = torch.empty(R, T, S, dtype=f32, device=z.device)
        s_out = torch.empty_like(sc)
        tau = torch.empty(R, T, dtype=f32, device=z.device)
        hist = torch.empty(R // H, T, S, dtype=f32, device=z.device) if save else p
        stats = torch.empty(R, 2, dtype=f32, device=z.device)
        block_g, block_s = kernels.block_sizes(S, H)
        with _on(z.device):
            kernels.bounded_forward[(R // H,)](
                zc, fc, mc, sc, ac, p, s_out, tau, hist, stats, T, S, H, float(exhaustion),
                TRANSFORM=TRANSFORM_IDS[transform], SHARED=shared, HAS_MASK=mask is not None, SAVE=save,
                HAS_ONE=has_one, BLOCK_G=block_g, BLOCK_S=block_s, MAX_ITER=MAX_ITER,
                num_warps=_num_warps(block_g, block_s), enable_fp_fusion=False,
            )
        if validate:
            name = f"bounded_recurrence({transform})"
            if deferred.deferring():
                deferred.defer(stats, _stats_bad, lambda: _raise_if_invalid(name, stats))
            else:
                _raise_if_invalid(name, stats)
        ctx.meta = (transform, float(exhaustion), shared, H, block_g, block_s, mask is not None)
        ctx.dtypes = (z.dtype, f.dtype, s0.dtype, None if alpha is None else alpha.dtype)
        ctx.shapes = (z.shape, f.shape, s0.shape, None if alpha is None else alpha.shape)
        if save:
            ctx.save_for_backward(zc, fc, mc, ac, p, tau, hist)
        return p.view(*lead, T, S), s_out.view(s0.shape)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, dp: Optional[Tensor], ds_out: Optional[Tensor]):  # type: ignore[override]
        zc, fc, mc, ac, p, tau, hist = ctx.saved_tensors
        transform, exhaustion, shared, H, block_g, block_s, has_mask = ctx.meta
        R, T, S = p.shape
        f32 = torch.float32
        dpc = dp.reshape(R, T, S).to(f32).contiguous() if dp is not None else p
        dsc = (ds_out.reshape(R // H, S).to(f32).contiguous() if ds_out is not None
               else torch.zeros(R // H, S, dtype=f32, device=p.device))
        dz = torch.empty_like(p)
        df = torch.empty(R, S, dtype=f32, device=p.device)
        ds0 = torch.empty_like(dsc)
        dalpha = torch.empty(R, dtype=torch.float64, device=p.device)
        with _on(p.device):
            kernels.bounded_backward[(R // H,)](
                zc, fc, mc, ac, p, tau, hist, dpc, dsc, dz, df, ds0, dalpha, T, S, H, exhaustion,
                TRANSFORM=TRANSFORM_IDS[transform], SHARED=shared, HAS_MASK=has_mask, HAS_DP=dp is not None,
                BLOCK_G=block_g, BLOCK_S=block_s, num_warps=_num_warps(block_g, block_s), enable_fp_fusion=False,
            )
        z_dt, f_dt, s_dt, a_dt = ctx.dtypes
        z_sh, f_sh, s_sh, a_sh = ctx.shapes
        need = ctx.needs_input_grad
        return (
            dz.view(z_sh).to(z_dt) if need[0] else None,
            df.view(f_sh).to(f_dt) if need[1] else None,
            ds0.view(s_sh).to(s_dt) if need[2] else None,
            dalpha.view(a_sh).to(a_dt) if need[3] and a_sh is not None else None,
            None, None, None, None, None, None,
        )


def _on(device: torch.device) -> ContextManager:
    """Launch on ``device``'s GPU (the interpreter's CPU tensors need nothing)."""
    return torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()
