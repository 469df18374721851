"""A textbook PyTorch implementation of the paper-size model, as a throughput reference.

Written the way most PyTorch NMT code is (OpenNMT-py's RNN decoder, the PyTorch
tutorials): ``nn.LSTM`` bidirectional encoder over packed sequences, a stack of
``nn.LSTMCell`` with input feeding stepped in Python, Luong "general" attention
with ``bmm``, ``nn.Linear`` generator and ``F.cross_entropy``.  No fused
weights, no precomputed projections, no custom backward.

It exists only so that ``train_throughput.py`` can time scanmt's model against
plain PyTorch on the same machine and the same batches: absolute tokens/s vary
between machines, the ratio does not.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


class PlainNMT(nn.Module):
    """BiLSTM encoder, input-feeding LSTM decoder, bilinear attention, optionally shared/tied embeddings."""

    def __init__(self, vocab: int, emb: int, hidden: int, layers: int, dropout: float, pad: int,
                 share_embeddings: bool = False, tie_generator: bool = False):
        super().__init__()
        self.pad = pad
        self.src_emb = nn.Embedding(vocab, emb, padding_idx=pad)
        self.tgt_emb = self.src_emb if share_embeddings else nn.Embedding(vocab, emb, padding_idx=pad)
        self.encoder = nn.LSTM(emb, hidden // 2, layers, bidirectional=True, dropout=dropout, batch_first=True)
        self.cells = nn.ModuleList([nn.LSTMCell(emb + hidden if l == 0 else hidden, hidden) for l in range(layers)])
        self.W_a = nn.Linear(hidden, hidden, bias=False)
        self.W_c = nn.Linear(2 * hidden, hidden, bias=False)
        self.generator = nn.Linear(hidden, vocab)
        if tie_generator:
            self.generator.weight = self.tgt_emb.weight
        self.drop = nn.Dropout(dropout)
        self.layers = layers

    def forward(self, src: torch.Tensor, src_len: torch.Tensor, tgt_in: torch.Tensor, tgt_out: torch.Tensor) -> torch.Tensor:
        """``src [B, S]``, ``src_len [B]``, ``tgt_in/tgt_out [B, T]`` -> summed cross-entropy (scalar)."""
        B, S = src.shape
        packed = pack_padded_sequence(self.drop(self.src_emb(src)), src_len.cpu(), batch_first=True, enforce_sorted=False)
        mem, (h_n, c_n) = self.encoder(packed)
        mem, _ = pad_packed_sequence(mem, batch_first=True, total_length=S)  # [B, S, H]

        def merge(s: torch.Tensor) -> list[torch.Tensor]:  # [2L, B, H/2] -> L x [B, H]
            return list(s.view(self.layers, 2, B, -1).transpose(1, 2).reshape(self.layers, B, -1))

        h, c = merge(h_n), merge(c_n)
        keys = self.W_a(mem)  # [B, S, H]
        pad_mask = (src == self.pad).unsqueeze(1)  # [B, 1, S]
        feed = mem.new_zeros(B, mem.size(2))
        emb = self.drop(self.tgt_emb(tgt_in))
        outputs = []
        for t in range(tgt_in.size(1)):
            x = torch.cat([emb[:, t], feed], dim=1)
            for l, cell in enumerate(self.cells):
                h[l], c[l] = cell(x, (h[l], c[l]))
                x = self.drop(h[l]) if l + 1 < self.layers else h[l]
            scores = torch.bmm(x.unsqueeze(1), keys.transpose(1, 2)).masked_fill(pad_mask, float("-inf"))
            ctx = torch.bmm(torch.softmax(scores, dim=-1), mem).squeeze(1)
            feed = self.drop(torch.tanh(self.W_c(torch.cat([ctx, x], dim=1))))
            outputs.append(feed)
        logits = self.generator(torch.stack(outputs, dim=1))
        return F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=self.pad, reduction="sum")


class PlainTransformer(nn.Module):
    """``torch.nn.Transformer`` (pre-norm, sinusoidal positions, shared and tied embeddings), the way its
    tutorials build a translation model: the reference for scanmt's Transformer with plain softmax
    cross-attention (the overhead of the bounded attention is the ratio between the two)."""

    def __init__(self, vocab: int, d_model: int, heads: int, ff: int, enc_layers: int, dec_layers: int,
                 dropout: float, pad: int):
        super().__init__()
        self.pad, self.d_model = pad, d_model
        self.emb = nn.Embedding(vocab, d_model, padding_idx=pad)
        self.net = nn.Transformer(d_model, heads, enc_layers, dec_layers, ff, dropout, batch_first=True,
                                  norm_first=True)
        self.generator = nn.Linear(d_model, vocab)
        self.generator.weight = self.emb.weight
        self.drop = nn.Dropout(dropout)

    def _embed(self, x: torch.Tensor) -> torch.Tensor:
        T = x.size(1)
        pos = torch.arange(T, dtype=torch.float32, device=x.device).unsqueeze(1)
        i = torch.arange(0, self.d_model, 2, dtype=torch.float32, device=x.device)
        angle = pos / (10000.0 ** (i / self.d_model))
        pe = torch.zeros(T, self.d_model, device=x.device)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(angle), torch.cos(angle)
        return self.drop(self.emb(x) * self.d_model ** 0.5 + pe)

    def forward(self, src: torch.Tensor, src_len: torch.Tensor, tgt_in: torch.Tensor, tgt_out: torch.Tensor) -> torch.Tensor:
        """``src [B, S]``, ``tgt_in/tgt_out [B, T]`` -> summed cross-entropy (scalar)."""
        causal = nn.Transformer.generate_square_subsequent_mask(tgt_in.size(1), device=tgt_in.device)
        src_pad = src == self.pad
        hidden = self.net(self._embed(src), self._embed(tgt_in), tgt_mask=causal, src_key_padding_mask=src_pad,
                          tgt_key_padding_mask=tgt_in == self.pad, memory_key_padding_mask=src_pad, tgt_is_causal=True)
        logits = self.generator(hidden)
        return F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=self.pad, reduction="sum")
