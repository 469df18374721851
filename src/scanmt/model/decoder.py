"""LSTM decoder with input feeding and attention (OpenNMT's ``InputFeedRNNDecoder``).

One step, for the previous output word ``y`` and state ``(h, c, feed, beta)``::

    s        = LSTM([emb(y); feed], (h, c))          # stacked LSTM cells
    u        = max(0, f - beta)                      # fertility bounds (constrained only)
    ctx, a   = attention(s, memory, mask, u)
    h~       = tanh(W_c [ctx; s])                    # attentional state, fed to the generator
    feed'    = h~;  beta' = beta + a                 # cumulative attention
    cov'     = coverage.update(cov, a, s)            # CovVector only; V cov enters the next scores
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import torch
from torch import nn

from scanmt.model.attention import Attention
from scanmt.model.coverage import Coverage
from scanmt.model.lstm import InputFeedLSTM
from scanmt.model.step_linear import DeferredLinear


@dataclass
class StepLinears:
    """The decoder's per-step weights wrapped for one teacher-forced pass (see :mod:`scanmt.model.step_linear`)."""

    rnn: list[DeferredLinear]
    out: DeferredLinear


@dataclass
class DecoderState:
    """Per-hypothesis decoder state; every tensor has the batch (or beam) dimension first.

    Attributes:
        h, c: per-layer ``[B, H]`` LSTM states.
        feed: ``[B, H]`` previous attentional state h~ (input feeding).
        beta: ``[B, S]`` cumulative attention over source positions (fertility bounds,
            coverage penalty).
        cov: ``[B, S, d]`` coverage state of a CovVector model, or None without one.
    """

    h: tuple[torch.Tensor, ...]
    c: tuple[torch.Tensor, ...]
    feed: torch.Tensor
    beta: torch.Tensor
    cov: torch.Tensor | None = None

    def index_select(self, idx: torch.Tensor) -> "DecoderState":
        """Reorder / expand along the batch dimension (beam backpointers)."""
        return replace(self, **{f.name: _select(getattr(self, f.name), idx) for f in fields(self)})


def _select(t, idx: torch.Tensor):
    if t is None:
        return None
    if isinstance(t, tuple):
        return tuple(x.index_select(0, idx) for x in t)
    return t.index_select(0, idx)


@dataclass
class EncoderOutput:
    """Everything the decoder needs from the source side.

    Attributes:
        memory: ``[B, S, H]`` encoder states (S includes the sink if used).
        keys: ``[B, S, H]`` attention keys (projected memory).
        mask: ``[B, S]`` True at real tokens and the sink.
        fertility: ``[B, S]`` upper bounds f (``inf`` at the sink, 0 at padding), or None.
        coverage: ``[B, S, k]`` per-token features of the coverage model computed once per
            sentence (``Phi_j`` of linguistic coverage with fertility, ``U h_j + b`` of the
            NN-based models), or None.
    """

    memory: torch.Tensor
    keys: torch.Tensor
    mask: torch.Tensor
    fertility: torch.Tensor | None
    coverage: torch.Tensor | None = None

    def index_select(self, idx: torch.Tensor) -> "EncoderOutput":
        """Reorder / expand along the batch dimension (one copy per beam hypothesis)."""
        return replace(self, **{f.name: _select(getattr(self, f.name), idx) for f in fields(self)})


class Decoder(nn.Module):
    def __init__(
        self,
        emb: nn.Embedding,
        hidden_size: int,
        layers: int,
        dropout: float,
        attention: Attention,
        coverage: Coverage | None = None,
    ):
        super().__init__()
        self.emb = emb
        self.hidden_size = hidden_size
        self.layers = layers
        self.rnn = InputFeedLSTM(emb.embedding_dim, hidden_size, hidden_size, layers, dropout)
        self.attention = attention
        #: the CovVector model (None: no parameters, state dicts as without coverage)
        self.coverage = coverage
        self.W_c = nn.Linear(2 * hidden_size, hidden_size, bias=False)
        self.dropout = nn.Dropout(dropout)

    def init_state(self, enc: EncoderOutput, final: tuple[torch.Tensor, torch.Tensor]) -> DecoderState:
        """Start from the encoder's final states (``[layers, B, H]`` each)."""
        h, c = final
        B, S = enc.mask.shape
        return DecoderState(
            h=tuple(h.unbind(0)),
            c=tuple(c.unbind(0)),
            feed=enc.memory.new_zeros(B, self.hidden_size),
            beta=enc.memory.new_zeros(B, S),
            cov=self.coverage.init(enc.memory) if self.coverage is not None else None,
        )

    def input_gates(self, y_emb: torch.Tensor) -> torch.Tensor:
        """``[..., E]`` embeddings -> first-layer input gates ``[..., 4H]`` (precomputable for all steps)."""
        return self.rnn.project_input(y_emb)

    def step_linears(self) -> StepLinears:
        """Wrap the per-step weights for one teacher-forced pass (weight gradients formed once, at the end)."""
        return StepLinears([DeferredLinear(w) for w in self.rnn.W_h], DeferredLinear(self.W_c.weight))

    def step(
        self,
        y_emb: torch.Tensor | None,
        state: DecoderState,
        enc: EncoderOutput,
        *,
        y_gates: torch.Tensor | None = None,
        linears: StepLinears | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, DecoderState]:
        """One step.

        Args:
            y_emb: ``[B, E]`` embedding of the previous output word (or None with ``y_gates``).
            y_gates: ``[B, 4H]`` = ``input_gates(y_emb)``, when precomputed for all steps.
            linears: from :meth:`step_linears`, shared by all steps of a teacher-forced pass.

        Returns:
            ``h~ [B, H]``, attention ``[B, S]`` and the new state.
        """
        if y_gates is None:
            y_gates = self.input_gates(y_emb)
        hs, cs = self.rnn(y_gates, state.feed, state.h, state.c, linears.rnn if linears is not None else None)
        x = hs[-1]
        bounds = None
        if enc.fertility is not None:
            bounds = (enc.fertility - state.beta).clamp_min(0.0)
        cov_term, cov = None, None
        if self.coverage is not None:
            cov_term = self.coverage.score_term(state.cov)
        ctx, alpha = self.attention(x, enc.keys, enc.memory, enc.mask, bounds, cov_term)
        if self.coverage is not None:
            cov = self.coverage.update(state.cov, alpha, enc.coverage, x, enc.mask)
        out = linears.out if linears is not None else self.W_c
        h_tilde = self.dropout(torch.tanh(out(torch.cat([ctx, x], dim=1))))
        new = DecoderState(hs, cs, h_tilde, state.beta + alpha, cov)
        return h_tilde, alpha, new
