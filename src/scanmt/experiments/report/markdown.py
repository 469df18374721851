"""Markdown and plain-text building blocks of the report: escaped cells, code spans, anchors, mean ± std.
"""

from __future__ import annotations

import statistics
from typing import Sequence


def md_escape(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    text = text.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
    for ch in "*_`[]":
        text = text.replace(ch, "\\" + ch)
    return text.replace("\n", " ")


def code_span(text: str) -> str:
    """``text`` as a Markdown code span (split and corpus names: no escaping needed inside)."""
    return "`" + text.replace("`", "'") + "`"


def anchor(name: str, kind: str = "cmd") -> str:
    """An HTML id for ``name`` (a system's commands: ``cmd-NAME``; a grid's page in a report of several: ``grid-NAME``)."""
    return f"{kind}-" + "".join(c if c.isalnum() else "-" for c in name.lower())


def mean_std(values: Sequence[float]) -> tuple[float, float | None]:
    m = statistics.fmean(values)
    return m, (statistics.stdev(values) if len(values) > 1 else None)


def fmt(values: Sequence[float]) -> str:
    if not values:
        return "–"
    m, s = mean_std(values)
    return f"{m:.2f}" if s is None else f"{m:.2f} ± {s:.2f}"


def format_rows(head: list[str], rows: list[list[str]], left_columns: int = 1) -> str:
    """A plain-text table: the first ``left_columns`` columns aligned left, the others (numbers) right."""
    widths = [max(len(head[k]), *(len(r[k]) for r in rows)) if rows else len(head[k]) for k in range(len(head))]
    line = lambda cells: "  ".join(  # noqa: E731
        (c.ljust(w) if k < left_columns else c.rjust(w)) for k, (c, w) in enumerate(zip(cells, widths))).rstrip()
    return "\n".join([line(head), line(["-" * w for w in widths]), *[line(r) for r in rows]])
