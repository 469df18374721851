"""The lstm architecture's config keys and checks (``model.arch: lstm``): the CovVector section
``model.coverage`` (:class:`CoverageConfig`, with its ranges), and what an lstm model needs of the shared
``model`` keys (:func:`check_lstm`).

A base module (it imports only :mod:`scanmt.choices`, :mod:`scanmt.errors` and :mod:`scanmt.ranges`):
:class:`~scanmt.config.Config` runs :func:`check_lstm` once, when it is built, so the model's constructors
check nothing again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from scanmt.choices import COVERAGE_TYPES, check_choice
from scanmt.errors import ConfigError
from scanmt.ranges import Range, check_values

if TYPE_CHECKING:
    from scanmt.config import ModelConfig


@dataclass
class CoverageConfig:
    """CovVector: the coverage models of Tu et al. (2016) in the attention scores."""

    #: none | linguistic (C = sum of attention) | linguistic_fertility (update divided by Phi_j = N*sigmoid(U_f h_j))
    #: | nn (tanh RNN coverage) | nn_gru (GRU-gated NN coverage)
    type: str = "none"
    #: coverage dimension d of the NN-based models (1 or 10 in the paper); linguistic models use 1
    dim: int = 1
    #: N in Phi_j = N * sigmoid(U_f h_j) (linguistic_fertility)
    fertility_scale: float = 2.0


#: the range of every numeric key of ``model.coverage``
COVERAGE_RANGES: dict[str, Range] = {"dim": Range(1, 1024), "fertility_scale": Range(0, 1000, low_open=True)}


def check_coverage_config(c: CoverageConfig, prefix: str = "model.coverage") -> None:
    """Raise :class:`ConfigError` naming the key for a bad ``model.coverage`` section."""
    check_choice(f"{prefix}.type", c.type, COVERAGE_TYPES, "coverage model")
    check_values(c, COVERAGE_RANGES, prefix)
    if c.type in ("linguistic", "linguistic_fertility") and c.dim != 1:
        raise ConfigError(
            f"{prefix}.dim={c.dim} applies to the NN-based models (nn, nn_gru); {c.type} coverage is a scalar (dim 1)"
        )


def check_lstm(m: ModelConfig) -> None:
    """Raise :class:`ConfigError` naming the key for a ``model`` section an lstm model cannot have: a bad
    ``model.coverage``, an odd ``model.hidden_size`` (each direction of the BiLSTM encoder has half of it), or
    one alpha per attention head (``model.attention.learn_alpha: head``: the lstm has a single attention)."""
    check_coverage_config(m.coverage)
    if m.hidden_size % 2:
        raise ConfigError(f"model.hidden_size must be even for a bidirectional encoder, got {m.hidden_size}")
    if m.attention.learn_alpha == "head":
        raise ConfigError(
            f"model.attention.learn_alpha=head: one alpha per attention head needs model.arch=transformer; the "
            f"{m.arch} architecture has a single attention (use learn_alpha: model)"
        )
