"""LSTM decoder with input feeding and attention (OpenNMT's ``InputFeedRNNDecoder``).

One step, for the previous output word ``y`` and state ``(h, c, feed, beta)``::

    s        = LSTM([emb(y); feed], (h, c))          # stacked LSTM cells
    u        = max(0, f - beta)                      # fertility bounds (constrained only)
    ctx, a   = attention(s, memory, mask, u)
    h~       = tanh(W_c [ctx; s])                    # attentional state, fed to the generator
    feed'    = h~;  beta' = beta + a                 # cumulative attention
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import torch
from torch import nn

from scanmt.model.attention import Attention


@dataclass
class DecoderState:
    """Per-hypothesis decoder state; every tensor has the batch (or beam) dimension first.

    Attributes:
        h, c: ``[B, layers, H]`` LSTM states.
        feed: ``[B, H]`` previous attentional state h~ (input feeding).
        beta: ``[B, S]`` cumulative attention over source positions.
    """

    h: torch.Tensor
    c: torch.Tensor
    feed: torch.Tensor
    beta: torch.Tensor

    def index_select(self, idx: torch.Tensor) -> "DecoderState":
        """Reorder / expand along the batch dimension (beam backpointers)."""
        return replace(self, **{f.name: getattr(self, f.name).index_select(0, idx) for f in fields(self)})


@dataclass
class EncoderOutput:
    """Everything the decoder needs from the source side.

    Attributes:
        memory: ``[B, S, H]`` encoder states (S includes the sink if used).
        keys: ``[B, S, H]`` attention keys (projected memory).
        mask: ``[B, S]`` True at real tokens and the sink.
        fertility: ``[B, S]`` upper bounds f (``inf`` at the sink, 0 at padding), or None.
    """

    memory: torch.Tensor
    keys: torch.Tensor
    mask: torch.Tensor
    fertility: torch.Tensor | None

    def index_select(self, idx: torch.Tensor) -> "EncoderOutput":
        sel = lambda t: None if t is None else t.index_select(0, idx)  # noqa: E731
        return EncoderOutput(sel(self.memory), sel(self.keys), sel(self.mask), sel(self.fertility))


class Decoder(nn.Module):
    def __init__(self, emb: nn.Embedding, hidden_size: int, layers: int, dropout: float, attention: Attention):
        super().__init__()
        self.emb = emb
        self.hidden_size = hidden_size
        self.layers = layers
        self.cells = nn.ModuleList(
            [nn.LSTMCell((emb.embedding_dim + hidden_size) if i == 0 else hidden_size, hidden_size) for i in range(layers)]
        )
        self.attention = attention
        self.W_c = nn.Linear(2 * hidden_size, hidden_size, bias=False)
        self.dropout = nn.Dropout(dropout)

    def init_state(self, enc: EncoderOutput, final: tuple[torch.Tensor, torch.Tensor]) -> DecoderState:
        """Start from the encoder's final states (``[layers, B, H]`` each)."""
        h, c = final
        B, S = enc.mask.shape
        return DecoderState(
            h=h.transpose(0, 1).contiguous(),
            c=c.transpose(0, 1).contiguous(),
            feed=enc.memory.new_zeros(B, self.hidden_size),
            beta=enc.memory.new_zeros(B, S),
        )

    def step(
        self, y_emb: torch.Tensor, state: DecoderState, enc: EncoderOutput
    ) -> tuple[torch.Tensor, torch.Tensor, DecoderState]:
        """One step.

        Args:
            y_emb: ``[B, E]`` embedding of the previous output word.

        Returns:
            ``h~ [B, H]``, attention ``[B, S]`` and the new state.
        """
        x = torch.cat([y_emb, state.feed], dim=1)
        hs, cs = [], []
        for i, cell in enumerate(self.cells):
            h_i, c_i = cell(x, (state.h[:, i], state.c[:, i]))
            hs.append(h_i)
            cs.append(c_i)
            x = self.dropout(h_i) if i + 1 < self.layers else h_i
        bounds = None
        if enc.fertility is not None:
            bounds = (enc.fertility - state.beta).clamp_min(0.0)
        ctx, alpha = self.attention(x, enc.keys, enc.memory, enc.mask, bounds)
        h_tilde = self.dropout(torch.tanh(self.W_c(torch.cat([ctx, x], dim=1))))
        new = DecoderState(torch.stack(hs, 1), torch.stack(cs, 1), h_tilde, state.beta + alpha)
        return h_tilde, alpha, new
