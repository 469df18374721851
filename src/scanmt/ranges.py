"""The valid values of a numeric config key: :class:`Range`, one declaration per key that serves
:class:`~scanmt.config.Config`, the commands' options and the API's requests, so all give the same message.

A base module (it imports only :mod:`scanmt.errors`), so that the config keys of each architecture
(:mod:`scanmt.model.lstm.config`, :mod:`scanmt.model.transformer.config`) declare their ranges beside them.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from dataclasses import dataclass
from typing import Any, Mapping

from scanmt.errors import ConfigError

#: largest model width (emb_size, hidden_size): 16384 is already 1 GiB per LSTM weight matrix
MAX_WIDTH = 16384


@dataclass(frozen=True)
class Range:
    """The valid values of a numeric config key (or of the option that sets it): finite numbers from
    ``low`` to ``high`` (None: unbounded), each end inclusive unless ``*_open``; ``note`` says what a
    special value means (``0 = no limit``).  One declaration per key (:data:`RANGES`) serves
    :class:`Config`, the commands' options and the API's requests, so all give the same message."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    note: str = ""

    @property
    def words(self) -> str:
        """The range as the messages write it: ``> 0``, ``in [0, 1)``, ``>= 1 (1 = greedy)``."""
        if self.low is not None and self.high is not None:
            text = (f"in {'(' if self.low_open else '['}{plain(self.low)}, {plain(self.high)}"
                    f"{')' if self.high_open else ']'}")
        elif self.low is not None:
            text = f"{'>' if self.low_open else '>='} {plain(self.low)}"
        else:
            text = f"{'<' if self.high_open else '<='} {plain(self.high)}"
        return f"{text} ({self.note})" if self.note else text

    def contains(self, value: float) -> bool:
        """Whether the finite number ``value`` lies in the range."""
        lo, hi = self.low, self.high
        return ((lo is None or (value > lo if self.low_open else value >= lo))
                and (hi is None or (value < hi if self.high_open else value <= hi)))

    def problem(self, name: str, value: Any, integer: bool = False) -> str | None:
        """None for a good value; else ``NAME must be RANGE, got VALUE`` (``a whole number``/``a number`` for
        a value of the wrong type)."""
        is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if integer and not isinstance(value, int) or isinstance(value, bool):
            return f"{name} must be a whole number {self.words}, got {value!r}"
        if not is_number:
            return f"{name} must be a number {self.words}, got {value!r}"
        if not math.isfinite(value) or not self.contains(value):
            return f"{name} must be {self.words}, got {value}"
        return None

    def check(self, name: str, value: Any, integer: bool = False) -> None:
        """Raise :class:`ConfigError` with :meth:`problem` for a bad ``value``."""
        message = self.problem(name, value, integer)
        if message:
            raise ConfigError(message)


def plain(bound: float) -> str:
    """A range's end as written in messages: whole numbers in full (``4294967295``), others as ``%g``."""
    return str(int(bound)) if float(bound).is_integer() else f"{bound:g}"


def is_int_field(section: Any, key: str) -> bool:
    """Whether ``key`` of the dataclass ``section`` is declared ``int``."""
    hints = typing.get_type_hints(type(section)) if dataclasses.is_dataclass(section) else {}
    return hints.get(key) is int


def check_values(section: Any, ranges: Mapping[str, Range], prefix: str) -> None:
    """Raise :class:`ConfigError` for the first value of the dataclass ``section`` out of its range in ``ranges``
    (by key), naming ``PREFIX.KEY``."""
    for key, r in ranges.items():
        r.check(f"{prefix}.{key}", getattr(section, key), integer=is_int_field(section, key))
