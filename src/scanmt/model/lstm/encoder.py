"""Bidirectional LSTM encoder (OpenNMT "brnn": each direction has hidden/2 units)."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


def onednn_lacks_bf16_lstm(x: torch.Tensor) -> bool:
    """Whether ``nn.LSTM`` on ``x`` would run in bf16 under CPU autocast on a processor without AVX-512, where
    oneDNN cannot build its bf16 LSTM ("could not create a primitive descriptor for the LSTM forward propagation
    primitive": a Zen 3 EPYC, thirty-first KFTT session).  There the LSTM runs in fp32 and the rest in bf16."""
    return (x.device.type == "cpu" and torch.is_autocast_enabled("cpu")
            and torch.get_autocast_dtype("cpu") == torch.bfloat16 and not torch.cpu._is_avx512_supported())


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
        if onednn_lacks_bf16_lstm(x):
            with torch.autocast("cpu", enabled=False):
                packed = pack_padded_sequence(x.float(), src_len.cpu(), batch_first=True, enforce_sorted=False)
                out, (h, c) = self.rnn(packed)
        else:
            packed = pack_padded_sequence(x, src_len.cpu(), batch_first=True, enforce_sorted=False)
            out, (h, c) = self.rnn(packed)
        memory, _ = pad_packed_sequence(out, batch_first=True, total_length=src.size(1))

        def merge(s: torch.Tensor) -> torch.Tensor:  # [2*layers, B, H/2] -> [layers, B, H]
            s = s.view(self.layers, 2, s.size(1), s.size(2))
            return torch.cat([s[:, 0], s[:, 1]], dim=-1)

        return memory, (merge(h), merge(c))
