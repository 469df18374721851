"""The attentional encoder–decoder (the paper's architecture, OpenNMT defaults).

Data flow for a batch::

    src [B, S] --(+<sink>)--> BiLSTM --> memory [B, S', H], keys = attention.keys(memory)
    for t: h~_t, a_t = decoder.step(emb(y_{t-1}), state)          # input feeding, cumulative attention,
                                                                  # coverage state (model.coverage)
    logits [B, T, V] = generator(h~)                              # one matmul after the loop
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from scanmt.config import ModelConfig
from scanmt.data.vocab import PAD_ID
from scanmt.errors import ConfigError
from scanmt.fertility import sink as sink_convention
from scanmt.fertility.rules import check_exhaustion
from scanmt.model.attention import Attention
from scanmt.model.coverage import build_coverage
from scanmt.model.decoder import Decoder, DecoderState, EncoderOutput
from scanmt.model.encoder import BiLSTMEncoder
from scanmt.model.loss import nmt_loss  # noqa: F401  (re-exported: the training loss of this model)
from scanmt.model.transforms import get_transform


@dataclass
class ForwardOutput:
    """Teacher-forced outputs: ``logits [B, T, V]``, ``attention [B, T, S']``."""

    logits: torch.Tensor
    attention: torch.Tensor


class NMTModel(nn.Module):
    def __init__(self, cfg: ModelConfig, vocab_size: int):
        super().__init__()
        transform = get_transform(cfg.attention.transform)
        if cfg.tie_generator and cfg.emb_size != cfg.hidden_size:
            raise ConfigError(
                f"model.tie_generator needs model.emb_size == model.hidden_size "
                f"(got {cfg.emb_size} and {cfg.hidden_size})"
            )
        check_exhaustion(transform.name, cfg.attention.exhaustion)  # for a ModelConfig built in code
        self.cfg = cfg
        self.vocab_size = vocab_size
        self.sink = sink_convention.uses_sink(cfg.attention.transform, cfg.attention.sink)
        self.constrained = transform.constrained
        src_emb = nn.Embedding(vocab_size, cfg.emb_size, padding_idx=PAD_ID)
        tgt_emb = src_emb if cfg.share_embeddings else nn.Embedding(vocab_size, cfg.emb_size, padding_idx=PAD_ID)
        self.encoder = BiLSTMEncoder(src_emb, cfg.hidden_size, cfg.layers, cfg.dropout)
        attention = Attention(
            cfg.hidden_size, cfg.hidden_size, cfg.attention.score, cfg.attention.transform, cfg.attention.exhaustion,
            cfg.attention.scaling,
        )
        coverage = build_coverage(cfg.coverage, cfg.hidden_size, cfg.hidden_size)
        self.decoder = Decoder(tgt_emb, cfg.hidden_size, cfg.layers, cfg.dropout, attention, coverage)
        self.generator = nn.Linear(cfg.hidden_size, vocab_size)
        if cfg.tie_generator:
            self.generator.weight = tgt_emb.weight

    def reset_parameters(self, init_range: float) -> None:
        """OpenNMT-style uniform init in ``[-init_range, init_range]`` (0 keeps torch defaults)."""
        if init_range > 0:
            for p in self.parameters():
                nn.init.uniform_(p, -init_range, init_range)
            with torch.no_grad():
                self.encoder.emb.weight[PAD_ID].zero_()
                self.decoder.emb.weight[PAD_ID].zero_()
            self.decoder.attention.reset_scale()

    # ----------------------------------------------------------------- encoding
    def encode(
        self, src: torch.Tensor, src_len: torch.Tensor, fertility: torch.Tensor | None = None
    ) -> tuple[EncoderOutput, DecoderState]:
        """Encode ``src [B, S]``; append the sink if configured.

        Args:
            fertility: ``[B, S]`` per-token fertilities (0 at padding) for
                constrained transforms; required then.

        Returns:
            the encoder output (S' = S + 1 with the sink) and the initial decoder state.
        """
        if self.constrained and fertility is None:
            raise ConfigError(
                f"model.attention.transform={self.cfg.attention.transform} needs fertilities "
                f"(set model.attention.fertility)"
            )
        if self.sink:
            src, src_len, fertility = sink_convention.append_sink(src, src_len, fertility)
        positions = torch.arange(src.size(1), device=src.device).unsqueeze(0)
        mask = positions < src_len.unsqueeze(1)
        memory, final = self.encoder(src, src_len)
        fert = None
        if self.constrained:
            fert = torch.where(mask, fertility.to(memory.dtype), torch.zeros_like(memory[..., 0]))
        cov = self.decoder.coverage
        enc = EncoderOutput(
            memory=memory,
            keys=self.decoder.attention.keys(memory),
            mask=mask,
            fertility=fert,
            coverage=cov.precompute(memory) if cov is not None else None,
        )
        return enc, self.decoder.init_state(enc, final)

    # ----------------------------------------------------------------- training
    def forward(
        self, src: torch.Tensor, src_len: torch.Tensor, tgt_in: torch.Tensor, fertility: torch.Tensor | None = None
    ) -> ForwardOutput:
        """Teacher forcing: ``tgt_in [B, T]`` (``<s> y_1 .. y_n``) -> logits ``[B, T, V]``."""
        enc, state = self.encode(src, src_len, fertility)
        gates = self.decoder.input_gates(self.decoder.dropout(self.decoder.emb(tgt_in)))  # [B, T, 4H], all steps at once
        outs, attns = [], []
        # per-step weights: their gradients are formed once for all steps (scanmt.model.step_linear)
        linears = self.decoder.step_linears() if torch.is_grad_enabled() else None
        # unbind, not gates[:, t]: slicing inside the loop makes every step's backward zero-fill [B, T, 4H]
        for g_t in gates.unbind(1):
            h_tilde, alpha, state = self.decoder.step(None, state, enc, y_gates=g_t, linears=linears)
            outs.append(h_tilde)
            attns.append(alpha)
        hidden = torch.stack(outs, dim=1)
        return ForwardOutput(self.generator(hidden), torch.stack(attns, dim=1))

    def log_probs(self, h_tilde: torch.Tensor) -> torch.Tensor:
        """``[..., H]`` -> log-probabilities ``[..., V]``."""
        return F.log_softmax(self.generator(h_tilde), dim=-1)
