"""Linear maps applied at every decoder step, with the weight gradient computed once per batch.

During teacher forcing the decoder multiplies the same weight ``W`` by a new input
``x_t`` at each of T steps.  Plain autograd then computes ``g_tᵀ x_t`` at every step
and adds it into ``W.grad`` T times (a full pass over the weight each time).  Here
each step's backward only computes the input gradient ``g_t W`` and keeps
``(g_t, x_t)``; once every step is done, one product ``Gᵀ X`` over all steps gives
``dW`` (the same sum, one larger and faster matrix product, one accumulation)::

    lin = DeferredLinear(W)          # once per teacher-forced pass
    y_t = lin(x_t)                   # = x_t Wᵀ, at every step

Used only when gradients are recorded; decoding calls ``F.linear`` directly, and so does
mixed precision (autocast), where the products' dtypes are autocast's choice.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F


class _Collect(torch.autograd.Function):
    """Identity on ``W``; its backward sums the deferred per-step weight gradients."""

    @staticmethod
    def forward(ctx, weight: torch.Tensor, store: list) -> torch.Tensor:  # type: ignore[override]
        ctx.store = store
        ctx.set_materialize_grads(False)
        return weight.view_as(weight)

    @staticmethod
    def backward(ctx, grad: torch.Tensor | None):  # type: ignore[override]
        store: list = ctx.store
        if not store:
            return grad, None
        g = torch.cat([s[0] for s in store])
        x = torch.cat([s[1] for s in store])
        store.clear()
        d_weight = g.t().mm(x)
        return (d_weight if grad is None else grad + d_weight), None


class _StepLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, store: list) -> torch.Tensor:  # type: ignore[override]
        ctx.save_for_backward(x, weight)
        ctx.store = store
        return x.mm(weight.t())

    @staticmethod
    def backward(ctx, grad: torch.Tensor):  # type: ignore[override]
        x, weight = ctx.saved_tensors
        if ctx.needs_input_grad[1]:
            ctx.store.append((grad, x))
        d_x = grad.mm(weight) if ctx.needs_input_grad[0] else None
        return d_x, None, None


class DeferredLinear:
    """``x [B, in] -> x Wᵀ [B, out]`` for every step of one pass; ``dW`` is formed once, at the end."""

    def __init__(self, weight: torch.Tensor):
        self._store: list = []
        self._weight = _Collect.apply(weight, self._store)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if torch.is_autocast_enabled(x.device.type):  # mixed precision: autocast picks the dtypes; plain gradient
            return F.linear(x, self._weight)
        return _StepLinear.apply(x, self._weight, self._store)
