"""The Transformer encoder–decoder (``model.arch: transformer``, issue 28) with fertility-bounded cross-attention.

Pre-norm layers (Vaswani et al. 2017; layer norm before every sub-layer, a final layer norm after
each stack), multi-head attention, sinusoidal positions added to embeddings scaled by ``sqrt(d)``,
ReLU feed-forward layers, optional shared source/target embeddings (``model.share_embeddings``) and
a generator tied to the target embeddings (``model.tie_generator``)::

    src [B, S] --(+<sink>)--> emb*sqrt(d) + pos --> N x [self-attn, FF] --> norm --> memory [B, S', d]
                                 cross-attention keys/values of every decoder layer, once per sentence
    tgt_in [B, T] --> emb*sqrt(d) + pos --> M x [causal self-attn, cross-attn, FF] --> norm --> generator

Keys (:class:`~scanmt.config.TransformerConfig`): ``d_model = model.hidden_size`` (``model.emb_size`` must
equal it; checked when the config is built), ``model.transformer.heads``, ``ff_size``,
``encoder_layers``, ``decoder_layers`` (``model.layers`` is not used), ``model.dropout`` (embeddings
and residual branches), ``model.transformer.attention_dropout`` (attention weights).  The scores of
every attention are ``q·k / sqrt(d_head)`` (``model.attention.score`` must be ``general``;
``scaling`` none or sqrt, both meaning this), except the cross-attention scores under
``model.attention.scaling=cosine``: ``g_h cos(q, k)``, with one learned scale ``g_h`` per head (1 at
first, so that the score gaps of a head are at most ``2 g_h``), in every cross-attention layer that uses
``model.attention.transform`` (all, or the last with ``transform_layers: last_layer``).

Cross-attention and fertility bounds
------------------------------------
The cross-attention heads use the transforms of the registry through
:class:`~scanmt.model.bounds.BoundedTransform`.  With a constrained transform (csoftmax, csparsemax,
centmax), ``model.transformer.bounded`` says which heads take the bounds ``u = max(0, f - attention_sum)`` (and the
exhaustion bonus); the other heads use the unconstrained transform of the same family (softmax for
csoftmax, sparsemax for csparsemax, entmax with the same alpha for centmax):

* ``all``: every head of every decoder layer, each with its own cumulative attention ``attention_sum``;
* ``last_layer`` (default): every head of the last decoder layer, each with its own ``attention_sum``;
* ``one_head``: head 0 of the last decoder layer (one alignment head);
* ``shared``: every head of the last decoder layer, all bounded by one ``attention_sum``: the running sum of
  the mean over that layer's heads (which is the reported attention, so this sum is the state's ``attention_sum``).

``model.transformer.transform_layers`` says which layers use ``model.attention.transform`` at all:
``all`` (every decoder layer; the unbounded heads use the family's unconstrained transform) or
``last_layer`` (the cross-attention of the layers below the last is plain softmax, fused, as in a softmax
model; only the last layer is sparse or bounded).

With its own ``attention_sum``, each bounded head attends to word ``j`` at most ``f_j`` times in total, so the
reported attention (a mean over heads) does too.  With an unconstrained transform (softmax, sparsemax,
entmax15, entmax) every head uses it and ``bounded`` is ignored.  The sink column (appended by
``source_batch``, bound ``inf``) absorbs what the bounds no longer allow.

alpha of entmax / centmax
-------------------------
Every cross-attention head uses ``model.attention.alpha``, unless it is learned
(``model.attention.learn_alpha``): the model then owns one :class:`~scanmt.model.bounds.LearnedAlpha`
(``TransformerModel.cross_alpha``, ``alpha = 1 + softplus(raw)``), of shape ``()`` for ``model`` (one alpha for
every head of every layer) or ``(decoder_layers, heads)`` for ``head`` (one per cross-attention head).
A layer's per-head alphas are split like its heads (bounded heads first) and broadcast as one value per
row of the scores (``[1, heads, 1, 1]`` against ``[N, heads, T, S']``).  The self-attention and the
fused softmax layers have no alpha.

The reported attention
----------------------
``Step.attention`` / ``ForwardOutput.attention`` (attention files, maps, AER, attention health, the
coverage penalty) is **the mean over heads of the last decoder layer's cross-attention** (before
attention dropout): a distribution over the source columns (sink last) that sums to 1 and is exactly
0 at padding.  ``DecoderState.attention_sum`` is its running sum.

Computation
-----------
* Self-attention (encoder and decoder) and the cross-attention of layers whose heads are all plain
  softmax (not the last layer, no bounds) use the fused ``F.scaled_dot_product_attention``
  (:func:`~scanmt.model.transformer.fused_attention.fused_attention`: without cuDNN's backend for bf16 on GPUs).  All other
  cross-attention heads (the last layer's: its weights are reported; bounded heads; sparsemax heads)
  compute the scores ``q·k / sqrt(d_head)`` explicitly, in float32 (float64 for a float64 model; autocast
  is switched off there, so under ``train.precision=bf16`` the transforms and the cumulative attention
  stay float32), and apply their transform.
* Teacher forcing (:meth:`TransformerModel.forward`) runs every layer in parallel over time (causal
  mask), scores included.  Only the transform of bounded heads is sequential over the ``T`` steps, since
  the bounds of step ``t`` depend on the attention of steps ``< t``: one call of
  :func:`scanmt.ops.bounded_recurrence` over all ``T`` (a loop over the steps on the CPU, one Triton kernel
  on a GPU with ``scanmt[gpu]``), exact, and equal to step-by-step decoding (the same op with ``T = 1``).
* Incremental decoding (:meth:`TransformerModel.step`): the state caches every decoder layer's
  self-attention keys/values (one more position per step; the step's position is the cache length)
  and the cumulative attention of the bounded heads; the cross-attention keys/values are computed once
  per sentence in :meth:`TransformerModel.encode`.  Every field is batch-first, so the generic
  ``index_select`` reorders states and encoder outputs for beams.

``probe_scores`` retains the scores of the last decoder layer's cross-attention (``[B, heads, T, S']``,
always materialised since that layer's weights are reported).  ``reset_parameters`` ignores
``train.param_init``: Xavier-uniform matrices (each ``d x d`` block of the fused projections on its
own), zero biases, ``N(0, d^-1/2)`` embeddings (zero at padding), unit layer norms.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from scanmt.config import ModelConfig
from scanmt.data.vocab import PAD_ID
from scanmt.model.bounds import LearnedAlpha
from scanmt.model.build import register_architecture
from scanmt.model.interface import DecoderState, EncoderOutput, ForwardOutput, NMTModel, Step, log_summary
from scanmt.model.transformer.layers import (
    CrossAttention, DecoderLayer, EncoderLayer, FeedForward, SelfAttention, compute_dtype, sinusoids,
)


# ---------------------------------------------------------------------- state
@dataclass
class TransformerEncoderOutput(EncoderOutput):
    """The Transformer's source side (every field batch-first).

    Attributes:
        memory, mask, fertility: see :class:`~scanmt.model.interface.EncoderOutput` (``memory`` after the
            encoder's final layer norm; ``fertility`` in float32 or wider).
        cross_keys, cross_values: per decoder layer, ``[B, h, S', d_head]`` cross-attention keys and values.
    """

    cross_keys: tuple[torch.Tensor, ...] = ()
    cross_values: tuple[torch.Tensor, ...] = ()


@dataclass
class TransformerState(DecoderState):
    """The Transformer decoder's state per hypothesis (every field batch-first).

    Attributes:
        attention_sum: ``[N, S']`` running sum of the reported attention (mean over the last layer's heads);
            the cumulative attention of ``bounded: shared``.
        self_keys, self_values: per decoder layer, ``[N, h, t, d_head]`` self-attention cache after ``t`` words
            (``t`` is the position of the next step).
        head_sums: per decoder layer, ``[N, n_bounded, S']`` cumulative attention of its bounded heads, or None
            (no bounded heads, or shared ones: they use ``attention_sum``).
    """

    self_keys: tuple[torch.Tensor, ...] = ()
    self_values: tuple[torch.Tensor, ...] = ()
    head_sums: tuple[torch.Tensor | None, ...] = ()


# ---------------------------------------------------------------------- the model
class TransformerModel(NMTModel):
    def __init__(self, cfg: ModelConfig, vocab_size: int):
        super().__init__(cfg, vocab_size)
        t = cfg.transformer
        d = self.d = cfg.hidden_size
        self.heads = t.heads
        self.embed_scale = math.sqrt(d)
        src_emb = nn.Embedding(vocab_size, d, padding_idx=PAD_ID)
        tgt_emb = src_emb if cfg.share_embeddings else nn.Embedding(vocab_size, d, padding_idx=PAD_ID)
        self.src_emb, self.tgt_emb = src_emb, tgt_emb
        #: the position table (float32), extended on demand; not a buffer: no weight, nothing for DDP to broadcast
        self._positions = sinusoids(256, d)
        self.dropout = nn.Dropout(cfg.dropout)
        self.encoder_layers = nn.ModuleList(
            EncoderLayer(d, t.heads, t.ff_size, cfg.dropout, t.attention_dropout) for _ in range(t.encoder_layers)
        )
        self.encoder_norm = nn.LayerNorm(d)
        last = t.decoder_layers - 1
        layers = []
        for i in range(t.decoder_layers):
            n_bounded = 0
            if self.constrained and (t.bounded == "all" or i == last):
                n_bounded = 1 if t.bounded == "one_head" else t.heads
            transform = cfg.attention.transform
            if t.transform_layers == "last_layer" and i != last:
                transform = "softmax"
            cross = CrossAttention(
                d, t.heads, t.attention_dropout, transform, cfg.attention.exhaustion if n_bounded else 0.0,
                n_bounded, shared=t.bounded == "shared" and n_bounded > 0, reported=i == last,
                alpha=cfg.attention.alpha,
                cosine=cfg.attention.scaling == "cosine" and (t.transform_layers == "all" or i == last),
            )
            layers.append(DecoderLayer(d, t.heads, t.ff_size, cfg.dropout, cross))
        self.decoder_layers = nn.ModuleList(layers)
        #: the learned alpha of entmax / centmax (model.attention.learn_alpha: model or head), else None
        learn = cfg.attention.learn_alpha
        self.cross_alpha = None if learn == "none" else LearnedAlpha(
            cfg.attention.alpha, () if learn == "model" else (t.decoder_layers, t.heads))
        self.decoder_norm = nn.LayerNorm(d)
        self.generator = nn.Linear(d, vocab_size)
        if cfg.tie_generator:
            self.generator.weight = tgt_emb.weight
        self.reset_parameters(0.0)

    @property
    def reported(self) -> CrossAttention:
        """The cross-attention whose mean over heads is reported: the last decoder layer's."""
        return self.decoder_layers[-1].cross

    # ----------------------------------------------------------------- training hooks
    def reset_parameters(self, init_range: float) -> None:
        """Xavier init (``init_range``, i.e. ``train.param_init``, is ignored: see the module docstring)."""
        for m in self.modules():
            if isinstance(m, (SelfAttention, CrossAttention, FeedForward)):
                m.reset_parameters()
            elif isinstance(m, nn.LayerNorm):
                m.reset_parameters()
        if not self.cfg.tie_generator:
            nn.init.xavier_uniform_(self.generator.weight)
        nn.init.zeros_(self.generator.bias)
        with torch.no_grad():
            for emb in {id(e): e for e in (self.src_emb, self.tgt_emb)}.values():
                nn.init.normal_(emb.weight, 0.0, self.d ** -0.5)
                emb.weight[PAD_ID].zero_()
        if self.cross_alpha is not None:
            self.cross_alpha.reset_parameters()

    def learned_alpha(self) -> dict[str, float]:
        return log_summary("alpha", self.cross_alpha()) if self.cross_alpha is not None else {}

    def learned_scale(self) -> dict[str, float]:
        """The per-head scales ``g_h`` of the cosine cross-attention layers (over every such layer and head)."""
        scales = [layer.cross.log_scale for layer in self.decoder_layers if layer.cross.log_scale is not None]
        return log_summary("scale", torch.stack(scales).exp()) if scales else {}

    def probe_scores(self, on: bool) -> list[torch.Tensor]:
        """The last decoder layer's cross-attention scores ``[B, h, T, S']`` (always explicit, never fused)."""
        cross = self.reported
        scores = cross.probe or []
        cross.probe = [] if on else None
        return scores

    # ----------------------------------------------------------------- pieces
    def _embed(self, emb: nn.Embedding, ids: torch.Tensor, start: int) -> torch.Tensor:
        """``ids [N, T]`` at positions ``start ..`` -> ``[N, T, d]`` (scaled embeddings + positions, dropout)."""
        end = start + ids.size(1)
        pe = self._positions
        if end > pe.size(0) or pe.device != ids.device:
            pe = self._positions = sinusoids(max(end, pe.size(0)), self.d).to(ids.device)
        x = emb(ids) * self.embed_scale
        return self.dropout(x + pe[start:end].to(x.dtype))

    def _decode(
        self,
        x: torch.Tensor,
        enc: TransformerEncoderOutput,
        state: TransformerState,
        cached: bool,
    ) -> tuple[torch.Tensor, list, list, list, list[torch.Tensor]]:
        """The decoder stack over ``x [N, T, d]`` (the embedded words after the state's cached ones when
        ``cached``) -> normalised outputs ``[N, T, d]``, the new caches and head sums, and the cross-attention
        weights ``[N, h, T, S']`` of every layer that computes them explicitly (the last layer's last)."""
        keys, values, sums, weights = [], [], [], []
        alpha = self.cross_alpha() if self.cross_alpha is not None else None  # [] or [layers, heads]
        for i, layer in enumerate(self.decoder_layers):
            shared = layer.cross.shared
            s = state.attention_sum.unsqueeze(1) if shared else state.head_sums[i]
            past = (state.self_keys[i], state.self_values[i]) if cached else None
            a = alpha[i] if alpha is not None and alpha.dim() else alpha
            x, (k, v), p, s = layer(x, enc.cross_keys[i], enc.cross_values[i], enc.mask, enc.fertility, s, past, a)
            keys.append(k)
            values.append(v)
            sums.append(None if shared else s)
            if p is not None:
                weights.append(p)
        return self.decoder_norm(x), keys, values, sums, weights

    # ----------------------------------------------------------------- the five calls
    def encode(
        self, src: torch.Tensor, src_len: torch.Tensor, fertility: torch.Tensor | None = None
    ) -> TransformerEncoderOutput:
        source = self.source_batch(src, src_len, fertility)
        x = self._embed(self.src_emb, source.src, 0)
        mask4 = source.mask[:, None, None, :]
        for layer in self.encoder_layers:
            x = layer(x, mask4)
        memory = self.encoder_norm(x)
        kv = [layer.cross.keys_values(memory) for layer in self.decoder_layers]
        return TransformerEncoderOutput(
            memory=memory,
            mask=source.mask,
            fertility=self.masked_fertility(source, compute_dtype(memory.dtype)),
            cross_keys=tuple(k for k, _ in kv),
            cross_values=tuple(v for _, v in kv),
        )

    def init_state(self, enc: TransformerEncoderOutput) -> TransformerState:
        N, S = enc.mask.shape
        ct = compute_dtype(enc.memory.dtype)
        empty = enc.memory.new_zeros(N, self.heads, 0, self.d // self.heads)
        sums = tuple(
            enc.memory.new_zeros(N, layer.cross.n_bounded, S, dtype=ct)
            if layer.cross.n_bounded and not layer.cross.shared else None
            for layer in self.decoder_layers
        )
        L = len(self.decoder_layers)
        return TransformerState(
            attention_sum=enc.memory.new_zeros(N, S, dtype=ct),
            self_keys=(empty,) * L,
            self_values=(empty,) * L,
            head_sums=sums,
        )

    def step(self, y: torch.Tensor, state: TransformerState, enc: TransformerEncoderOutput) -> Step:
        t = state.self_keys[0].size(2)  # words read so far: the position of this one
        x = self._embed(self.tgt_emb, y.unsqueeze(1), t)
        h, keys, values, sums, weights = self._decode(x, enc, state, cached=True)
        attention = weights[-1].mean(1)[:, 0]  # [N, S']
        new = TransformerState(
            attention_sum=state.attention_sum + attention,
            self_keys=tuple(keys),
            self_values=tuple(values),
            head_sums=tuple(sums),
        )
        logits = self.generator(h[:, 0])
        return Step(self.output_log_probs(logits.to(compute_dtype(logits.dtype))), attention, new)

    def forward(
        self, src: torch.Tensor, src_len: torch.Tensor, tgt_in: torch.Tensor, fertility: torch.Tensor | None = None
    ) -> ForwardOutput:
        """Teacher forcing: ``tgt_in [B, T]`` (``<s> y_1 .. y_n``) -> logits ``[B, T, V]`` and the reported
        attention ``[B, T, S']``; parallel over time except the transform of bounded heads."""
        enc = self.encode(src, src_len, fertility)
        state = self.init_state(enc)
        x = self._embed(self.tgt_emb, tgt_in, 0)
        h, _, _, _, weights = self._decode(x, enc, state, cached=False)
        return ForwardOutput(self.generator(h), weights[-1].mean(1), tuple(weights))


register_architecture("transformer", TransformerModel)
