"""The report's attention statistics: the sink's share and the bounds reached, where the runs' evaluation recorded
them (``scanmt.metrics.attention_stats``), – for runs evaluated before; no such columns when no run has them."""

from __future__ import annotations

import json
from pathlib import Path

from scanmt.cli.main import main
from tests.experiments.test_results_json import SEEDS, fake_experiment

BASE = {"zero_fraction": 0.0, "mean_attended": 12.0, "unattended_share": 0.05}


def with_attention(out: Path, system: str, seed: int, **attention: float | None) -> None:
    path = out / "runs" / system / f"seed{seed}" / "metrics.json"
    metrics = json.loads(path.read_text(encoding="utf-8"))
    metrics["attention"] = {**BASE, **attention}
    path.write_text(json.dumps(metrics), encoding="utf-8")


def attention_rows(out: Path, docs: Path) -> list[str]:
    assert main(["experiment", "report", str(out), "--out", str(docs), "--bootstrap-samples", "10"]) == 0
    md = (docs / "experiments-table1.md").read_text(encoding="utf-8")
    section = md.split("## Attention statistics", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("|")]


def test_sink_share_and_bounds_reached(tmp_path):
    out = tmp_path / "exp"
    fake_experiment(out, SEEDS)
    for seed in (1, 2, 3):  # softmax: evaluated before the columns existed, and none would apply
        with_attention(out, "softmax", seed)
    with_attention(out, "csparsemax", 1, sink_share=0.183, saturated_share=0.013)
    rows = attention_rows(out, tmp_path / "docs")
    assert rows[0].endswith("| attention to the sink (%) | bounds reached (%) |")
    assert rows[2] == "| softmax | 0.00 ± 0.00 | 12.00 ± 0.00 | 5.00 ± 0.00 | – | – |"
    assert rows[3] == "| csparsemax | 0.00 | 12.00 | 5.00 | 18.30 | 1.30 |"


def test_no_columns_when_no_run_has_them(tmp_path):
    out = tmp_path / "exp"
    fake_experiment(out, SEEDS)
    for system, seeds in SEEDS.items():
        for seed in seeds:
            with_attention(out, system, seed, sink_share=None)
    rows = attention_rows(out, tmp_path / "docs")
    assert rows[0] == "| system | exact zeros (%) | attended source tokens / step | never-attended source tokens (%) |"
    assert rows[3] == "| csparsemax | 0.00 | 12.00 | 5.00 |"
