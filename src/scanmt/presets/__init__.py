"""Shipped config presets (``cpu-small``, ``paper``); the YAML files live in the repository's ``configs/``."""

from __future__ import annotations

from pathlib import Path

from scanmt.errors import ConfigError

_HERE = Path(__file__).resolve().parent


def preset_path(name: str) -> Path:
    """Path of preset ``name`` (``cpu-small`` or ``paper``), or a YAML path given directly."""
    if name.endswith((".yaml", ".yml")):
        return Path(name)
    for d in (_HERE, _HERE.parents[2] / "configs"):
        p = d / f"{name}.yaml"
        if p.exists():
            return p
    known = sorted(p.stem for p in _HERE.glob("*.yaml"))
    raise ConfigError(f"unknown preset {name!r} (known: {', '.join(known)})")
