"""The transformer architecture's config keys and checks (``model.arch: transformer``): the section
``model.transformer`` (:class:`TransformerConfig`, with its ranges), and what a transformer needs of the shared
``model`` keys (:func:`check_transformer`).

A base module (it imports only :mod:`scanmt.choices`, :mod:`scanmt.errors`, :mod:`scanmt.fertility.rules` and
:mod:`scanmt.ranges`): :class:`~scanmt.config.Config` runs :func:`check_transformer` once, when it is built, so
the model's constructors check nothing again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from scanmt.choices import BOUNDED_MODES, TRANSFORM_LAYERS, check_choice
from scanmt.errors import ConfigError
from scanmt.fertility.rules import is_constrained
from scanmt.ranges import MAX_WIDTH, Range, check_values

if TYPE_CHECKING:
    from scanmt.config import ModelConfig


@dataclass
class TransformerConfig:
    """The Transformer's own keys (``model.arch: transformer``; ignored by the lstm architecture).

    d_model is ``model.hidden_size`` (``model.emb_size`` must equal it); ``model.layers`` is not used
    (the two layer keys below are); ``model.dropout`` is the residual and embedding dropout.
    """

    #: attention heads of every self- and cross-attention; must divide d_model (model.hidden_size)
    heads: int = 4
    #: inner size of the position-wise feed-forward layers
    ff_size: int = 1024
    #: encoder layers (>= 1)
    encoder_layers: int = 3
    #: decoder layers (>= 1)
    decoder_layers: int = 3
    #: dropout on the attention weights (self- and cross-attention), in [0, 1)
    attention_dropout: float = 0.1
    #: which cross-attention heads take the fertility bounds of a constrained transform (csoftmax, csparsemax,
    #: centmax; the other heads use the unconstrained transform of the same family: softmax, sparsemax, entmax):
    #: all (every head of every decoder layer, each with its own cumulative attention) | last_layer (every
    #: head of the last decoder layer, each with its own cumulative attention) | one_head (head 0 of the last
    #: decoder layer only) | shared (every head of the last decoder layer, bounded by one cumulative attention:
    #: the running sum of the mean over its heads, which is the reported attention). Ignored for unconstrained
    #: transforms. The default is provisional (a measurement will choose).
    bounded: str = "last_layer"
    #: which decoder layers' cross-attention uses model.attention.transform: all | last_layer (the layers below
    #: the last use plain softmax, fused). With last_layer, bounded must not be all, and learn_alpha must not
    #: be head. Checkpoints written before this key existed load as all (their behaviour).
    transform_layers: str = "all"


#: the range of every numeric key of ``model.transformer``
RANGES: dict[str, Range] = {
    "heads": Range(1, 1024),
    "ff_size": Range(1, 4 * MAX_WIDTH),
    "encoder_layers": Range(1, 64),
    "decoder_layers": Range(1, 64),
    "attention_dropout": Range(0, 1, high_open=True),
}


def check_transformer(m: ModelConfig) -> None:
    """Raise :class:`ConfigError` naming the key for a bad transformer config (``model.transformer`` and the
    ``model`` keys a transformer reads differently: d_model is ``model.hidden_size``)."""
    t = m.transformer
    p = "model.transformer"
    if m.coverage.type != "none":
        raise ConfigError(
            f"model.coverage.type={m.coverage.type}: Tu et al.'s CovVector is a recurrent mechanism of the lstm "
            "architecture; a transformer has none (its coverage baseline is the CovPenalty, decode.coverage_beta)"
        )
    if m.emb_size != m.hidden_size:
        raise ConfigError(
            f"model.emb_size={m.emb_size}: a transformer's embeddings have d_model = model.hidden_size "
            f"({m.hidden_size}) units; set both to the same value"
        )
    check_values(t, RANGES, p)
    if m.hidden_size % t.heads:
        raise ConfigError(
            f"{p}.heads={t.heads} must divide d_model (model.hidden_size={m.hidden_size})"
        )
    check_choice(f"{p}.bounded", t.bounded, BOUNDED_MODES, "mode")
    check_choice(f"{p}.transform_layers", t.transform_layers, TRANSFORM_LAYERS, "choice")
    if t.transform_layers == "last_layer" and t.decoder_layers > 1:
        if is_constrained(m.attention.transform) and t.bounded == "all":
            raise ConfigError(
                f"{p}.bounded=all bounds every decoder layer, but {p}.transform_layers=last_layer gives the layers "
                "below the last plain softmax; use bounded: last_layer, one_head or shared, or transform_layers: all"
            )
        if m.attention.learn_alpha == "head":
            raise ConfigError(
                f"model.attention.learn_alpha=head learns one alpha per head of every decoder layer, but "
                f"{p}.transform_layers=last_layer gives the layers below the last plain softmax (no alpha); "
                "use learn_alpha: model, or transform_layers: all"
            )
    if m.attention.score != "general":
        raise ConfigError(
            f"model.attention.score={m.attention.score}: a transformer's attention scores are scaled dot "
            "products (use general)"
        )
    if m.attention.scaling not in ("none", "sqrt", "cosine"):
        raise ConfigError(
            f"model.attention.scaling={m.attention.scaling}: a transformer scales its scores by 1/sqrt(d_head) "
            "(none or sqrt), or uses cosine cross-attention scores with a learned scale per head (cosine)"
        )
