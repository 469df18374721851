"""The output layer's distribution over the next word (``model.output``) and its training loss.

One place for every architecture: a model's generator gives scores ``z [.., V]``;

* :func:`output_probs` maps them to the next word's distribution ``p*`` (softmax, or a sparse
  one: ``sparsemax``, ``entmax15``, ``entmax`` with ``alpha = model.output_alpha``);
* :func:`output_log_probs` is ``log p*`` (``log 0 = -inf``: a sparse output gives most words
  exactly zero probability, and search handles ``-inf``: :mod:`scanmt.decoding.search`);
  softmax is ``F.log_softmax`` as before, bit for bit;
* :func:`output_loss` is the training loss: cross-entropy (:func:`scanmt.model.loss.nmt_loss`) for
  softmax, the Fenchel–Young loss of the sparse output otherwise.

Fenchel–Young losses (Blondel, Martins and Niculae, 2020)
--------------------------------------------------------
alpha-entmax is ``p* = argmax_{p in simplex} p.z - Omega(p)`` with the negative Tsallis entropy

    Omega_a(p) = (sum_j p_j^a - 1) / (a (a - 1))        (a = 2: sparsemax, a = 1.5: entmax15)

and the Fenchel–Young loss of a target distribution ``q`` in the simplex is

    L(z; q) = Omega*(z) + Omega(q) - z.q,     Omega*(z) = z.p* - Omega(p*)
            = (p* - q).z + (sum_j q_j^a - sum_j p*_j^a) / (a (a - 1))

(the ``-1`` of both Omegas cancels).  It is >= 0, zero exactly when ``p* = q``, and its gradient
is ``dL/dz = p* - q`` (Danskin's theorem), the analogue of softmax cross-entropy's ``softmax(z) - q``;
the backward here uses that closed form (no differentiation through the transform).  With a one-hot
``q = e_y``, ``Omega(e_y) = 0`` and ``L = (p* - e_y).z - Omega(p*)``: the loss of Peters, Niculae and
Martins (2019).  Unlike cross-entropy it stays finite when ``p*_y = 0``, which is why perplexity
(``exp`` of the mean cross-entropy) is not reported for a sparse output: it is infinite as soon as
one reference token gets zero probability.

Label smoothing: the loss is taken at the smoothed target ``q = (1 - eps) e_y + eps / V`` (a point of
the simplex, where FY losses are defined), ``Omega(q)`` included in closed form, so the loss is still
>= 0 and zero iff ``p* = q``; its gradient is ``p* - q``.  (For softmax, :func:`nmt_loss` keeps its
label-smoothed cross-entropy, which differs from this by the constant ``-H(q)``.)
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

from scanmt.data.vocab import PAD_ID
from scanmt.model.loss import distribution_minus_target, nmt_loss
from scanmt.ops import entmax15, entmax_bisect, sparsemax

#: the Tsallis alpha of each fixed sparse output (``entmax`` takes ``model.output_alpha``)
FIXED_ALPHA = {"sparsemax": 2.0, "entmax15": 1.5}


def is_sparse(output: str) -> bool:
    """Whether ``model.output`` can give a word exactly zero probability."""
    return output != "softmax"


def output_alpha(output: str, alpha: float) -> float:
    """The Tsallis alpha of a sparse ``output`` (``alpha``: ``model.output_alpha``, used by ``entmax``)."""
    return FIXED_ALPHA.get(output, alpha)


def output_probs(logits: torch.Tensor, output: str, alpha: float = 1.5) -> torch.Tensor:
    """The next word's distribution ``[.., V]`` from the generator's scores (in at least float32)."""
    z = logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits
    if output == "softmax":
        return torch.softmax(z, dim=-1)
    if output == "sparsemax":
        return sparsemax(z, dim=-1)
    if output == "entmax15":
        return entmax15(z, dim=-1)
    return entmax_bisect(z, float(alpha), dim=-1)


def output_log_probs(logits: torch.Tensor, output: str, alpha: float = 1.5) -> torch.Tensor:
    """``log p*`` ``[.., V]`` (``-inf`` where a sparse output gives zero probability; never NaN).

    Softmax is ``F.log_softmax(logits, -1)`` exactly as the models computed it before ``model.output``."""
    if output == "softmax":
        return F.log_softmax(logits, dim=-1)
    p = output_probs(logits, output, alpha)
    # the log of the words in the support; -inf elsewhere, set directly: torch.log(0) takes a slow path on
    # the CPU (about 9x the time of a dense log), and a sparse output is mostly zeros
    zero = p == 0
    return torch.log(p.masked_fill(zero, 1.0)).masked_fill_(zero, -torch.inf)


def tsallis_sum(p: torch.Tensor, alpha: float, out: torch.Tensor | None = None) -> torch.Tensor:
    """``sum_j p_j^alpha`` along the last dimension (``out``: a tensor like ``p`` for the powers)."""
    if alpha == 2.0:
        return torch.mul(p, p, out=out).sum(-1)
    return torch.pow(p, alpha, out=out).sum(-1)


def smoothed_tsallis_sum(V: int, eps: float, alpha: float) -> float:
    """``sum_j q_j^alpha`` of ``q = (1 - eps) e_y + eps / V`` (the same for every ``y``)."""
    if not eps:
        return 1.0
    return (1.0 - eps + eps / V) ** alpha + (V - 1) * (eps / V) ** alpha


class _SummedFenchelYoung(torch.autograd.Function):
    """``sum_i w_i L(z_i; q_i)`` over rows ``z [N, V]`` with targets ``y [N]`` (``w = 0`` at padding);
    backward ``w (p* - q)`` from the saved ``p*``.

    One ``[N, V]`` scratch tensor holds ``p* z`` and then ``p*^alpha`` in the forward pass and becomes the
    gradient in the (first) backward pass: at vocabulary size a new tensor costs more than the pass that
    fills it (on the CPU, 4096 x 32000 float32: 0.2 s to page in 0.5 GB, 0.05 s to copy into it), and the
    memory is the same (the backward pass needs a new tensor beside ``p*`` anyway)."""

    @staticmethod
    def forward(ctx, logits: torch.Tensor, target: torch.Tensor, eps: float, output: str,  # type: ignore[override]
                alpha: float) -> torch.Tensor:
        a = output_alpha(output, alpha)
        V = logits.size(1)
        p = output_probs(logits, output, a)
        valid = target != PAD_ID
        zq = logits.gather(1, target.unsqueeze(1)).squeeze(1)
        if eps:
            zq = (1.0 - eps) * zq + eps * logits.mean(dim=1)
        scratch = torch.mul(p, logits)
        pz = scratch.sum(dim=1)
        omega = (smoothed_tsallis_sum(V, eps, a) - tsallis_sum(p, a, out=scratch)) / (a * (a - 1.0))
        loss = pz - zq + omega
        ctx.save_for_backward(p, target, valid)
        ctx.eps, ctx.scratch = eps, scratch
        return torch.where(valid, loss, torch.zeros_like(loss)).sum()

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):  # type: ignore[override]
        p, target, valid = ctx.saved_tensors
        # the scratch tensor once (it is handed out as the gradient), a copy on a repeated backward
        d = p.clone() if ctx.scratch is None else ctx.scratch.copy_(p)
        ctx.scratch = None
        return distribution_minus_target(d, target, valid, ctx.eps, grad_out), None, None, None, None


def fy_loss(logits: torch.Tensor, target: torch.Tensor, output: str, alpha: float = 1.5,
            label_smoothing: float = 0.0) -> torch.Tensor:
    """The Fenchel–Young loss of a sparse ``output``, summed over non-pad targets (like :func:`nmt_loss`).

    Args:
        logits: ``[B, T, V]`` (or ``[N, V]``) generator scores, computed in float32 whatever their dtype
            (float64 stays float64).
        target: ``[B, T]`` (or ``[N]``) token ids, ``PAD_ID`` where there is no target.
        output: ``sparsemax``, ``entmax15`` or ``entmax`` (with ``alpha`` > 1).
        label_smoothing: ``eps`` in ``[0, 1)``: the target is ``(1 - eps) e_y + eps / V``.
    """
    z = logits.reshape(-1, logits.size(-1))
    if z.dtype != torch.float64:
        z = z.float()
    return _SummedFenchelYoung.apply(z, target.reshape(-1), label_smoothing, output, alpha)


def output_loss(logits: torch.Tensor, target: torch.Tensor, output: str, alpha: float = 1.5,
                label_smoothing: float = 0.0) -> torch.Tensor:
    """The training loss of ``model.output``: summed cross-entropy for softmax (:func:`nmt_loss`), the
    Fenchel–Young loss (:func:`fy_loss`) for a sparse output."""
    if output == "softmax":
        return nmt_loss(logits, target, label_smoothing)
    return fy_loss(logits, target, output, alpha, label_smoothing)


def token_accuracy(logits: torch.Tensor, target: torch.Tensor) -> tuple[int, int]:
    """``(correct, total)`` non-pad targets whose most probable word (argmax of the scores: the same for
    every output, all being monotone in ``z``) is the reference."""
    valid = target != PAD_ID
    return int(((logits.argmax(-1) == target) & valid).sum()), int(valid.sum())
