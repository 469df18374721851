"""The stress test's figure (``scanmt stress``, ``DIR/stress.png``; a grid report's ``STEM/stress.png``
over seeds): one panel per metric, x = K (sentences joined into one input), one line per model, with error bars
where a spread is given; matplotlib's Agg backend, no display needed."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Optional, Sequence

from scanmt.io import atomic_open

if TYPE_CHECKING:
    from matplotlib.figure import Figure

PANEL_INCHES = (3.6, 3.0)
#: panels in a row; more wrap onto further rows
ROW_PANELS = 4
DPI = 100
#: the sideways step between the lines of a panel with error bars, in units of K
DODGE = 0.04


Series = Mapping[str, Mapping[str, Sequence[Optional[float]]]]


def line_colors(n: int) -> list:
    """One colour per line, the same line in the same colour in every panel (a panel where some lines have no
    point would otherwise shift matplotlib's cycle): the default cycle for up to 10 lines, tab20 beyond."""
    import matplotlib

    if n <= 10:
        return [f"C{i}" for i in range(n)]
    cmap = matplotlib.colormaps["tab20"]
    return [cmap(i % 20) for i in range(n)]


def legend_below(fig: "Figure", axes: Sequence, names: Sequence[str]) -> None:
    """One legend for all panels, below them (where it hides no line): every labelled line of any panel, once,
    in the order of ``names``.  Needs the constrained layout engine."""
    found: dict[str, object] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            found.setdefault(label, handle)
    if found:
        labels = [n for n in names if n in found]
        fig.legend([found[n] for n in labels], labels, loc="outside lower center", ncols=min(len(labels), 4),
                   fontsize=8)


def plot_stress(panels: Series, ks: Sequence[int], out: str | Path, title: str = "",
                spread: Series | None = None, zero_line: bool = False) -> "Figure":
    """Draw ``panels`` (metric title -> model name -> one value per K, None where not measured) as line plots over
    ``ks``, :data:`ROW_PANELS` to a row, and write the PNG to ``out`` atomically.  A panel without any value says
    so.

    ``spread``: the same keys, the half-length of each point's error bar (a std over seeds; None or missing: no
    bar at that point).  ``zero_line``: draw y = 0 (for panels of differences).  Each line keeps its colour in
    every panel (:func:`line_colors`).  Returns the figure, as written."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    from matplotlib.figure import Figure

    n = max(1, len(panels))
    cols, rows = min(n, ROW_PANELS), -(-n // ROW_PANELS)
    fig = Figure(figsize=(PANEL_INCHES[0] * cols, PANEL_INCHES[1] * rows + 0.5 + (0.4 if title else 0)), dpi=DPI)
    axes = list(fig.subplots(rows, cols, squeeze=False).flat)
    for ax in axes[len(panels):]:  # the last row's empty places
        ax.set_axis_off()
    names = list(dict.fromkeys(name for lines in panels.values() for name in lines))
    colors = line_colors(len(names))
    for ax, (metric, lines) in zip(axes, panels.items()):
        drawn = False
        for i, (name, values) in enumerate(lines.items()):
            style = {"color": colors[names.index(name)], "marker": "o", "label": name}
            bars = list((spread or {}).get(metric, {}).get(name) or [None] * len(ks))
            # with bars, the lines move apart sideways a little, so that bars at one K do not hide each other
            dodge = (i - (len(lines) - 1) / 2) * DODGE if spread else 0.0
            points = [(k + dodge, v, e or 0.0) for k, v, e in zip(ks, values, bars) if v is not None]
            if points:
                xs, ys, es = zip(*points)
                if any(es):
                    ax.errorbar(xs, ys, yerr=es, capsize=3, **style)
                else:
                    ax.plot(xs, ys, **style)
                drawn = True
        if zero_line:
            ax.axhline(0.0, color="black", linewidth=0.6)
        ax.set_title(metric, fontsize=10)
        ax.set_xlabel("K (sentences per input)", fontsize=9)
        ax.set_xticks(list(ks))
        ax.grid(True, linewidth=0.3)
        if not drawn:
            ax.text(0.5, 0.5, "not measured", ha="center", va="center", transform=ax.transAxes, fontsize=9)
    if title:
        fig.suptitle(title, fontsize=10)
    legend_below(fig, axes, names)
    fig.set_layout_engine("constrained")
    with atomic_open(out, "wb") as fh:
        fig.savefig(fh, format="png", dpi=DPI)
    return fig
