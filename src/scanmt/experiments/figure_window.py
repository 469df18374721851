"""Which test sentences a report's attention maps (Figure 2) may draw, by the length of their source.

``scanmt experiment report`` picks its figures among the sources of ``--min-figure-words`` to
``--max-figure-words`` words and at most ``--max-figure-tokens`` subwords; ``scanmt experiment archive`` takes
the same options to keep the attention of only those sentences (a dense attention file is megabytes, and the
maps are all that an archived run's attention serves).  Words are counted by the source language's tokenizer
(MeCab for Japanese, whose raw text has no spaces to count); subwords with the sink, as the attention file holds
them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from scanmt.errors import ConfigError, DataError


def source_word_counts(lines: Sequence[str], lang: str) -> list[int]:
    """The number of words of each line by ``lang``'s tokenizer (0 for a blank line)."""
    from scanmt.data.tokenize import tokenize

    return [len(tokenize(line, lang).split()) if line.strip() else 0 for line in lines]


@dataclass(frozen=True)
class FigureWindow:
    """Sources of ``min_words`` to ``max_words`` words and at most ``max_tokens`` subwords (None: no limit)."""

    min_words: int = 0
    max_words: int | None = None
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        for name in ("min_words", "max_words", "max_tokens"):
            value = getattr(self, name)
            if value is not None and (type(value) is not int or value < 0):
                raise ConfigError(f"figure window: {name} must be a whole number >= 0, got {value!r}")
        if self.max_words is not None and self.min_words > self.max_words:
            raise ConfigError(f"--min-figure-words {self.min_words} is above --max-figure-words {self.max_words}: "
                              "no sentence could be drawn")

    def admits(self, words: int, tokens: int) -> bool:
        """Whether a source of ``words`` words and ``tokens`` subwords is within the window."""
        return (self.min_words <= words and (self.max_words is None or words <= self.max_words)
                and (self.max_tokens is None or tokens <= self.max_tokens))

    def describe(self) -> str:
        """``"sources of 30 to 50 words and at most 70 subwords"``, for messages and reports."""
        if self.max_words is None:
            words = f"sources of at least {self.min_words} words" if self.min_words else "sources of any length"
        else:
            words = (f"sources of {self.min_words} to {self.max_words} words" if self.min_words
                     else f"sources of at most {self.max_words} words")
        return words + (f" and at most {self.max_tokens} subwords" if self.max_tokens is not None else "")

    def as_record(self) -> dict[str, int | None]:
        return {"min_words": self.min_words, "max_words": self.max_words, "max_tokens": self.max_tokens}

    @classmethod
    def from_record(cls, record: Any, where: str) -> FigureWindow:
        """The window of a manifest's record (:meth:`as_record`).

        Raises:
            DataError: naming ``where``, for a record that is not one.
        """
        try:
            if not isinstance(record, dict) or set(record) != {"min_words", "max_words", "max_tokens"}:
                raise ConfigError("not a table of min_words, max_words and max_tokens")
            return cls(**record)
        except ConfigError as exc:
            raise DataError(f"{where}: its figure window {str(record)[:100]} is not one ({exc}); a damaged "
                            "manifest") from None
