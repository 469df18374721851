"""Metric logging: stdout (always), plus a CSV file or TensorBoard."""

from __future__ import annotations

import csv
import logging
from pathlib import Path

from scanmt.io import atomic_open
from scanmt.training.run_dir import METRICS_HEADER

log = logging.getLogger("scanmt.train")


class MetricLogger:
    """``log(step, {"train/loss": ...})`` to stdout and the configured backend.

    The CSV file has columns ``step,name,value``; on resume rows after the
    checkpoint's step are dropped so the file matches the resumed run.
    """

    def __init__(self, out_dir: Path, backend: str, *, enabled: bool = True, resume_step: int | None = None):
        self.backend = backend if enabled else "none"
        self.csv_path = out_dir / "metrics.csv"
        self._tb = None
        if self.backend == "csv":
            if resume_step is not None and self.csv_path.exists():
                rows = list(csv.reader(self.csv_path.open(encoding="utf-8")))
                kept = [rows[0]] + [r for r in rows[1:] if int(r[0]) <= resume_step]
                with atomic_open(self.csv_path) as fh:  # a kill here must not lose the metrics
                    csv.writer(fh).writerows(kept)
            elif not self.csv_path.exists() or resume_step is None:
                with self.csv_path.open("w", encoding="utf-8", newline="") as fh:
                    csv.writer(fh).writerow(METRICS_HEADER.split(","))
        elif self.backend == "tensorboard":
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(str(out_dir / "tensorboard"), purge_step=resume_step)

    def log(self, step: int, values: dict[str, float]) -> None:
        if self.backend == "csv":
            with self.csv_path.open("a", encoding="utf-8", newline="") as fh:
                w = csv.writer(fh)
                for k, v in values.items():
                    w.writerow([step, k, f"{v:.6g}"])
        elif self._tb is not None:
            for k, v in values.items():
                self._tb.add_scalar(k, v, step)
            self._tb.flush()

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
