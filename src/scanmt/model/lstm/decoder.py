"""LSTM decoder with input feeding and attention (OpenNMT's ``InputFeedRNNDecoder``).

One step, for the previous output word ``y`` and state ``(h, c, feed, attention_sum)``::

    s        = LSTM([emb(y); feed], (h, c))          # stacked LSTM cells
    u        = max(0, f - attention_sum)             # fertility bounds (constrained only; scanmt.model.bounds)
    ctx, a   = attention(s, memory, mask, u)         # with the line above: one bounded_recurrence step, T = 1
    h~       = tanh(W_c [ctx; s])                    # attentional state, fed to the generator
    feed'    = h~;  attention_sum' = attention_sum + a
    C'       = covvector.update(C, a, s)             # CovVector only; V C enters the next scores
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from scanmt.model.interface import DecoderState, EncoderOutput
from scanmt.model.lstm.attention import Attention
from scanmt.model.lstm.cell import InputFeedLSTM
from scanmt.model.lstm.covvector import CovVector
from scanmt.model.lstm.step_linear import DeferredLinear


@dataclass
class StepLinears:
    """The decoder's per-step weights wrapped for one teacher-forced pass (see :mod:`scanmt.model.lstm.step_linear`)."""

    rnn: list[DeferredLinear]
    out: DeferredLinear


@dataclass
class LSTMState(DecoderState):
    """The LSTM decoder's state per hypothesis (every tensor has the batch or beam dimension first).

    Attributes:
        attention_sum: ``[B, S']`` cumulative attention (for the fertility bounds and the coverage penalty).
        h, c: per-layer ``[B, H]`` LSTM states.
        feed: ``[B, H]`` previous attentional state h~ (input feeding).
        covvector: ``[B, S', d]`` the CovVector state of Tu et al.'s coverage models, or None without one.
    """

    h: tuple[torch.Tensor, ...] = ()
    c: tuple[torch.Tensor, ...] = ()
    feed: torch.Tensor | None = None
    covvector: torch.Tensor | None = None


@dataclass
class LSTMEncoderOutput(EncoderOutput):
    """The BiLSTM's source side.

    Attributes:
        memory, mask, fertility: see :class:`~scanmt.model.interface.EncoderOutput`.
        keys: ``[B, S', H]`` attention keys (projected memory).
        covvector_features: ``[B, S', k]`` per-token features of the CovVector model computed once per
            sentence (``Phi_j`` of linguistic coverage with fertility, ``U h_j + b`` of the NN-based
            models), or None.
        final: the encoder's final ``(h, c)``, each ``[B, layers, H]``: the decoder's initial state.
    """

    keys: torch.Tensor | None = None
    covvector_features: torch.Tensor | None = None
    final: tuple[torch.Tensor, torch.Tensor] | None = None


#: the prefixes of the decoder's parameter names that changed, old -> new (issue 54: ``coverage`` became
#: ``covvector``), relative to the decoder
RENAMED: dict[str, str] = {"coverage.": "covvector."}


def upgrade_state_dict(weights: dict[str, torch.Tensor], prefix: str = "decoder.") -> dict[str, torch.Tensor]:
    """``weights`` (a state dict with the decoder's parameters under ``prefix``) with the names that checkpoints
    written before issue 54 use renamed (:data:`RENAMED`); the same dict when none is old."""
    old = {f"{prefix}{a}": f"{prefix}{b}" for a, b in RENAMED.items()}
    if not any(key.startswith(tuple(old)) for key in weights):
        return weights
    return {_renamed(key, old): value for key, value in weights.items()}


def _renamed(key: str, old: dict[str, str]) -> str:
    for a, b in old.items():
        if key.startswith(a):
            return b + key[len(a):]
    return key


class Decoder(nn.Module):
    def __init__(
        self,
        emb: nn.Embedding,
        hidden_size: int,
        layers: int,
        dropout: float,
        attention: Attention,
        covvector: CovVector | None = None,
    ):
        super().__init__()
        self.emb = emb
        self.hidden_size = hidden_size
        self.layers = layers
        self.rnn = InputFeedLSTM(emb.embedding_dim, hidden_size, hidden_size, layers, dropout)
        self.attention = attention
        #: the CovVector model (None: no parameters, state dicts as without one); checkpoints written before
        #: issue 54 name its parameters ``decoder.coverage.*`` (renamed when loaded: :func:`upgrade_state_dict`)
        self.covvector = covvector
        self.W_c = nn.Linear(2 * hidden_size, hidden_size, bias=False)
        self.dropout = nn.Dropout(dropout)

    def _load_from_state_dict(self, state_dict: dict, prefix: str, *args, **kwargs) -> None:
        """Load the old names of renamed parameters too (:func:`upgrade_state_dict`; ``load_state_dict`` hands
        each module a copy of the state dict, which is renamed in place here, before the submodules load)."""
        renamed = upgrade_state_dict(state_dict, prefix)
        if renamed is not state_dict:
            state_dict.clear()
            state_dict.update(renamed)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def init_state(self, enc: LSTMEncoderOutput) -> LSTMState:
        """Start from the encoder's final states ``enc.final`` (``[B, layers, H]`` each)."""
        h, c = enc.final
        B, S = enc.mask.shape
        return LSTMState(
            attention_sum=enc.memory.new_zeros(B, S),
            h=tuple(x.contiguous() for x in h.unbind(1)),
            c=tuple(x.contiguous() for x in c.unbind(1)),
            feed=enc.memory.new_zeros(B, self.hidden_size),
            covvector=self.covvector.init(enc.memory) if self.covvector is not None else None,
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
        state: LSTMState,
        enc: LSTMEncoderOutput,
        *,
        y_gates: torch.Tensor | None = None,
        linears: StepLinears | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, LSTMState]:
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
        cov_term, cov = None, None
        if self.covvector is not None:
            cov_term = self.covvector.score_term(state.covvector)
        ctx, attention = self.attention(x, enc.keys, enc.memory, enc.mask, enc.fertility, state.attention_sum, cov_term)
        if self.covvector is not None:
            cov = self.covvector.update(state.covvector, attention, enc.covvector_features, x, enc.mask)
        out = linears.out if linears is not None else self.W_c
        h_tilde = self.dropout(torch.tanh(out(torch.cat([ctx, x], dim=1))))
        new = LSTMState(self.attention.bounded.accumulate(state.attention_sum, attention), hs, cs, h_tilde, cov)
        return h_tilde, attention, new
