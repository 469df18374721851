"""Stacked LSTM cells for an input-feeding decoder, with fused weights.

Equivalent to a stack of ``nn.LSTMCell`` whose first layer reads ``[x; feed]``,
but laid out for speed on small batches:

* the input projection of the first layer (``W_x x + b``) can be computed for
  all time steps at once (:meth:`InputFeedLSTM.project_input`), since during
  teacher forcing the inputs are known in advance;
* every layer multiplies one concatenated ``[input; h]`` by one weight matrix,
  halving the number of matrix products per step.

Gate order is PyTorch's (i, f, g, o).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import nn
from torch.nn import functional as F


def lstm_pointwise(gates: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``gates [B, 4H]`` (pre-activations) and ``c [B, H]`` -> new ``(h, c)``."""
    i, f, g, o = gates.chunk(4, dim=1)
    c_new = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c_new), c_new


class InputFeedLSTM(nn.Module):
    """``layers`` LSTM cells; layer 0 reads ``[x; feed]``, layer l > 0 reads layer l-1's output.

    Parameters: ``W_x [4H, input_size]`` and, per layer, ``W_h[l] [4H, in_l + H]``
    (``in_0 = feed_size``) and ``b[l] [4H]``.
    """

    def __init__(self, input_size: int, feed_size: int, hidden_size: int, layers: int, dropout: float):
        super().__init__()
        H = hidden_size
        self.hidden_size = H
        self.layers = layers
        self.W_x = nn.Parameter(torch.empty(4 * H, input_size))
        self.W_h = nn.ParameterList(
            [nn.Parameter(torch.empty(4 * H, (feed_size if l == 0 else H) + H)) for l in range(layers)]
        )
        self.b = nn.ParameterList([nn.Parameter(torch.empty(4 * H)) for _ in range(layers)])
        self.dropout = nn.Dropout(dropout)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.hidden_size)  # nn.LSTMCell's default
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)

    def project_input(self, x: torch.Tensor) -> torch.Tensor:
        """``x [..., input_size]`` -> layer-0 input gates ``[..., 4H]`` (bias included)."""
        return F.linear(x, self.W_x, self.b[0])

    def forward(
        self,
        x_gates: torch.Tensor,
        feed: torch.Tensor,
        h: tuple[torch.Tensor, ...],
        c: tuple[torch.Tensor, ...],
        linears: Sequence[Callable[[torch.Tensor], torch.Tensor]] | None = None,
    ) -> tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
        """One step.

        Args:
            x_gates: ``[B, 4H]`` from :meth:`project_input`.
            feed: ``[B, feed_size]``.
            h, c: per-layer ``[B, H]`` states.
            linears: per layer, a replacement for ``x -> x W_h[l]ᵀ`` (a
                :class:`~scanmt.model.lstm.step_linear.DeferredLinear` during teacher forcing).

        Returns:
            the new per-layer ``h`` and ``c`` (the top layer's ``h`` is the output).
        """
        hs, cs = [], []
        inp = feed
        for l in range(self.layers):
            x_h = torch.cat([inp, h[l]], dim=1)
            gates = linears[l](x_h) if linears is not None else F.linear(x_h, self.W_h[l])
            gates = gates + (x_gates if l == 0 else self.b[l])
            h_l, c_l = lstm_pointwise(gates, c[l])
            hs.append(h_l)
            cs.append(c_l)
            inp = self.dropout(h_l)
        return tuple(hs), tuple(cs)
