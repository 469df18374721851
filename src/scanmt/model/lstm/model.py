"""The paper's attentional BiLSTM encoder–decoder (``model.arch: lstm``; OpenNMT defaults).

Data flow for a batch::

    src [B, S] --(+<sink>)--> BiLSTM --> memory [B, S', H], keys = attention.keys(memory)
    for t: h~_t, a_t = decoder.step(emb(y_{t-1}), state)          # input feeding, cumulative attention,
                                                                  # CovVector state (model.coverage)
    logits [B, T, V] = generator(h~)                              # one matmul after the loop

It implements :class:`~scanmt.model.interface.NMTModel`; nothing outside ``scanmt.model`` reaches
into its encoder or decoder.
"""

from __future__ import annotations

import torch
from torch import nn

from scanmt.config import ModelConfig
from scanmt.data.vocab import PAD_ID
from scanmt.model.build import register_architecture
from scanmt.model.interface import ForwardOutput, NMTModel, Step, log_summary
from scanmt.model.lstm.attention import Attention
from scanmt.model.lstm.covvector import build_covvector
from scanmt.model.lstm.decoder import Decoder, LSTMEncoderOutput, LSTMState, upgrade_state_dict
from scanmt.model.lstm.encoder import BiLSTMEncoder


class LSTMModel(NMTModel):
    def __init__(self, cfg: ModelConfig, vocab_size: int):
        super().__init__(cfg, vocab_size)
        src_emb = nn.Embedding(vocab_size, cfg.emb_size, padding_idx=PAD_ID)
        tgt_emb = src_emb if cfg.share_embeddings else nn.Embedding(vocab_size, cfg.emb_size, padding_idx=PAD_ID)
        self.encoder = BiLSTMEncoder(src_emb, cfg.hidden_size, cfg.layers, cfg.dropout)
        attention = Attention(
            cfg.hidden_size, cfg.hidden_size, cfg.attention.score, cfg.attention.transform, cfg.attention.exhaustion,
            cfg.attention.scaling, cfg.attention.alpha, learn_alpha=cfg.attention.learn_alpha == "model",
        )
        covvector = build_covvector(cfg.coverage, cfg.hidden_size, cfg.hidden_size)
        self.decoder = Decoder(tgt_emb, cfg.hidden_size, cfg.layers, cfg.dropout, attention, covvector)
        self.generator = nn.Linear(cfg.hidden_size, vocab_size)
        if cfg.tie_generator:
            self.generator.weight = tgt_emb.weight

    @classmethod
    def upgrade_state_dict(cls, weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Checkpoints written before issue 54 name the CovVector's parameters ``decoder.coverage.*``."""
        return upgrade_state_dict(weights)

    def reset_parameters(self, init_range: float) -> None:
        """OpenNMT-style uniform init in ``[-init_range, init_range]`` (0 keeps torch defaults)."""
        if init_range > 0:
            for p in self.parameters():
                nn.init.uniform_(p, -init_range, init_range)
            with torch.no_grad():
                self.encoder.emb.weight[PAD_ID].zero_()
                self.decoder.emb.weight[PAD_ID].zero_()
            self.decoder.attention.reset_scale()

    def learned_alpha(self) -> dict[str, float]:
        alpha = self.decoder.attention.alpha
        return log_summary("alpha", alpha()) if alpha is not None else {}

    def learned_scale(self) -> dict[str, float]:
        attention = self.decoder.attention
        return log_summary("scale", attention.log_scale.exp()) if attention.scaling in ("learned", "cosine") else {}

    def probe_scores(self, on: bool) -> list[torch.Tensor]:
        attention = self.decoder.attention
        scores = attention.probe or []
        attention.probe = [] if on else None
        return scores

    # ----------------------------------------------------------------- encoding
    def encode(
        self, src: torch.Tensor, src_len: torch.Tensor, fertility: torch.Tensor | None = None
    ) -> LSTMEncoderOutput:
        source = self.source_batch(src, src_len, fertility)
        memory, (h, c) = self.encoder(source.src, source.src_len)
        covvector = self.decoder.covvector
        return LSTMEncoderOutput(
            memory=memory,
            mask=source.mask,
            fertility=self.masked_fertility(source, memory.dtype),
            keys=self.decoder.attention.keys(memory),
            covvector_features=covvector.precompute(memory) if covvector is not None else None,
            final=(h.transpose(0, 1), c.transpose(0, 1)),  # batch first, like every field
        )

    def init_state(self, enc: LSTMEncoderOutput) -> LSTMState:
        return self.decoder.init_state(enc)

    def step(self, y: torch.Tensor, state: LSTMState, enc: LSTMEncoderOutput) -> Step:
        h_tilde, attention, state = self.decoder.step(self.decoder.emb(y), state, enc)
        return Step(self.log_probs(h_tilde), attention, state)

    # ----------------------------------------------------------------- training
    def forward(
        self, src: torch.Tensor, src_len: torch.Tensor, tgt_in: torch.Tensor, fertility: torch.Tensor | None = None
    ) -> ForwardOutput:
        """Teacher forcing: ``tgt_in [B, T]`` (``<s> y_1 .. y_n``) -> logits ``[B, T, V]``."""
        enc = self.encode(src, src_len, fertility)
        state = self.init_state(enc)
        gates = self.decoder.input_gates(self.decoder.dropout(self.decoder.emb(tgt_in)))  # [B, T, 4H], all steps at once
        outs, attns = [], []
        # per-step weights: their gradients are formed once for all steps (scanmt.model.lstm.step_linear)
        linears = self.decoder.step_linears() if torch.is_grad_enabled() else None
        # unbind, not gates[:, t]: slicing inside the loop makes every step's backward zero-fill [B, T, 4H]
        for g_t in gates.unbind(1):
            h_tilde, attention, state = self.decoder.step(None, state, enc, y_gates=g_t, linears=linears)
            outs.append(h_tilde)
            attns.append(attention)
        hidden = torch.stack(outs, dim=1)
        return ForwardOutput(self.generator(hidden), torch.stack(attns, dim=1))

    def log_probs(self, h_tilde: torch.Tensor) -> torch.Tensor:
        """``[..., H]`` -> log-probabilities ``[..., V]`` (``model.output``: :meth:`output_log_probs`)."""
        return self.output_log_probs(self.generator(h_tilde))


register_architecture("lstm", LSTMModel)
