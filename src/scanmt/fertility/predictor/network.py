"""BiLSTM tagger that predicts each source subword's fertility (paper Section 4, "predicted").

It classifies every token into fertility 0..F_max (the aligner's counts,
capped at F_max); at use time the fertility bound is the expected value
``E[f] = Σ_k k·p(k)`` plus a constant (the paper adds 1).
"""

from __future__ import annotations

import torch
from torch import nn

from scanmt.data.vocab import PAD_ID
from scanmt.packed_lstm import run_lstm


class FertilityPredictor(nn.Module):
    def __init__(self, vocab_size: int, emb_size: int, hidden_size: int, layers: int, dropout: float, max_fertility: int):
        super().__init__()
        self.max_fertility = max_fertility
        self.emb = nn.Embedding(vocab_size, emb_size, padding_idx=PAD_ID)
        self.rnn = nn.LSTM(emb_size, hidden_size // 2, num_layers=layers, bidirectional=True, batch_first=True,
                           dropout=dropout if layers > 1 else 0.0)
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(hidden_size, max_fertility + 1)

    def forward(self, src: torch.Tensor, src_len: torch.Tensor) -> torch.Tensor:
        """``src [B, S]`` -> logits ``[B, S, F_max + 1]``."""
        x = self.dropout(self.emb(src))
        h, _ = run_lstm(self.rnn, x, src_len)
        return self.out(self.dropout(h))

    def expected(self, src: torch.Tensor, src_len: torch.Tensor) -> torch.Tensor:
        """Expected fertility ``[B, S]`` (0 at padding)."""
        p = torch.softmax(self.forward(src, src_len).float(), dim=-1)
        k = torch.arange(self.max_fertility + 1, device=p.device, dtype=p.dtype)
        e = (p * k).sum(-1)
        mask = torch.arange(src.size(1), device=src.device).unsqueeze(0) < src_len.unsqueeze(1)
        return e * mask
