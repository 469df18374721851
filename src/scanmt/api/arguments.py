"""The types of the arguments of :mod:`scanmt.api`'s functions, checked first thing.

Each public function calls :func:`check_type` on its arguments before any work, so that ``api.train(None, out)``
or ``api.translate(["x"], 5)`` is one line naming the function, the argument, the types it takes and what was
given (a :class:`~scanmt.errors.ConfigError`, printed without a traceback), rather than an ``AttributeError``
from deep inside.  The request dataclasses check their own fields when they are built
(:meth:`scanmt.api.requests.CommandRequest.__post_init__`).
"""

from __future__ import annotations

from typing import Any

from scanmt.errors import ConfigError


def check_type(function: str, argument: str, value: Any, *expected: type, optional: bool = False) -> None:
    """Raise :class:`ConfigError` (``api.translate: model must be str, Path or Translator, got int 5``) unless
    ``value`` is an instance of one of ``expected`` (or None, where ``optional``).  A bool is not taken for an
    ``int``."""
    if value is None and optional:
        return
    if isinstance(value, expected) and (bool in expected or not isinstance(value, bool)):
        return
    names = [t.__name__ for t in expected] + (["None"] if optional else [])
    wanted = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]
    given = "None" if value is None else f"{type(value).__name__} {value!r:.60}"
    raise ConfigError(f"api.{function}: {argument} must be {wanted}, got {given}")
