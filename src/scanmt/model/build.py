"""Build the :class:`~scanmt.model.interface.NMTModel` of a config (``model.arch``), optionally with saved weights.

Architectures register themselves here (:func:`register_architecture`): the module of each one's model calls
it when imported, with the class (or any callable) that builds the model of a
:class:`~scanmt.config.ModelConfig` for a vocabulary size.  The built-in ones (:mod:`scanmt.model.lstm`,
:mod:`scanmt.model.transformer`) are imported when the registry is first read (:func:`architectures`).  An
architecture's config keys and checks are :class:`~scanmt.config.Config`'s (the built-in ones' in
``scanmt.model.*.config``; another one's through :func:`scanmt.config.register_architecture_keys`), so a config
is checked once, when it is built.  An unknown ``model.arch`` is a :class:`~scanmt.errors.ConfigError` naming it
and the known ones.
"""

from __future__ import annotations

from typing import Callable

import torch

from scanmt.config import Config, ModelConfig
from scanmt.errors import ConfigError
from scanmt.model.interface import NMTModel

#: ``(model config, vocabulary size) -> untrained model`` of one architecture
Builder = Callable[[ModelConfig, int], NMTModel]
#: the builder of each registered architecture, by ``model.arch``
_ARCHITECTURES: dict[str, Builder] = {}


def register_architecture(arch: str, builder: Builder) -> None:
    """Build the models of ``model.arch: ARCH`` with ``builder`` (a later registration of ``arch`` replaces it)."""
    _ARCHITECTURES[arch] = builder


def architectures() -> dict[str, Builder]:
    """Every registered architecture (the built-in ones included) by name."""
    import scanmt.model.lstm.model  # noqa: F401  (the built-in architectures register themselves)
    import scanmt.model.transformer.model  # noqa: F401

    return dict(_ARCHITECTURES)


def architecture(cfg: ModelConfig, vocab_size: int) -> NMTModel:
    """The untrained model of ``model.arch`` (``lstm``: the paper's BiLSTM; ``transformer``; any registered one).

    Raises:
        ConfigError: for an architecture nobody registered, naming it and the known ones.
    """
    known = architectures()
    if cfg.arch not in known:
        raise ConfigError(f"model.arch: unknown architecture {cfg.arch!r} (known: {', '.join(known)})")
    return known[cfg.arch](cfg, vocab_size)


def build_model(cfg: Config, vocab_size: int, state_dict: dict | None = None, what: str = "checkpoint") -> NMTModel:
    """The model ``cfg`` describes for ``vocab_size`` symbols, loaded with ``state_dict`` when given.

    Raises:
        ConfigError: naming ``what``, when the weights do not fit the model of the config.
    """
    model = architecture(cfg.model, vocab_size)
    if state_dict is not None:
        state_dict = type(model).upgrade_state_dict(state_dict)
        check_weights(model.state_dict(), state_dict, what)
        model.load_state_dict(state_dict)
    return model


def upgraded_weights(arch: str, weights: dict) -> dict:
    """``weights`` of a ``model.arch: ARCH`` model with the parameter names of older checkpoints renamed
    (:meth:`NMTModel.upgrade_state_dict <scanmt.model.interface.NMTModel.upgrade_state_dict>` of its class)."""
    upgrade = getattr(architectures().get(arch), "upgrade_state_dict", None)
    return upgrade(weights) if upgrade is not None else weights


def check_weights(expected: dict, weights: dict, what: str) -> None:
    """Raise :class:`ConfigError` naming ``what`` and the parameter when ``weights`` do not fit the model whose
    ``state_dict()`` is ``expected`` (a missing or unknown parameter, both shapes of a wrong one), or hold a
    value that is not finite (NaN or infinite: a run that diverged)."""
    mismatch = f"{what}: the checkpoint does not match the model its config describes"
    missing = [k for k in expected if k not in weights]
    unknown = [k for k in weights if k not in expected]
    if missing or unknown:
        which = f"lacks {missing[0]}" if missing else f"has {unknown[0]}, which the model does not"
        raise ConfigError(f"{mismatch}: the file {which} ({len(missing)} missing, {len(unknown)} unknown "
                          "parameter(s))")
    for key, value in weights.items():
        shape = tuple(getattr(value, "shape", ()))
        if shape != tuple(expected[key].shape):
            raise ConfigError(f"{mismatch}: parameter {key} has shape {shape} in the file, but the model needs "
                              f"{tuple(expected[key].shape)}")
        if torch.is_tensor(value) and value.is_floating_point() and not bool(torch.isfinite(value).all()):
            raise ConfigError(f"{what}: parameter {key} holds NaN or infinite values (the training run diverged?); "
                              "use an earlier checkpoint")
