"""Scoring penalties for beam search (Wu et al. 2016, Section 7; the paper's footnote 5).

``lp(Y) = ((5 + |Y|) / 6) ** alpha`` — the length penalty; ``|Y|`` counts the
output tokens including the final ``</s>``.

``cp(X; Y) = beta * sum_j log max(eps, min(1, sum_t a_tj))`` — the coverage
penalty over the real source tokens ``j`` (padding and the ``<sink>`` are
masked out; ``t`` runs over every output step including ``</s>``).  The paper
adds ``eps`` (0.1) so that the penalty stays finite when sparse attention gives
a source token exactly zero attention; with ``eps > 0`` it is always finite and
lies in ``[beta * J * log(eps), 0]``.

The hypothesis score is ``s(Y, X) = log P(Y|X) / lp(Y) + cp(X; Y)``
(:func:`hypothesis_score`).  Where it is applied (``decode.penalty_mode``) is
decided by :mod:`scanmt.decoding.search`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from scanmt.config import check_penalty_config


@dataclass(frozen=True)
class Penalties:
    """The penalty settings of a beam search; :meth:`checked` checks them (errors name ``decode.KEY``).

    ``length_alpha`` (alpha of :func:`length_penalty`), ``coverage_beta`` and ``coverage_eps``
    (beta and eps of :func:`coverage_penalty`), and ``penalty_mode`` (``rescore`` or ``step``:
    where :mod:`scanmt.decoding.search` applies them).
    """

    length_alpha: float = 0.0
    coverage_beta: float = 0.0
    coverage_eps: float = 0.1
    penalty_mode: str = "rescore"

    @classmethod
    def of(cls, decode: Any) -> "Penalties":
        """The penalties of a :class:`~scanmt.config.DecodeConfig` (or anything with the four fields), as they
        are: a Config's were checked when it was built; call :meth:`checked` on new ones."""
        return cls(decode.length_alpha, decode.coverage_beta, decode.coverage_eps, decode.penalty_mode)

    def checked(self) -> "Penalties":
        """``self``, after :func:`~scanmt.config.check_penalty_config` (a ConfigError naming the key)."""
        check_penalty_config(self)
        return self

    @property
    def weights(self) -> dict[str, float]:
        """``length_alpha``, ``coverage_beta`` and ``coverage_eps`` (the keywords of :func:`final_score`)."""
        return {"length_alpha": self.length_alpha, "coverage_beta": self.coverage_beta,
                "coverage_eps": self.coverage_eps}

    @property
    def rank_live(self) -> bool:
        """Whether the penalties rank the live hypotheses (mode ``step`` with a penalty on)."""
        return self.penalty_mode == "step" and (self.length_alpha != 0 or self.coverage_beta != 0)



def length_penalty(length: torch.Tensor | int | float, alpha: float) -> torch.Tensor | float:
    """``((5 + |Y|) / 6) ** alpha`` (1 when alpha = 0)."""
    if isinstance(length, torch.Tensor):
        return ((5.0 + length.to(torch.float32)) / 6.0) ** alpha
    return ((5.0 + float(length)) / 6.0) ** alpha


def coverage_penalty(
    attention_sum: torch.Tensor, mask: torch.Tensor, coverage_beta: float, eps: float = 0.1
) -> torch.Tensor:
    """``coverage_beta * sum_j log max(eps, min(1, A_j))`` over positions where ``mask`` is True.

    Args:
        attention_sum: ``[N, S]`` cumulative attention ``A_j = sum_t a_tj`` of ``N`` hypotheses.
        mask: ``[N, S]`` bool, True at the source words that count (not padding, not the sink).
        coverage_beta: the weight beta (0 disables: the result is exactly 0).
        eps: the floor (> 0), 0.1 in the paper.

    Returns:
        ``[N]`` float32 penalties (<= 0, always finite).
    """
    if not eps > 0:
        raise ValueError(f"coverage penalty eps must be > 0 to stay finite, got {eps}")
    b = attention_sum.to(torch.float32).clamp(min=eps, max=1.0)
    logs = torch.where(mask, torch.log(b), torch.zeros_like(b))
    return coverage_beta * logs.sum(dim=-1)


def hypothesis_score(
    log_prob: torch.Tensor | float,
    length: torch.Tensor | int,
    attention_sum: torch.Tensor | None,
    mask: torch.Tensor | None,
    *,
    length_alpha: float,
    coverage_beta: float,
    coverage_eps: float = 0.1,
) -> torch.Tensor | float:
    """``log P / lp(|Y|) + cp`` (``attention_sum``/``mask`` ``[N, S]`` or ``[S]``; cp skipped when
    ``coverage_beta == 0``)."""
    score = log_prob / length_penalty(length, length_alpha)
    if coverage_beta and attention_sum is not None:
        squeeze = attention_sum.dim() == 1
        cp = coverage_penalty(attention_sum.reshape(-1, attention_sum.size(-1)), mask.reshape(-1, mask.size(-1)),
                              coverage_beta, coverage_eps)
        score = score + (float(cp[0]) if squeeze else cp)
    return score
