"""Bidirectional LSTM encoder (OpenNMT "brnn": each direction has hidden/2 units)."""

from __future__ import annotations

import torch
from torch import nn

from scanmt.packed_lstm import run_lstm


class BiLSTMEncoder(nn.Module):
    def __init__(self, emb: nn.Embedding, hidden_size: int, layers: int, dropout: float):
        super().__init__()
        self.emb = emb
        self.layers = layers
        self.hidden_size = hidden_size
        self.dropout = nn.Dropout(dropout)
        self.rnn = nn.LSTM(
            emb.embedding_dim,
            hidden_size // 2,
            num_layers=layers,
            dropout=dropout if layers > 1 else 0.0,
            bidirectional=True,
            batch_first=True,
        )

    def forward(
        self, src: torch.Tensor, src_len: torch.Tensor
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """Encode a padded batch.

        Args:
            src: ``[B, S]`` token ids.
            src_len: ``[B]`` true lengths (on any device).

        Returns:
            memory ``[B, S, H]`` (zeros at padding) and the final states
            ``(h, c)``, each ``[layers, B, H]`` (both directions concatenated).
        """
        x = self.dropout(self.emb(src))
        memory, (h, c) = run_lstm(self.rnn, x, src_len)

        def merge(s: torch.Tensor) -> torch.Tensor:  # [2*layers, B, H/2] -> [layers, B, H]
            s = s.view(self.layers, 2, s.size(1), s.size(2))
            return torch.cat([s[:, 0], s[:, 1]], dim=-1)

        return memory, (merge(h), merge(c))
