"""Build an :class:`NMTModel` from a config, optionally with saved weights."""

from __future__ import annotations

from scanmt.config import Config
from scanmt.errors import ConfigError
from scanmt.model.nmt import NMTModel


def build_model(cfg: Config, vocab_size: int, state_dict: dict | None = None, what: str = "checkpoint") -> NMTModel:
    """The model ``cfg`` describes for ``vocab_size`` symbols, loaded with ``state_dict`` when given.

    Raises:
        ConfigError: naming ``what``, when the weights do not fit the model of the config.
    """
    model = NMTModel(cfg.model, vocab_size)
    if state_dict is not None:
        try:
            model.load_state_dict(state_dict)
        except RuntimeError as exc:
            first = str(exc).splitlines()[0] if str(exc) else "mismatch"
            raise ConfigError(f"{what} does not match the model its config describes: {first}") from None
    return model
