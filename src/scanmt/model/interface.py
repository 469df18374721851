"""The model interface: what search, the :class:`~scanmt.decoding.translator.Translator`, training,
attention health, forced decoding and the experiment runner may call on a model.

Every architecture (``model.arch``: the paper's BiLSTM in :mod:`scanmt.model.lstm.model`, the
Transformer in :mod:`scanmt.model.transformer.model`) is an :class:`NMTModel` and is used through these
calls only, as fairseq's generator talks to any model through a few methods::

    enc   = model.encode(src, src_len, fertility)     # source side, once per sentence   EncoderOutput
    state = model.init_state(enc)                      # before the first output word       DecoderState
    step  = model.step(y, state, enc)                  # one word for a batch of prefixes   Step
    state = model.reorder(state, idx); enc = model.reorder(enc, idx)   # beam backpointers / expansion
    out   = model(src, src_len, tgt_in, fertility)     # teacher forcing                    ForwardOutput

The attention a model *reports* (``Step.attention``, ``ForwardOutput.attention``: one distribution
over the source columns per output word, the sink last) is what attention files, maps, AER/SAER,
attention health, the coverage penalty and REP/DROP diagnostics read.  ``DecoderState.attention_sum``
is its running sum over the words so far: what the coverage penalty scores.  Everything else in a
state or an encoder output belongs to its architecture.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, fields, replace
from typing import Any, TypeVar

import torch
from torch import nn

from scanmt.config import ModelConfig
from scanmt.errors import ConfigError
from scanmt.fertility import sink as sink_convention
from scanmt.fertility.rules import is_constrained
from scanmt.model.output import output_log_probs

T = TypeVar("T", "EncoderOutput", "DecoderState")


def select_rows(value: Any, idx: torch.Tensor) -> Any:
    """``value`` reordered / expanded along its first (batch) dimension by ``idx [N]``: a tensor, a
    tuple or list of such values, an object with ``index_select``, or None (kept)."""
    if value is None:
        return None
    if isinstance(value, torch.Tensor):
        return value.index_select(0, idx)
    if isinstance(value, (tuple, list)):
        return type(value)(select_rows(v, idx) for v in value)
    return value.index_select(idx)


class _Rows:
    """A dataclass whose every field has the batch (or beam) dimension first."""

    def index_select(self: T, idx: torch.Tensor) -> T:
        """Reorder / expand along the batch dimension (one row per beam hypothesis, backpointers)."""
        return replace(self, **{f.name: select_rows(getattr(self, f.name), idx) for f in fields(self)})


@dataclass
class EncoderOutput(_Rows):
    """The source side of a batch, computed once per sentence (architectures add their own fields).

    Attributes:
        memory: ``[B, S', H]`` encoder states (``S'`` columns: the source, then the sink if the model has one).
        mask: ``[B, S']`` True at real tokens and the sink.
        fertility: ``[B, S']`` upper bounds ``f`` (``inf`` at the sink, 0 at padding) of a constrained
            model, or None.
    """

    memory: torch.Tensor
    mask: torch.Tensor
    fertility: torch.Tensor | None


@dataclass
class DecoderState(_Rows):
    """What search keeps per hypothesis (architectures add their own fields).

    Attributes:
        attention_sum: ``[N, S']`` running sum of the reported attention over the words so far
            (the cumulative attention of the paper's bounds, and what the coverage penalty scores).
    """

    attention_sum: torch.Tensor


@dataclass
class Step:
    """One decoding step for ``N`` prefixes: ``log_probs [N, V]`` of the next word, the reported
    ``attention [N, S']`` that produced it, and the new ``state``."""

    log_probs: torch.Tensor
    attention: torch.Tensor
    state: DecoderState


@dataclass
class ForwardOutput:
    """Teacher-forced outputs: ``logits [B, T, V]``, reported ``attention [B, T, S']``, and ``heads``: the
    weights of the attention heads that are computed explicitly, one ``[B, h, T, S']`` tensor per layer (a
    Transformer's cross-attention layers; fused softmax layers are left out), or ``()`` when the reported
    attention is the model's only one (the LSTM).  Training logs their health (``attn/head_one_hot``): a mean
    over heads can look healthy while every head is one-hot."""

    logits: torch.Tensor
    attention: torch.Tensor
    heads: tuple[torch.Tensor, ...] = ()


@dataclass
class SourceBatch:
    """A batch's source as the encoder sees it: ids with the sink appended when the model has one."""

    src: torch.Tensor  # [B, S'] ids
    src_len: torch.Tensor  # [B] lengths, the sink included
    mask: torch.Tensor  # [B, S'] True at real tokens and the sink
    fertility: torch.Tensor | None  # [B, S'] bounds (inf at the sink), not yet masked


def log_summary(name: str, values: torch.Tensor) -> dict[str, float]:
    """``{name: mean}`` of a learned quantity ``values`` (any shape), plus ``{name}_min`` and ``{name}_max``
    when it has several entries: what the training log records of a learned alpha or score scale."""
    with torch.no_grad():
        v = values.detach().float()
    out = {name: float(v.mean())}
    if v.numel() > 1:
        out.update({f"{name}_min": float(v.min()), f"{name}_max": float(v.max())})
    return out


class NMTModel(nn.Module, abc.ABC):
    """An attentional encoder–decoder, used only through the calls of this class.

    Attributes:
        cfg: the model config it was built from.
        vocab_size: the joint subword vocabulary's size ``V``.
        sink: whether ``<sink>`` is appended to every source (:mod:`scanmt.fertility.sink`).
        constrained: whether the attention takes fertility bounds (``encode`` then needs them).
    """

    def __init__(self, cfg: ModelConfig, vocab_size: int):
        super().__init__()
        self.cfg = cfg
        self.vocab_size = vocab_size
        self.sink = sink_convention.uses_sink(cfg.attention.transform, cfg.attention.sink)
        self.constrained = is_constrained(cfg.attention.transform)

    # ------------------------------------------------------------------ the five calls
    @abc.abstractmethod
    def encode(self, src: torch.Tensor, src_len: torch.Tensor, fertility: torch.Tensor | None = None) -> EncoderOutput:
        """Encode ``src [B, S]`` (true lengths ``src_len [B]``); ``fertility [B, S]`` (0 at padding) is
        required by a constrained model.  The sink, if any, is appended here."""

    @abc.abstractmethod
    def init_state(self, enc: EncoderOutput) -> DecoderState:
        """The state before the first output word (``<s>`` is fed by the first :meth:`step`)."""

    @abc.abstractmethod
    def step(self, y: torch.Tensor, state: DecoderState, enc: EncoderOutput) -> Step:
        """Read the previous output words ``y [N]`` and predict the next: log-probabilities, attention, state.
        ``enc`` has ``N`` rows (one per prefix; :meth:`reorder` expands it)."""

    def reorder(self, value: T, idx: torch.Tensor) -> T:
        """A state or an encoder output reordered / expanded along its rows by ``idx [N]`` (beam search)."""
        return value.index_select(idx)

    @abc.abstractmethod
    def forward(
        self, src: torch.Tensor, src_len: torch.Tensor, tgt_in: torch.Tensor, fertility: torch.Tensor | None = None
    ) -> ForwardOutput:
        """Teacher forcing: ``tgt_in [B, T]`` (``<s> y_1 .. y_n``) -> logits ``[B, T, V]`` and attention."""

    @classmethod
    def upgrade_state_dict(cls, weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """``weights`` (a saved ``state_dict()``) with the parameter names of older checkpoints renamed to this
        code's (what :func:`scanmt.model.build.build_model` loads; ``load_state_dict`` renames them too).
        The default renames nothing."""
        return weights

    # ------------------------------------------------------------------ training hooks
    @abc.abstractmethod
    def reset_parameters(self, init_range: float) -> None:
        """Initialise the weights (``train.param_init``; 0 keeps the architecture's own init)."""

    @abc.abstractmethod
    def probe_scores(self, on: bool) -> list[torch.Tensor]:
        """Start (``on``) retaining the gradients of the reported attention's scores in the next
        forward pass, or stop and return the scores retained since (attention health)."""

    def learned_alpha(self) -> dict[str, float]:
        """The learned alpha of an ``entmax`` / ``centmax`` attention (``model.attention.learn_alpha``), for the
        training log: ``{"alpha": mean}``, plus ``alpha_min`` and ``alpha_max`` when there is one per head;
        ``{}`` when alpha is not learned."""
        return {}

    def learned_scale(self) -> dict[str, float]:
        """The learned multiplier ``g`` of the attention scores (``model.attention.scaling: learned | cosine``),
        for the training log: ``{"scale": mean}``, plus ``scale_min`` and ``scale_max`` when there are several
        (one per head and layer); ``{}`` when the scale is fixed.  A scale that keeps growing makes sparse
        heads peakier (docs/transformer.md 4c)."""
        return {}

    # ------------------------------------------------------------------ shared by architectures
    def output_log_probs(self, logits: torch.Tensor) -> torch.Tensor:
        """``log p*`` of the next word from the generator's scores ``[.., V]`` under ``model.output``
        (:mod:`scanmt.model.output`; ``-inf`` where a sparse output gives zero probability)."""
        return output_log_probs(logits, self.cfg.output, self.cfg.output_alpha)

    def source_batch(
        self, src: torch.Tensor, src_len: torch.Tensor, fertility: torch.Tensor | None
    ) -> SourceBatch:
        """Check that a constrained model got fertilities, append the sink, and mask."""
        if self.constrained and fertility is None:
            raise ConfigError(
                f"model.attention.transform={self.cfg.attention.transform} needs fertilities "
                f"(set model.attention.fertility)"
            )
        if self.sink:
            src, src_len, fertility = sink_convention.append_sink(src, src_len, fertility)
        positions = torch.arange(src.size(1), device=src.device).unsqueeze(0)
        return SourceBatch(src, src_len, positions < src_len.unsqueeze(1), fertility)

    def masked_fertility(self, source: SourceBatch, dtype: torch.dtype) -> torch.Tensor | None:
        """The bounds ``[B, S']`` of a constrained model in ``dtype`` (0 at padding), or None."""
        if not self.constrained:
            return None
        zeros = torch.zeros(source.mask.shape, dtype=dtype, device=source.mask.device)
        return torch.where(source.mask, source.fertility.to(dtype), zeros)
