"""Attention health during training: is the attention still learning?

Every batch adds the attention of its real target steps to a window; every
``train.log_every`` steps the window is logged as

==================  =================================================================
``attn/support``    mean number of source positions with non-zero weight per target step
                    (sink included; :func:`scanmt.metrics.attention_stats.support_sizes`,
                    the same count as ``scanmt evaluate --attention``)
``attn/one_hot``    share of target steps whose largest weight is above 0.999
``attn/max_weight`` mean largest weight per target step
``attn/sink``       mean weight on the ``<sink>`` token (models with a sink)
``attn/score_grad`` norm of the gradient of the (normalized) loss w.r.t. the attention scores
                    ``z`` of all steps of the window's last batch
``attn/head_one_hot`` models with several attention heads (a Transformer's cross-attention;
                    :attr:`scanmt.model.interface.ForwardOutput.heads`): share of the rows
                    (target step x head, every explicitly computed head of every layer) whose
                    largest weight is above 0.999
``attn/head_support`` the same rows' mean number of source positions with non-zero weight
==================  =================================================================

The reported attention of a Transformer is a mean over heads, which can look healthy (a support of
3, few one-hot steps) while every head is one-hot on most steps; ``attn/head_one_hot`` shows it.

A sparsemax row with a support of one has a zero Jacobian: once most steps are
one-hot, the scores get no gradient and the alignment freezes where it is.
:meth:`AttentionHealth.check` warns once when a sparse or constrained transform
(its reported attention, or its heads) gets there in the first epoch.
"""

from __future__ import annotations

import logging
import math

import torch

from scanmt.fertility.sink import sink_index
from scanmt.metrics.attention_stats import one_hot_steps, support_sizes

log = logging.getLogger("scanmt.train")

#: a window with more one-hot steps than this, in the first epoch, is a collapse
COLLAPSE_SHARE = 0.5


def advice(scaling: str, optimizer: str) -> str:
    """What to change after a collapse, given the run's score scaling and optimizer (only what it does not use).

    Measured in docs/attention-recipe.md: under Adam, unscaled scores collapse and cosine scores do not
    (sections 3-5); under the paper's SGD at lr 1.0, cosine's learned scale grows until sparse attention
    collapses, so an SGD run is pointed to unscaled scores or to cpu-small's Adam recipe (section 6).
    """
    sgd = optimizer == "sgd"
    adam_cosine = "cpu-small's recipe (train.optimizer=adam train.lr=0.002 train.normalization=tokens"
    adam_cosine += ")" if scaling == "cosine" else " model.attention.scaling=cosine)"
    fixes = []
    if sgd:
        if scaling != "none":
            why = "SGD grows a learned score scale fast" if scaling in ("cosine", "learned") else "the paper's"
            fixes.append(f"keep the scores unscaled with SGD (model.attention.scaling=none; {why})")
        fixes.append(f"train with {adam_cosine}")
        if scaling == "none":
            fixes.append("try another train.seed (with the paper preset this happened to some seeds only)")
    else:
        if scaling != "cosine":
            fixes.append("bound the score gaps with model.attention.scaling=cosine (cpu-small's default)")
        unscaled = "" if scaling == "none" else " model.attention.scaling=none"
        fixes.append(f"train the paper's way (train.optimizer=sgd train.lr=1.0 train.normalization=sents{unscaled})")
        if scaling == "cosine":
            fixes.append("lower train.lr")
    return ", or ".join(fixes) + "; see docs/attention-recipe.md"


def transformer_advice() -> str:
    """What to change after a Transformer's heads collapse (measured in docs/transformer.md, section 4)."""
    return ("score the cross-attention by cosine (model.attention.scaling=cosine: a head's score gaps are then at "
            "most twice its learned scale), or keep the cross-attention below the last decoder layer softmax "
            "(model.transformer.transform_layers=last_layer); see docs/transformer.md, section 4c")


class AttentionHealth:
    """Accumulates attention statistics over a logging window (see the module docstring)."""

    def __init__(
        self, transform: str, sparse: bool, sink: bool, scaling: str = "none", optimizer: str = "sgd",
        arch: str = "lstm",
    ):
        self.transform = transform
        self.arch = arch
        #: the run's recipe, for the advice of the collapse warning
        self.scaling, self.optimizer = scaling, optimizer
        #: True for transforms whose gradient vanishes at one-hot rows (everything but softmax)
        self.sparse = sparse
        self.sink = sink
        self.warned = False
        self.reset()
        if sparse and scaling == "cosine" and optimizer == "sgd":
            log.warning(
                "model.attention.scaling=cosine with train.optimizer=sgd: SGD grows cosine's learned score scale "
                "fast, and %s attention may then go one-hot and stop learning (paper preset, lr 1.0: the scale "
                "grew from 1 to 7-24 within 300 updates, and 3 of 4 sparse runs went one-hot on most steps). "
                "With SGD keep the paper's unscaled scores "
                "(model.attention.scaling=none), or use cosine with Adam (cpu-small's recipe); see "
                "docs/attention-recipe.md, section 6.", transform,
            )

    def reset(self) -> None:
        self.steps = 0
        #: running sums over the window's steps: support, one-hot steps, max weight, sink mass (kept on the
        #: batches' device and read once per window, so that a GPU is not synchronised every batch)
        self.sums: torch.Tensor | None = None
        #: the heads' one-hot rows, support and rows (ForwardOutput.heads), likewise
        self.head_sums: torch.Tensor | None = None
        self.score_grad: float | None = None

    @torch.no_grad()
    def add(self, attention: torch.Tensor, step_mask: torch.Tensor, src_len: torch.Tensor) -> None:
        """Add a batch.

        Args:
            attention: ``[B, T, S']`` teacher-forced attention (``S' = S + 1`` with the sink).
            step_mask: ``[B, T]`` True at real target steps.
            src_len: ``[B]`` source lengths without the sink (the sink sits at ``src_len``).
        """
        a = attention.detach().float()[step_mask]  # [N, S']
        self.steps += a.size(0)
        sink = a.new_zeros(())
        if self.sink:
            sink_col = sink_index(src_len).unsqueeze(1).expand_as(step_mask)[step_mask]  # [N]
            sink = a.gather(1, sink_col.unsqueeze(1)).sum()
        sums = torch.stack([support_sizes(a).sum().float(), one_hot_steps(a).sum().float(), a.amax(-1).sum(), sink])
        self.sums = sums if self.sums is None else self.sums + sums

    @torch.no_grad()
    def add_heads(self, heads: tuple[torch.Tensor, ...], step_mask: torch.Tensor) -> None:
        """Add a batch's per-head weights: ``heads``, one ``[B, h, T, S']`` per layer; ``step_mask [B, T]``."""
        real = step_mask.unsqueeze(1)  # [B, 1, T]: masked sums, no copy of the weights and no host sync
        for w in heads:
            w = w.detach()
            sums = torch.stack([(one_hot_steps(w) & real).sum().float(), (support_sizes(w) * real).sum().float(),
                                (real.sum() * w.shape[1]).float()])
            self.head_sums = sums if self.head_sums is None else self.head_sums + sums

    def add_score_grads(self, scores: list[torch.Tensor]) -> None:
        """Record the gradient norm of the probed scores (after the backward pass)."""
        sq = sum(float(z.grad.float().pow(2).sum()) for z in scores if z.grad is not None)
        self.score_grad = math.sqrt(sq)

    def summary(self) -> dict[str, float]:
        """The window's metrics (empty if no step was added)."""
        out: dict[str, float] = {}
        if self.steps and self.sums is not None:
            support, one_hot, max_weight, sink = (v / self.steps for v in self.sums.tolist())
            out.update({"attn/support": support, "attn/one_hot": one_hot, "attn/max_weight": max_weight})
            if self.sink:
                out["attn/sink"] = sink
            if self.score_grad is not None:
                out["attn/score_grad"] = self.score_grad
        one_hot, support, rows = self.head_sums.tolist() if self.head_sums is not None else (0.0, 0.0, 0.0)
        if rows:
            out["attn/head_one_hot"] = one_hot / rows
            out["attn/head_support"] = support / rows
        return out

    def check(self, metrics: dict[str, float], step: int, epoch: int) -> None:
        """Warn once if a sparse transform went one-hot on most steps (or most heads' steps) in the first epoch."""
        share = metrics.get("attn/one_hot", 0.0)
        head_share = metrics.get("attn/head_one_hot", 0.0)
        if self.warned or not self.sparse or epoch > 1 or max(share, head_share) <= COLLAPSE_SHARE:
            return
        self.warned = True
        if share > COLLAPSE_SHARE:
            what = f"{100 * share:.0f}% of target steps put all their {self.transform} attention on one source token"
            support = metrics.get("attn/support", float("nan"))
        else:
            what = (f"{100 * head_share:.0f}% of the cross-attention heads' rows (target step x head) put all their "
                    f"{self.transform} attention on one source token")
            support = metrics.get("attn/head_support", float("nan"))
        fix = transformer_advice() if self.arch == "transformer" else advice(self.scaling, self.optimizer)
        log.warning(
            "attention collapse: at step %d, %s (mean support %.2f). A one-hot %s row has a zero Jacobian, so "
            "the attention scores stop learning and the alignment freezes. To fix it, %s.",
            step, what, support, self.transform, fix,
        )
