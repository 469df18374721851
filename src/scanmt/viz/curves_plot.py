"""Learning curves of a grid report (``STEM/curves.png``): one panel per validation metric, x = update, one
colour per system and one line per seed (the seeds of a system share its colour); matplotlib's Agg backend,
no display needed."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

from scanmt.io import atomic_open
from scanmt.viz.stress_plot import DPI, PANEL_INCHES, legend_below, line_colors

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: panel title -> system label -> seed -> [(update, value), ...]
Curves = Mapping[str, Mapping[str, Mapping[int, Sequence[tuple[int, float]]]]]


def plot_curves(panels: Curves, out: str | Path, title: str = "", log_y: Sequence[str] = ()) -> "Figure":
    """Draw ``panels`` side by side and write the PNG to ``out`` atomically; the panels named in ``log_y`` get
    a logarithmic y axis (perplexity).  Each system keeps its colour in every panel; its first seed's line
    carries the legend entry.  Returns the figure, as written."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    from matplotlib.figure import Figure

    n = max(1, len(panels))
    scale = 1.25  # wider than a stress panel: updates run to tens of thousands
    fig = Figure(figsize=(PANEL_INCHES[0] * scale * n, PANEL_INCHES[1] * scale + 0.5 + (0.4 if title else 0)),
                 dpi=DPI)
    axes = list(fig.subplots(1, n, squeeze=False).flat)
    names = list(dict.fromkeys(name for systems in panels.values() for name in systems))
    colors = line_colors(len(names))
    for ax, (metric, systems) in zip(axes, panels.items()):
        for name, seeds in systems.items():
            for i, (seed, points) in enumerate(sorted(seeds.items())):
                if not points:
                    continue
                xs, ys = zip(*points)
                ax.plot(xs, ys, color=colors[names.index(name)], marker="o", markersize=3, linewidth=1.2,
                        label=name if i == 0 else None)
        if metric in log_y:
            ax.set_yscale("log")
        ax.set_title(metric, fontsize=10)
        ax.set_xlabel("update", fontsize=9)
        ax.grid(True, linewidth=0.3)
    if title:
        fig.suptitle(title, fontsize=10)
    legend_below(fig, axes, names)
    fig.set_layout_engine("constrained")
    with atomic_open(Path(out), "wb") as fh:
        fig.savefig(fh, format="png", dpi=DPI)
    return fig
