"""Attention maps in the style of Malaviya et al. (2018), Figure 2.

One panel per system, side by side, for the same source sentence: source
tokens on the x axis (top), output tokens on the y axis, a grey scale where
white is exactly zero and black is 1.  Subword tokens are shown as pieces,
with ``@@`` marking a piece that continues into the next one (``Hund@@ e``).
Rendering uses matplotlib's Agg backend, so no display is needed.  Labels with Japanese (or other
CJK) characters are drawn with a CJK font as fallback (:mod:`scanmt.viz.cjk_font`).

The figure's pixel size is deterministic, :func:`figure_pixels`; the saved PNG
has exactly that size (no tight bounding box).
"""

from __future__ import annotations

import textwrap
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from scanmt.errors import ConfigError
from scanmt.io import atomic_open
from scanmt.viz.cjk_font import font_families

WORD_START = "\u2581"
CELL_INCHES = 0.28  # size of one attention cell
LABEL_INCHES = 1.3  # room for tick labels (left and top)
TITLE_INCHES = 0.5
NAME_INCHES = 0.5  # panel name under each map
FONT_SIZE = 9
#: the resolutions a figure may have (``plot-attention --dpi``), and the most pixels per side (PNG and Agg's limit)
DPI_RANGE = (10, 1000)
MAX_SIDE_PIXELS = 65535


def check_dpi(dpi: object, option: str = "--dpi") -> int:
    """``dpi`` when it is a whole number in :data:`DPI_RANGE`; else a :class:`ConfigError` naming ``option``."""
    low, high = DPI_RANGE
    if isinstance(dpi, bool) or not isinstance(dpi, int) or not low <= dpi <= high:
        raise ConfigError(f"{option} must be a whole number from {low} to {high}, got {dpi!r}")
    return dpi


@dataclass(frozen=True)
class Panel:
    """One system's attention for one sentence.

    Attributes:
        name: system name (panel title).
        attention: ``[T, S]`` output step × source token.
        src: ``S`` source tokens (sentencepiece pieces or words).
        hyp: ``T`` output tokens.
    """

    name: str
    attention: np.ndarray
    src: Sequence[str]
    hyp: Sequence[str]

    def __post_init__(self) -> None:
        shape = np.shape(self.attention)
        if shape != (len(self.hyp), len(self.src)):
            raise ValueError(f"panel {self.name!r}: attention shape {shape} != {len(self.hyp)} x {len(self.src)} tokens")


def display_tokens(pieces: Sequence[str]) -> list[str]:
    """Readable labels: drop the ``▁`` marker, append ``@@`` to pieces continued by the next one.

    >>> display_tokens(["▁ein", "▁Hund", "e", "▁.", "<sink>"])
    ['ein', 'Hund@@', 'e', '.', '<sink>']
    """
    out = []
    marked = any(p.startswith(WORD_START) for p in pieces)
    for k, p in enumerate(pieces):
        label = p[1:] if p.startswith(WORD_START) else p
        nxt = pieces[k + 1] if k + 1 < len(pieces) else None
        if marked and nxt is not None and not nxt.startswith(WORD_START) and not _special(nxt) and not _special(p):
            label += "@@"
        out.append(label or p)
    return out


def _special(tok: str) -> bool:
    return tok.startswith("<") and tok.endswith(">")


def wrap_name(name: str, width_inches: float) -> str:
    """A panel's name on at most two lines that fit under a panel ``width_inches`` wide (a long system label such
    as "csparsemax (c = 0.2, last layer, cosine scores)" would otherwise run past the figure's edge)."""
    per_line = max(8, int(width_inches * 72 / ((FONT_SIZE + 2) * 0.6)))  # ~0.6 em per character
    return textwrap.fill(name, per_line, max_lines=2, placeholder=" …")


def figure_pixels(panels: Sequence[Panel], dpi: int) -> tuple[int, int]:
    """Image size in pixels: cells of :data:`CELL_INCHES` plus label margins per panel, at ``dpi``."""
    width = sum(len(p.src) * CELL_INCHES + LABEL_INCHES for p in panels) + 0.3
    height = max(len(p.hyp) for p in panels) * CELL_INCHES + LABEL_INCHES + TITLE_INCHES + NAME_INCHES
    return int(round(width * dpi)), int(round(height * dpi))


def plot_attention_maps(panels: Sequence[Panel], out: str | Path, *, title: str | None = None, dpi: int = 100) -> tuple[int, int]:
    """Draw the panels side by side and write a PNG atomically.

    Returns:
        The image size in pixels ``(width, height)``.
    """
    if not panels:
        raise ValueError("plot_attention_maps: no panels")
    check_dpi(dpi)
    w_px, h_px = figure_pixels(panels, dpi)
    if max(w_px, h_px) > MAX_SIDE_PIXELS:
        raise ConfigError(f"the figure would be {w_px}x{h_px} pixels, more than {MAX_SIDE_PIXELS} on a side: "
                          f"lower --dpi (now {dpi}) or draw a shorter sentence")
    import matplotlib

    matplotlib.use("Agg", force=True)
    texts = [t for p in panels for t in (p.name, *p.src, *p.hyp)] + [title or ""]
    families = font_families(texts)
    with matplotlib.rc_context({"font.family": families} if families else {}), warnings.catch_warnings():
        # without a CJK font, matplotlib would warn once per missing glyph; cjk_font has warned once
        warnings.filterwarnings("ignore", message=r"Glyph \d+ .* missing from font", category=UserWarning)
        _draw(panels, out, title, dpi, w_px, h_px)
    return w_px, h_px


def _draw(panels: Sequence[Panel], out: str | Path, title: str | None, dpi: int, w_px: int, h_px: int) -> None:
    """Draw the panels into a ``w_px`` x ``h_px`` figure and write it to ``out`` (a PNG, atomically)."""
    from matplotlib.figure import Figure

    # matplotlib truncates inches * dpi to whole pixels: a small margin keeps the exact size
    fig = Figure(figsize=((w_px + 0.01) / dpi, (h_px + 0.01) / dpi), dpi=dpi)
    widths = [len(p.src) * CELL_INCHES + LABEL_INCHES for p in panels]
    axes = fig.subplots(1, len(panels), gridspec_kw={"width_ratios": widths}, squeeze=False)[0]
    for ax, p, width in zip(axes, panels, widths):
        a = np.asarray(p.attention, dtype=np.float64)
        ax.imshow(a, cmap="Greys", vmin=0.0, vmax=1.0, aspect="equal", interpolation="nearest")
        ax.set_xticks(range(len(p.src)))
        ax.set_xticklabels(display_tokens(p.src), rotation=90, fontsize=FONT_SIZE)
        ax.set_yticks(range(len(p.hyp)))
        ax.set_yticklabels(display_tokens(p.hyp), fontsize=FONT_SIZE)
        ax.xaxis.tick_top()
        ax.tick_params(length=0)
        ax.set_xlabel(wrap_name(p.name, width), fontsize=FONT_SIZE + 2)
        for spine in ax.spines.values():
            spine.set_linewidth(0.5)
    if title:
        fig.suptitle(title, fontsize=FONT_SIZE + 1)
    fig.set_layout_engine("constrained")
    with atomic_open(out, "wb") as fh:
        fig.savefig(fh, format="png", dpi=dpi)
