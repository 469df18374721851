"""The skeleton the four transforms share: one autograd ``Function`` base, after
entmax's ``_GenericEntmax``, and the docstring of the constrained wrappers.

:class:`TransformFunction` does everything that is the same for softmax,
sparsemax, csoftmax and csparsemax, and a subclass supplies only its maths:

* :meth:`~TransformFunction.transform` (the public wrapper's body): checks and
  broadcasts the inputs (:func:`._checks.broadcast_inputs`), handles empty
  inputs, and applies the ``Function``;
* ``forward``: lays the input out as ``[rows, J]`` (:class:`._checks.Rows`) in the
  compute dtype, runs the compiled kernel (``kernel``) where there is one, else
  masks, validates and solves in PyTorch (``_solve``), and saves what the
  backward pass needs;
* ``backward``: the closed form shared by sparsemax, csoftmax and csparsemax.
  With ``w`` the weights of the free set ``A`` (``1[A]`` for the sparsemaxes,
  ``p 1[A]`` for csoftmax) and ``C`` the capped set (``_free_set``),
  ``m = sum(w dp) / sum(w)``, ``dz = w (dp - m)`` and ``du = 1[C] (dp - m)``
  (``m = 0`` where ``A`` carries no weight).  softmax overrides ``_vjp``.
  Under ``create_graph=True`` (a gradient penalty, ``gradgradcheck``) the backward
  is computed out of place from the saved *output* ``p`` where the weights are ``p``
  (softmax, csoftmax: ``p`` on the free set is smooth in ``z`` and ``u``, so the
  second-order terms come from autograd through this ``Function`` again) and with
  the sets held fixed (their derivative is 0 almost everywhere: sparsemax and
  csparsemax are piecewise linear, so their gradient is piecewise constant and is
  linked to ``z`` and ``u`` with a zero derivative).
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar, Optional, Tuple, TypeVar

import torch
from torch import Tensor

from . import _checks
from ._checks import FEASIBILITY_TOL, NEGATIVE_TOL

#: what ``_solve`` (and the kernel path) return: ``p`` as ``[rows, J]`` and the tensors
#: the backward pass needs (the first one's dtype is the backward's compute dtype)
Solved = Tuple[Tensor, Tuple[Tensor, ...]]

#: The docstring of csoftmax and csparsemax; ``{summary}`` is the first line.
CONSTRAINED_DOC = """{summary}

    Args:
        z: scores, any floating dtype (half precision is computed in float32).
        u: upper bounds, broadcastable with ``z``; ``+inf`` means unbounded,
            ``u >= 1`` never binds, ``u`` in ``[-1e-6, 0)`` is read as 0.
        dim: the dimension that sums to 1.
        mask: optional bool tensor broadcastable to ``z`` (True = may receive
            attention).  Masked positions (and positions where ``z == -inf``)
            get 0 and a zero gradient; a fully masked row gives all zeros.
        validate: check inputs (one host synchronisation); False skips it.

    Returns:
        ``p`` of the broadcast shape of ``z`` and ``u``; ``0 <= p <= u``, rows sum to 1.
        If the bounds over the unmasked positions sum to at most 1 (within
        ``FEASIBILITY_TOL``), ``p = u`` there.

    Raises:
        ValueError: NaN or +inf in ``z``, NaN or negative ``u`` at an unmasked
            position, infeasible rows (``sum(u) < 1 - 1e-5`` over unmasked
            positions), or shapes that do not broadcast.
    """

F = TypeVar("F", bound=Callable[..., Tensor])


def constrained_doc(summary: str) -> Callable[[F], F]:
    """Decorator: give a constrained transform's wrapper :data:`CONSTRAINED_DOC`."""

    def decorate(fn: F) -> F:
        fn.__doc__ = CONSTRAINED_DOC.format(summary=summary)
        return fn

    return decorate


class TransformFunction(torch.autograd.Function):
    """Base autograd ``Function`` of the transforms (see the module docstring).

    ``apply(z, u, mask, dim, validate, out_dtype)`` takes tensors already
    broadcast to one shape by :meth:`transform` (``u`` is ``None`` for the
    unconstrained transforms) and returns ``p`` in ``out_dtype``.

    A transform subclasses it and supplies its maths (checked when the subclass is made;
    ``torch.autograd.Function``'s own metaclass rules out ``abc``):

    - ``_solve(z2, zmax, b, k) -> Solved`` (a classmethod): ``p`` from the masked scores ``z2``
      ``[rows, J]`` (``-inf`` = unusable), their row maxima ``zmax`` ``[rows, 1]`` and, for a
      constrained transform, the bounds ``b``;
    - and either ``_free_set(*saved) -> (w, capped)`` (a staticmethod): ``[rows, J]`` weights of
      the free set (a new tensor: :meth:`_vjp` overwrites it) and the 0/1 capped set (``None`` when
      unconstrained), which the shared closed-form :meth:`_vjp` uses; or its own ``_vjp``.
    """

    #: the transform's name, in error messages
    op_name: ClassVar[str]
    #: ``None``: unconstrained (no ``u``); else the cap of :class:`._checks.Bounds`
    bound_cap: ClassVar[Optional[float]] = None
    #: the free-set weights ``w`` are ``p`` itself (softmax, csoftmax) rather than 0/1: the
    #: double backward then differentiates through the saved output
    p_weighted: ClassVar[bool] = False
    #: the function of ``_kernels.cpp`` with this transform's forward pass (``None``: none);
    #: ``kernel(z, mask) -> (p, n_invalid)`` without bounds, else
    #: ``kernel(z, u, mask, FEASIBILITY_TOL, NEGATIVE_TOL) -> (p, aux, n_invalid)``
    kernel: ClassVar[Optional[str]] = None

    @classmethod
    def transform(
        cls, z: Tensor, u: Optional[object], dim: int, mask: Optional[Tensor], validate: bool
    ) -> Tensor:
        """The public wrapper: check and broadcast the inputs, then apply the ``Function``."""
        z, u, mask, dim, out_dtype = _checks.broadcast_inputs(
            cls.op_name, z, None if cls.bound_cap is None else u, mask, dim
        )
        if cls.bound_cap is not None:
            _checks.require_bounds(cls.op_name, u)
        if z.numel() == 0:  # nothing to normalise; keeps the graph for autograd
            return (z * 0 if u is None else z * 0 + u * 0).to(out_dtype)
        return cls.apply(z, u, mask, dim, validate, out_dtype)

    @classmethod
    def forward(  # type: ignore[override]
        cls,
        ctx: Any,
        z: Tensor,
        u: Optional[Tensor],
        mask: Optional[Tensor],
        dim: int,
        validate: bool,
        out_dtype: torch.dtype,
    ) -> Tensor:
        rows = _checks.Rows(z.shape, dim)
        cdt = _checks.compute_dtype(z.dtype) if u is None else _checks.compute_dtype(z.dtype, u.dtype)
        solved = cls._native_forward(rows, z, u, mask, cdt, validate) if cls.kernel else None
        if solved is None:
            solved = cls._torch_forward(rows, z, u, mask, cdt, validate)
        p, saved = solved
        ctx.rows, ctx.z_dtype, ctx.u_dtype = rows, z.dtype, None if u is None else u.dtype
        out = rows.give(p, out_dtype)
        # the output (p-weighted ops) or the inputs: what a double backward differentiates through
        linked = (out,) if cls.p_weighted else ((z,) if u is None else (z, u))
        if cls.p_weighted and saved and saved[0] is out:  # the output is saved already
            linked = ()
        ctx.n_linked = len(linked)
        ctx.save_for_backward(*saved, *linked)
        return out

    @classmethod
    def _native_forward(
        cls, rows: _checks.Rows, z: Tensor, u: Optional[Tensor], mask: Optional[Tensor], cdt: torch.dtype,
        validate: bool,
    ) -> Optional[Solved]:
        """The compiled kernel's result, or ``None`` where it is not used or the input is invalid
        (then the PyTorch path raises with the details)."""
        kernels = _checks.native_kernels(z)
        if kernels is None:
            return None
        kernel = getattr(kernels, cls.kernel)
        z2, mask2 = rows.take(z, cdt), None if mask is None else rows.take(mask)
        if u is None:
            (p, n_invalid), u2, aux = kernel(z2, mask2), None, None
        else:
            u2 = rows.take(u, cdt)
            p, aux, n_invalid = kernel(z2, u2, mask2, FEASIBILITY_TOL, NEGATIVE_TOL)
        if validate and n_invalid:
            return None
        return p, cls._saved_by_kernel(p, aux, u2)

    @classmethod
    def _torch_forward(
        cls, rows: _checks.Rows, z: Tensor, u: Optional[Tensor], mask: Optional[Tensor], cdt: torch.dtype,
        validate: bool,
    ) -> Solved:
        """Mask, validate and solve with the PyTorch algorithms."""
        k = _checks.consts(cdt, z.device)
        z2 = _checks.masked_scores(rows, z, mask, cdt)
        zmax = z2.amax(-1, keepdim=True)
        b = None
        if cls.bound_cap is not None:
            _checks.require_bounds(cls.op_name, u)
            b = _checks.Bounds(z2, u, mask, rows, k, validate, cap=cls.bound_cap)
        if validate:
            _checks.raise_if_invalid(cls.op_name, zmax, k, b)
        return cls._solve(z2, zmax, b, k)  # type: ignore[attr-defined]

    @staticmethod
    def _saved_by_kernel(p: Tensor, aux: Optional[Tensor], u2: Optional[Tensor]) -> Tuple[Tensor, ...]:
        """What the backward pass needs, from the kernel's ``p``, its second output ``aux``
        (constrained kernels) and the bounds ``u2`` it was given (``[rows, J]``, compute dtype)."""
        return (p,) if aux is None else (p, aux)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        missing = [] if hasattr(cls, "_solve") else ["_solve"]
        if not hasattr(cls, "_free_set") and cls._vjp.__func__ is TransformFunction._vjp.__func__:  # type: ignore[attr-defined]
            missing.append("_free_set (or its own _vjp)")
        if missing:
            raise TypeError(f"{cls.__name__} must define {', '.join(missing)} (see TransformFunction)")

    @classmethod
    def _vjp(
        cls, g: Tensor, saved: Tuple[Tensor, ...], need_z: bool, need_u: bool
    ) -> Tuple[Optional[Tensor], Optional[Tensor]]:
        """``(dz, du)`` ``[rows, J]`` for the output gradient ``g`` (see the module docstring)."""
        w, capped = cls._free_set(*saved)  # type: ignore[attr-defined]
        m = (w * g).sum(-1, keepdim=True).div_(w.sum(-1, keepdim=True).clamp_(min=torch.finfo(w.dtype).tiny))
        gm = g - m
        dz = w.mul_(gm) if need_z else None
        du = gm.mul_(capped) if need_u and capped is not None else None
        return dz, du

    @classmethod
    def _vjp_differentiable(
        cls, g: Tensor, saved: Tuple[Tensor, ...], p: Optional[Tensor], need_z: bool, need_u: bool
    ) -> Tuple[Optional[Tensor], Optional[Tensor]]:
        """:meth:`_vjp` out of place, for ``create_graph=True``: the sets are held fixed (detached)
        and, for the p-weighted ops, ``w = p 1[A]`` is taken from the output ``p`` (``[rows, J]``,
        linked to the graph), so that autograd differentiates the result again."""
        w, capped = cls._free_set(*saved)  # type: ignore[attr-defined]
        if p is not None:
            w = p * torch.gt(w, 0).to(p.dtype)
        m = (w * g).sum(-1, keepdim=True) / w.sum(-1, keepdim=True).clamp(min=torch.finfo(w.dtype).tiny)
        gm = g - m
        dz = w * gm if need_z else None
        du = gm * capped if need_u and capped is not None else None
        return dz, du

    @classmethod
    def backward(cls, ctx: Any, grad: Tensor):  # type: ignore[override]
        tensors = ctx.saved_tensors  # unpacked once (each access checks every tensor)
        n = len(tensors) - ctx.n_linked
        saved, linked = tensors[:n], tensors[n:]
        rows: _checks.Rows = ctx.rows
        need_z, need_u = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        g = rows.take(grad, saved[0].dtype)
        if not torch.is_grad_enabled():  # the usual first-order backward: in place, fast
            dz, du = cls._vjp(g, saved, need_z, need_u)
            dz = None if dz is None else rows.give(dz, ctx.z_dtype)
            du = None if du is None else rows.give(du, ctx.u_dtype)
            return dz, du, None, None, None, None
        p = rows.take(linked[0] if linked else saved[0], saved[0].dtype) if cls.p_weighted else None
        dz, du = cls._vjp_differentiable(g, saved, p, need_z, need_u)
        dz = None if dz is None else rows.give(dz, ctx.z_dtype)
        du = None if du is None else rows.give(du, ctx.u_dtype)
        if not cls.p_weighted:  # piecewise constant in z and u: linked to them with derivative 0
            ones = torch.ones((), dtype=torch.bool, device=grad.device)
            dz = None if dz is None else dz + linked[0].masked_fill(ones, 0.0).to(dz.dtype)
            du = None if du is None else du + linked[1].masked_fill(ones, 0.0).to(du.dtype)
        return dz, du, None, None, None, None
