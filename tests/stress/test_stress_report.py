"""The report's stress test over seeds: the figure (STEM/stress.png, mean ± std by K), the results JSON's ``stress``
entries with hand-computed means and stds, and the figure's removal once the runs no longer have a stress test."""

from __future__ import annotations

import json
import math
from pathlib import Path

from scanmt.experiments.report.stress import stress_summary
from scanmt.viz.stress_plot import line_colors, plot_stress
from tests.experiments.test_results_json import SEEDS, fake_experiment, report

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def stress_entry(bleu_by_k: dict[int, float], rep: float, drop: float | None) -> dict:
    """A run's ``metrics.json`` ``stress`` as run_metrics.stress_metrics writes it (no per-input counts)."""
    return {"k": sorted(bleu_by_k), "inputs": {str(k): 1000 // k for k in bleu_by_k},
            "scores": {str(k): {"bleu": b, "rep": rep * k, "drop": drop, "dropped_sentences": 10.0 * (k - 1),
                                "length_ratio": 1.0 - 0.01 * k} for k, b in bleu_by_k.items()}}


def add_stress(out: Path, system: str, seed: int, stress: dict | None) -> None:
    path = out / "runs" / system / f"seed{seed}" / "metrics.json"
    m = json.loads(path.read_text(encoding="utf-8"))
    m["stress"] = stress
    path.write_text(json.dumps(m), encoding="utf-8")


def test_the_report_draws_and_tables_the_stress_test_over_seeds(tmp_path):
    out, docs = tmp_path / "exp", tmp_path / "docs"
    fake_experiment(out, SEEDS)
    # softmax: K 1 BLEU 30 / 32 / 34 over the seeds (mean 32, std 2); K 3 only in seeds 1 and 2 (20, 26: mean 23,
    # std sqrt(18)); DROP measured by seeds 1 and 3 only (5 and 9: mean 7, std sqrt(8))
    add_stress(out, "softmax", 1, stress_entry({1: 30.0, 3: 20.0}, rep=1.0, drop=5.0))
    add_stress(out, "softmax", 2, stress_entry({1: 32.0, 3: 26.0}, rep=2.0, drop=None))
    add_stress(out, "softmax", 3, stress_entry({1: 34.0}, rep=3.0, drop=9.0))
    add_stress(out, "csparsemax", 1, stress_entry({1: 31.0, 3: 25.0}, rep=0.5, drop=4.0))
    got = report(out, docs)

    s = got["softmax"]["stress"]
    assert list(s) == ["1", "3"]
    assert s["1"]["bleu"]["mean"] == 32.0 and math.isclose(s["1"]["bleu"]["std"], 2.0) and s["1"]["bleu"]["seeds"] == 3
    assert s["3"]["bleu"]["mean"] == 23.0 and math.isclose(s["3"]["bleu"]["std"], math.sqrt(18.0))
    assert s["3"]["bleu"]["seeds"] == 2
    assert s["1"]["drop"]["mean"] == 7.0 and math.isclose(s["1"]["drop"]["std"], math.sqrt(8.0))
    assert s["1"]["drop"]["seeds"] == 2
    assert math.isclose(s["3"]["rep"]["mean"], 4.5) and s["3"]["dropped_sentences"]["mean"] == 20.0
    c = got["csparsemax"]["stress"]["3"]
    assert c["bleu"] == {"mean": 25.0, "std": None, "seeds": 1}  # one seed: no spread to estimate

    md = (docs / "experiments-table1.md").read_text(encoding="utf-8")
    png = docs / "experiments-table1" / "stress.png"
    assert "](experiments-table1/stress.png)" in md and png.read_bytes().startswith(PNG_MAGIC)
    assert "| softmax | 3 | 333 | 23.00 ± 4.24 |" in md and "| csparsemax | 3 | 333 | 25.00 |" in md

    # the runs redone without a stress test: the table, the link and the figure go
    for seed in (1, 2, 3):
        add_stress(out, "softmax", seed, None)
    add_stress(out, "csparsemax", 1, None)
    got = report(out, docs)
    assert "stress" not in got["softmax"] and not png.exists()
    md = (docs / "experiments-table1.md").read_text(encoding="utf-8")
    assert "stress.png" not in md and "## Coverage stress test" not in md


def test_stress_summary_skips_runs_without_a_stress_test():
    runs = [{"seed": 1, "stress": stress_entry({2: 10.0}, rep=1.0, drop=2.0)}, {"seed": 2}, {"seed": 3, "stress": None}]
    got = stress_summary(runs)
    assert list(got) == [2] and got[2]["bleu"] == {"mean": 10.0, "std": None, "seeds": 1}
    assert stress_summary([{"seed": 1}]) == {}


def test_the_figure_draws_error_bars_only_where_a_spread_is_given(tmp_path):
    panels = {"BLEU": {"a": [30.0, 20.0, None], "b": [31.0, 25.0, 18.0]}}
    plain, bars, zero = tmp_path / "plain.png", tmp_path / "bars.png", tmp_path / "zero.png"
    plot_stress(panels, [1, 2, 3], plain)
    plot_stress(panels, [1, 2, 3], bars, spread={"BLEU": {"a": [2.0, 3.0, None], "b": [None, 1.0, 0.5]}})
    plot_stress(panels, [1, 2, 3], zero, spread={"BLEU": {}})  # no bar anywhere: the lines only move apart
    for f in (plain, bars, zero):
        assert f.read_bytes().startswith(PNG_MAGIC)
    assert bars.read_bytes() != zero.read_bytes() != plain.read_bytes()


def test_a_line_keeps_its_colour_in_a_panel_where_others_have_no_point(tmp_path):
    """The boundary panels have no point for runs that predate them: the lines there must not take the colours
    of the lines missing (matplotlib's cycle would give the first line drawn the first colour)."""
    panels = {"REP": {"a": [1.0, 2.0], "b": [1.5, 2.5], "c": [1.2, 2.2]},
              "P(</s>)": {"a": [None, None], "b": [None, 0.4], "c": [None, 0.3]}}
    fig = plot_stress(panels, [1, 2], tmp_path / "f.png")
    rep, boundary = fig.axes[0], fig.axes[1]
    colour = {line.get_label(): line.get_color() for line in rep.lines}
    assert len(set(colour.values())) == 3 and [line.get_label() for line in boundary.lines] == ["b", "c"]
    assert all(line.get_color() == colour[line.get_label()] for line in boundary.lines)
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["a", "b", "c"]
    assert len(set(map(str, line_colors(12)))) == 12  # beyond the 10 of the default cycle: tab20
