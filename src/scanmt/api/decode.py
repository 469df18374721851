"""Decode settings: a checkpoint's ``decode`` section with a penalties file and explicit values on top.

The settings are built once, as a new :class:`~scanmt.config.DecodeConfig`
(``dataclasses.replace``), and handed to the :class:`~scanmt.decoding.translator.Translator`,
which checks them when they are set.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scanmt.api.arguments import check_type
from scanmt.config import Config, DecodeConfig
from scanmt.errors import ConfigError
from scanmt.io import load_yaml, read_text

#: decode keys a penalties file may set (everything else in it is informational)
PENALTY_KEYS = ("length_alpha", "coverage_beta", "coverage_eps", "penalty_mode")


def load_penalties(path: str | Path) -> dict[str, Any]:
    """The decode settings (:data:`PENALTY_KEYS`) of a file written by ``tune_penalties`` (YAML or JSON)."""
    import yaml

    check_type("load_penalties", "path", path, str, Path)
    path = Path(path)
    try:
        raw = load_yaml(read_text(path, "penalties file"), str(path)) or {}
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the penalties file: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML/JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping with {', '.join(PENALTY_KEYS)}")
    found = {k: raw[k] for k in PENALTY_KEYS if k in raw}
    if not found:
        raise ConfigError(f"{path}: none of {', '.join(PENALTY_KEYS)} found")
    try:
        decode = Config.from_dict({"decode": found}).decode  # types and values checked, keys named
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return {k: getattr(decode, k) for k in found}


@dataclass(frozen=True)
class DecodeOverrides:
    """Changes to a checkpoint's decode settings; None keeps the checkpoint's value.

    ``penalties`` is a file written by ``tune_penalties``; the explicit values override it.
    """

    penalties: str | Path | None = None
    length_alpha: float | None = None
    coverage_beta: float | None = None
    coverage_eps: float | None = None
    penalty_mode: str | None = None
    batch_size: int | None = None
    #: decode.min_len: no ``</s>`` before this many output tokens
    min_len: int | None = None
    #: decode.max_source_len: longer source sentences (subwords) are refused
    max_source_len: int | None = None

    def apply(self, decode: DecodeConfig) -> DecodeConfig:
        """A new ``decode`` with these changes (checked where it is used: ``Translator.decode``)."""
        values = load_penalties(self.penalties) if self.penalties else {}
        for key in (*PENALTY_KEYS, "batch_size", "min_len", "max_source_len"):
            if getattr(self, key) is not None:
                values[key] = getattr(self, key)
        if not self.batch_size:
            values.pop("batch_size", None)
        return dataclasses.replace(decode, **values)
