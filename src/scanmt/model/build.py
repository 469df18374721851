"""Build the :class:`~scanmt.model.interface.NMTModel` of a config (``model.arch``), optionally with saved weights."""

from __future__ import annotations

from scanmt.config import Config, ModelConfig
from scanmt.errors import ConfigError
from scanmt.model.interface import NMTModel


def architecture(cfg: ModelConfig, vocab_size: int) -> NMTModel:
    """The untrained model of ``model.arch`` (``lstm``: the paper's BiLSTM; ``transformer``)."""
    if cfg.arch == "lstm":
        from scanmt.model.lstm_model import LSTMModel

        return LSTMModel(cfg, vocab_size)
    if cfg.arch == "transformer":
        from scanmt.model.transformer import TransformerModel

        return TransformerModel(cfg, vocab_size)
    raise ConfigError(f"model.arch: unknown architecture {cfg.arch!r} (known: lstm, transformer)")


def build_model(cfg: Config, vocab_size: int, state_dict: dict | None = None, what: str = "checkpoint") -> NMTModel:
    """The model ``cfg`` describes for ``vocab_size`` symbols, loaded with ``state_dict`` when given.

    Raises:
        ConfigError: naming ``what``, when the weights do not fit the model of the config.
    """
    model = architecture(cfg.model, vocab_size)
    if state_dict is not None:
        try:
            model.load_state_dict(state_dict)
        except RuntimeError as exc:
            first = str(exc).splitlines()[0] if str(exc) else "mismatch"
            raise ConfigError(f"{what} does not match the model its config describes: {first}") from None
    return model
