"""Token-level cross-entropy for NMT, summed over non-padding targets, with a fused backward.

``F.cross_entropy`` backpropagates through ``log_softmax`` with a generic kernel
that, on CPU, costs about as much as the generator's matrix products for an
8k vocabulary.  The gradient of label-smoothed cross-entropy has a closed form,

    d loss / d z_v = w * (p_v - (1 - eps) [v = y] - eps / V),     p = softmax(z),

with ``w = 0`` at padding targets, so the backward here is one ``exp`` of the
saved log-probabilities plus two in-place passes.  Values and gradients equal
``F.cross_entropy(..., reduction="sum", ignore_index=PAD_ID, label_smoothing=eps)``
(tested in ``tests/model/test_loss.py``).
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

from scanmt.data.vocab import PAD_ID


class _SummedCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits: torch.Tensor, target: torch.Tensor, eps: float) -> torch.Tensor:  # type: ignore[override]
        logp = F.log_softmax(logits, dim=-1)
        valid = target != PAD_ID
        nll = -logp.gather(1, target.unsqueeze(1)).squeeze(1)
        if eps:
            nll = (1.0 - eps) * nll - eps * logp.mean(dim=1)
        ctx.save_for_backward(logp, target, valid)
        ctx.eps = eps
        return torch.where(valid, nll, torch.zeros_like(nll)).sum()

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):  # type: ignore[override]
        logp, target, valid = ctx.saved_tensors
        return distribution_minus_target(logp.exp(), target, valid, ctx.eps, grad_out), None, None


def nmt_loss(logits: torch.Tensor, target: torch.Tensor, label_smoothing: float = 0.0) -> torch.Tensor:
    """Summed token cross-entropy over non-pad targets.

    Args:
        logits: ``[B, T, V]`` (computed in float32 whatever their dtype).
        target: ``[B, T]`` token ids, ``PAD_ID`` where there is no target.
        label_smoothing: ``eps`` in ``[0, 1)``: mass spread uniformly over the vocabulary.

    Returns:
        a scalar: the loss summed over all non-pad target tokens.
    """
    return _SummedCrossEntropy.apply(logits.reshape(-1, logits.size(-1)).float(), target.reshape(-1), label_smoothing)


def distribution_minus_target(
    p: torch.Tensor, target: torch.Tensor, valid: torch.Tensor, eps: float, grad_out: torch.Tensor
) -> torch.Tensor:
    """``grad_out * (p - q)`` at the ``valid`` rows (0 elsewhere), in place on ``p [N, V]``: the gradient of a
    summed loss whose gradient at the scores is the model's distribution minus the label-smoothed target
    ``q = (1 - eps) e_y + eps / V`` (cross-entropy with softmax, and every Fenchel-Young loss)."""
    p.scatter_add_(1, target.unsqueeze(1), p.new_full((p.size(0), 1), -(1.0 - eps)))
    if eps:
        p.sub_(eps / p.size(1))
    p.mul_((valid.to(p.dtype) * grad_out).unsqueeze(1))
    return p
