"""A run's attention health over training, read back from its ``metrics.csv``.

The training log records, every ``train.log_every`` updates, the attention statistics of
:mod:`scanmt.training.attention_health` (``attn/one_hot``, ``attn/support``,
``attn/score_grad``, …). A report needs a few numbers from that series per run: did a
sparse or constrained transform go one-hot on most steps in its first epoch (the collapse
of issue 14), and did its scores keep getting a gradient afterwards.

Epoch 1 is the windows logged at or before update ``ceil(steps / epochs)`` (``steps`` and
``epochs`` from the run's training summary); a window that straddles the end of the epoch
counts for epoch 2.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

from scanmt.errors import DataError
from scanmt.training.run_dir import METRICS_HEADER


@dataclass(frozen=True)
class RunHealth:
    """Attention health of one run (shares in [0, 1]; None where the log has no such window)."""

    #: largest one-hot share of any window of epoch 1
    one_hot_epoch1: float | None
    #: largest one-hot share of any window of the run
    one_hot_max: float | None
    #: mean support (attended source positions per step) of the last window
    support_last: float | None
    #: smallest and largest score-gradient norm of the windows after epoch 1
    score_grad_after_epoch1: tuple[float, float] | None
    #: largest one-hot share of the heads' rows (``attn/head_one_hot``, models with heads) in a window of epoch 1
    head_one_hot_epoch1: float | None = None
    #: the same over the whole run
    head_one_hot_max: float | None = None


def read_series(metrics_csv: Path) -> dict[str, list[tuple[int, float]]]:
    """``{name: [(step, value), …]}`` of a ``metrics.csv`` (columns ``step,name,value``), in file order."""
    series: dict[str, list[tuple[int, float]]] = {}
    try:
        with metrics_csv.open(encoding="utf-8", newline="") as fh:
            rows = csv.reader(fh)
            head = next(rows, None)
            if ",".join(head or []) != METRICS_HEADER:
                raise DataError(f"{metrics_csv}:1: expected the header {METRICS_HEADER!r}, got {','.join(head or [])!r}")
            for line, row in enumerate(rows, start=2):
                try:
                    step, name, value = int(row[0]), row[1], float(row[2])
                except (ValueError, IndexError):
                    raise DataError(f"{metrics_csv}:{line}: expected 'step,name,value', got {','.join(row)!r}") from None
                series.setdefault(name, []).append((step, value))
    except UnicodeDecodeError as exc:
        raise DataError(f"{metrics_csv}: not UTF-8 text ({exc.reason})") from None
    return series


def run_health(metrics_csv: Path, steps: int | None, epochs: int | None) -> RunHealth | None:
    """The health of a run from its ``metrics.csv``; None if the file is absent or logged no attention."""
    if not metrics_csv.is_file():
        return None
    series = read_series(metrics_csv)
    one_hot = series.get("attn/one_hot") or []
    if not one_hot:
        return None
    epoch_end = math.ceil(steps / epochs) if steps and epochs else None
    first = [v for s, v in one_hot if epoch_end is not None and s <= epoch_end]
    heads = series.get("attn/head_one_hot") or []
    heads_first = [v for s, v in heads if epoch_end is not None and s <= epoch_end]
    grads = [v for s, v in series.get("attn/score_grad") or [] if epoch_end is not None and s > epoch_end]
    support = series.get("attn/support") or []
    return RunHealth(
        one_hot_epoch1=max(first) if first else None,
        one_hot_max=max(v for _, v in one_hot),
        support_last=support[-1][1] if support else None,
        score_grad_after_epoch1=(min(grads), max(grads)) if grads else None,
        head_one_hot_epoch1=max(heads_first) if heads_first else None,
        head_one_hot_max=max(v for _, v in heads) if heads else None,
    )
