"""The coverage stress test's figure (``scanmt stress``, ``DIR/stress.png``): one panel per metric, x = K
(sentences joined into one input), one line per model; matplotlib's Agg backend, no display needed."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

from scanmt.io import atomic_open

PANEL_INCHES = (3.6, 3.0)
DPI = 100


def plot_stress(panels: Mapping[str, Mapping[str, Sequence[float | None]]], ks: Sequence[int], out: str | Path,
                title: str = "") -> None:
    """Draw ``panels`` (metric title -> model name -> one value per K, None where not measured) as a row of
    line plots over ``ks`` and write the PNG to ``out`` atomically.  A panel without any value says so."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    from matplotlib.figure import Figure

    n = max(1, len(panels))
    fig = Figure(figsize=(PANEL_INCHES[0] * n, PANEL_INCHES[1] + (0.4 if title else 0)), dpi=DPI)
    axes = fig.subplots(1, n, squeeze=False)[0]
    for ax, (metric, lines) in zip(axes, panels.items()):
        drawn = False
        for name, values in lines.items():
            points = [(k, v) for k, v in zip(ks, values) if v is not None]
            if points:
                ax.plot([k for k, _ in points], [v for _, v in points], marker="o", label=name)
                drawn = True
        ax.set_title(metric, fontsize=10)
        ax.set_xlabel("K (sentences per input)", fontsize=9)
        ax.set_xticks(list(ks))
        ax.grid(True, linewidth=0.3)
        if drawn:
            ax.legend(fontsize=8)
        else:
            ax.text(0.5, 0.5, "not measured", ha="center", va="center", transform=ax.transAxes, fontsize=9)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.set_layout_engine("constrained")
    with atomic_open(out, "wb") as fh:
        fig.savefig(fh, format="png", dpi=DPI)
