"""Every closed set of values a config key may take, declared once and immutable (base level).

:class:`scanmt.config.Config` checks each of these keys when it is built (:func:`check_choice`
names the key, the value and the valid choices), so a bad value fails before a run folder,
data or fertility set-up is touched.  The rest of the package (the transforms registry, the
fertility rules, the model builders) reads the declarations from here and does not check again.

This module imports only :mod:`scanmt.errors`.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Collection, Mapping

from scanmt.errors import ConfigError

#: ``model.attention.transform``: name -> whether it is constrained (takes fertility upper bounds ``u``).
#: The registry (:mod:`scanmt.model.transforms`) binds a function to each name and to no other.
TRANSFORMS: Mapping[str, bool] = MappingProxyType({
    "softmax": False,
    "sparsemax": False,
    "entmax15": False,
    "entmax": False,
    "csoftmax": True,
    "csparsemax": True,
    "centmax": True,
})
#: the constrained transforms (from :data:`TRANSFORMS`)
CONSTRAINED_TRANSFORMS: frozenset[str] = frozenset(name for name, c in TRANSFORMS.items() if c)
#: the transforms with an alpha (``model.attention.alpha``, learnable with ``model.attention.learn_alpha``):
#: alpha-entmax by bisection and its constrained form
ALPHA_TRANSFORMS: frozenset[str] = frozenset({"entmax", "centmax"})
#: ``model.attention.learn_alpha``: none (alpha fixed at ``model.attention.alpha``) | model (one learned alpha for
#: the model's attention) | head (one per cross-attention head of every Transformer decoder layer)
LEARN_ALPHA: tuple[str, ...] = ("none", "model", "head")
#: ``model.output``: the mapping from the generator's scores to the next word's distribution (softmax, or a
#: sparse one trained with its Fenchel-Young loss: :mod:`scanmt.model.output`); ``entmax`` takes
#: ``model.output_alpha``
OUTPUTS: tuple[str, ...] = ("softmax", "sparsemax", "entmax15", "entmax")
#: ``model.attention.score``
SCORES: tuple[str, ...] = ("general", "mlp")
#: ``model.attention.scaling``
SCALINGS: tuple[str, ...] = ("none", "sqrt", "learned", "cosine")
#: ``model.attention.fertility.strategy`` of constrained transforms (``none``: :data:`NO_STRATEGY`)
STRATEGIES: tuple[str, ...] = ("constant", "guided", "predicted", "actual")
#: the strategy of unconstrained transforms
NO_STRATEGY = "none"
#: ``model.coverage.type``
COVERAGE_TYPES: tuple[str, ...] = ("none", "linguistic", "linguistic_fertility", "nn", "nn_gru")
#: ``model.arch``
ARCHS: tuple[str, ...] = ("lstm", "transformer")
#: ``model.transformer.bounded``: which cross-attention heads of a Transformer take fertility bounds
BOUNDED_MODES: tuple[str, ...] = ("all", "last_layer", "one_head", "shared")
#: ``model.transformer.transform_layers``: which decoder layers' cross-attention uses ``model.attention.transform``
TRANSFORM_LAYERS: tuple[str, ...] = ("all", "last_layer")
#: ``train.precision``
PRECISIONS: tuple[str, ...] = ("fp32", "bf16")
#: ``train.normalization``
NORMALIZATIONS: tuple[str, ...] = ("tokens", "sents")
#: ``train.optimizer``
OPTIMIZERS: tuple[str, ...] = ("sgd", "adam")
#: ``train.lr_schedule``: epoch_decay (OpenNMT-py's step decay per epoch, from ``lr_decay_start`` or the first
#: validation whose perplexity does not improve) | inverse_sqrt (Vaswani et al. 2017 / fairseq: linear warm-up
#: over ``warmup_steps`` updates, then lr * sqrt(warmup_steps / update))
LR_SCHEDULES: tuple[str, ...] = ("epoch_decay", "inverse_sqrt")
#: ``train.logger``
LOGGERS: tuple[str, ...] = ("csv", "tensorboard", "none")
#: ``decode.penalty_mode``
PENALTY_MODES: tuple[str, ...] = ("rescore", "step")
#: the fertility predictor's ``level``
PREDICTOR_LEVELS: tuple[str, ...] = ("subword", "word")
#: ``data.batch_sort``: the length a batching window is sorted by
#: (:meth:`scanmt.data.dataset.ParallelData.token_batches`'s ``sort``; docs/kftt.md, "Batch fill")
BATCH_SORTS: tuple[str, ...] = ("source", "longest")


def check_choice(key: str, value: Any, choices: Collection[str], what: str = "value") -> None:
    """:class:`ConfigError` naming ``key``, ``value`` (a ``what``) and the valid ``choices`` unless
    ``value`` is one of them."""
    if value not in choices:
        raise ConfigError(f"{key}: unknown {what} {value!r} (known: {', '.join(choices)})")
