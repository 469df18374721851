"""Word-alignment links: parse, validate and format Pharaoh / talp alignment lines.

A line holds whitespace-separated links ``i-j`` (sure) or ``ipj`` (possible),
where ``i`` indexes the source sentence and ``j`` the target sentence (both
tokenized words).  Pharaoh files are 0-indexed and contain only ``i-j``; the
talp format of the RWTH gold sets is 1-indexed and also uses ``ipj``.

In memory a line is a pair ``(sure, possible)`` of sets of 0-based
``(src_idx, tgt_idx)`` tuples, with ``possible ⊇ sure`` (Och & Ney's
convention: every sure link is also possible).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable, Sequence

from scanmt.errors import DataError
from scanmt.io import read_lines

Link = tuple[int, int]
LinkSet = set[Link]

_LINK_RE = re.compile(r"(\d+)([-p])(\d+)")


def parse_links(text: str, *, one_indexed: bool = False) -> tuple[LinkSet, LinkSet]:
    """Parse one alignment line into ``(sure, possible)`` 0-based link sets.

    Args:
        text: e.g. ``"0-0 1p2 2-1"``; an empty / blank string means no links.
        one_indexed: the indices in ``text`` start at 1 (talp); they are
            shifted to 0-based on output.

    Returns:
        ``(sure, possible)`` with ``possible ⊇ sure``.  A pair given as both
        sure and possible is sure.

    Raises:
        DataError: a token that is not ``i-j`` / ``ipj``, or index 0 when
            ``one_indexed`` (the message quotes the token; callers add file:line).
    """
    sure: LinkSet = set()
    possible: LinkSet = set()
    offset = 1 if one_indexed else 0
    for tok in text.split():
        m = _LINK_RE.fullmatch(tok)
        if m is None:
            raise DataError(f"bad alignment link {tok!r}: expected 'i-j' (sure) or 'ipj' (possible)")
        i, kind, j = int(m.group(1)) - offset, m.group(2), int(m.group(3)) - offset
        if i < 0 or j < 0:
            raise DataError(f"bad alignment link {tok!r}: indices are 1-based here, 0 is not allowed")
        possible.add((i, j))
        if kind == "-":
            sure.add((i, j))
    return sure, possible


def check_link_range(links: Iterable[Link], src_len: int | None, tgt_len: int | None) -> None:
    """Raise :class:`DataError` if a 0-based link falls outside ``src_len`` x ``tgt_len``.

    A ``None`` length is not checked.  The message gives 0-based indices and the lengths.
    """
    for i, j in sorted(links):
        if src_len is not None and i >= src_len:
            raise DataError(f"link {i}-{j} (0-based): source index {i} out of range for {src_len} source words")
        if tgt_len is not None and j >= tgt_len:
            raise DataError(f"link {i}-{j} (0-based): target index {j} out of range for {tgt_len} target words")


def read_links(
    path: str | Path,
    *,
    one_indexed: bool = False,
    src_lens: Sequence[int] | None = None,
    tgt_lens: Sequence[int] | None = None,
) -> list[tuple[LinkSet, LinkSet]]:
    """Read an alignment file: one ``(sure, possible)`` pair per line.

    Empty lines are allowed (a sentence pair without links).  When
    ``src_lens`` / ``tgt_lens`` are given, the file must have exactly that many
    lines and every link must lie inside the sentence lengths.

    Raises:
        DataError: naming ``path`` and the 1-based line for a bad link or an
            index out of range, or the line counts when they differ.
    """
    path = Path(path)
    lines = read_lines(path, allow_empty=True, what="alignment file")
    for name, lens in (("source", src_lens), ("target", tgt_lens)):
        if lens is not None and len(lens) != len(lines):
            raise DataError(
                f"{path} has {len(lines)} lines but the {name} side has {len(lens)} sentences "
                "(an extra trailing newline, or the wrong file?)"
            )
    out: list[tuple[LinkSet, LinkSet]] = []
    for n, line in enumerate(lines):
        try:
            sure, possible = parse_links(line, one_indexed=one_indexed)
            check_link_range(
                possible,
                None if src_lens is None else src_lens[n],
                None if tgt_lens is None else tgt_lens[n],
            )
        except DataError as exc:
            raise DataError(f"{path}:{n + 1}: {exc}") from None
        out.append((sure, possible))
    return out


def format_links(links: Iterable[Link]) -> str:
    """Pharaoh format: 0-based ``"i-j"`` links sorted by (i, j), space-separated."""
    return " ".join(f"{i}-{j}" for i, j in sorted(links))
