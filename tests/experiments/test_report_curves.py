"""The learning-curve section of a grid report (:mod:`scanmt.experiments.report.curves`)."""

from __future__ import annotations

from pathlib import Path

from scanmt.experiments.layout import TRAIN_LOG, run_dir
from scanmt.experiments.report import curves
from scanmt.experiments.report.collection import SystemResults
from scanmt.training.run_dir import METRICS_HEADER


def _log(out: Path, system: str, seed: int, rows: list[tuple[int, str, float]], header: str = METRICS_HEADER) -> None:
    d = run_dir(out, system, seed)
    d.mkdir(parents=True)
    (d / TRAIN_LOG).write_text(header + "\n" + "".join(f"{u},{k},{v}\n" for u, k, v in rows), encoding="utf-8")


def test_each_runs_validations_in_the_table_and_the_figure(tmp_path: Path) -> None:
    _log(tmp_path, "softmax", 1, [(50, "train/loss", 7.9), (2000, "valid/ppl", 116.0), (2000, "valid/bleu", 2.78),
                                  (4000, "valid/ppl", 59.1), (4000, "valid/bleu", 5.52),
                                  # resumed from update 2,000 after a kill: the update logged again counts
                                  (4000, "valid/ppl", 58.0), (4000, "valid/bleu", 5.60)])
    _log(tmp_path, "softmax", 2, [(2000, "valid/ppl", 123.0), (2000, "valid/bleu", 2.30)])  # still training
    _log(tmp_path, "csparsemax", 1, [(50, "train/loss", 7.8)])  # has not validated yet
    _log(tmp_path, "csparsemax", 2, [(2000, "valid/bleu", 3.0)], header="a,b,c")  # unreadable: left out
    systems = [SystemResults("softmax", "softmax"), SystemResults("csparsemax", "csparsemax (c = 0.2)")]
    got = curves.learning_curves(tmp_path, systems)
    assert list(got) == ["softmax"]
    assert got["softmax"][1]["valid/bleu"] == [(2000, 2.78), (4000, 5.60)]
    lines = curves.curves_section(got, "stem/curves.png")
    text = "\n".join(lines)
    assert "| system | seed | 2,000 | 4,000 | best (update) | last perplexity |" in text
    assert "| softmax | seed1 | 2.78 | 5.60 | 5.60 (4,000) | 58.00 (4,000) |" in text
    assert "| softmax | seed2 | 2.30 | – | 2.30 (2,000) | 123.00 (2,000) |" in text
    assert "![learning curves](stem/curves.png)" in text
    png = tmp_path / "docs" / "stem" / curves.FIGURE
    assert curves.draw_curves_figure(got, png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_no_validation_yet_draws_nothing(tmp_path: Path) -> None:
    assert curves.learning_curves(tmp_path, [SystemResults("softmax", "softmax")]) == {}
    assert not curves.draw_curves_figure({}, tmp_path / "curves.png")
    assert not (tmp_path / "curves.png").exists()
    assert "No run has validated yet." in curves.curves_section({}, None)


def test_many_validations_show_evenly_spaced_columns_ending_at_the_last(tmp_path: Path) -> None:
    rows = [(u, "valid/bleu", u / 1000) for u in range(1000, 25001, 1000)]
    _log(tmp_path, "softmax", 1, rows)
    got = curves.learning_curves(tmp_path, [SystemResults("softmax", "softmax")])
    header = curves.curves_section(got, None)[4]
    cols = header.split(" | ")[2:-2]
    assert len(cols) == curves.MAX_COLUMNS and cols[0] == "1,000" and cols[-1] == "25,000"


def test_runs_validating_at_different_updates_show_their_last_validation_as_of_each_column(tmp_path: Path) -> None:
    _log(tmp_path, "softmax", 1, [(340, "valid/bleu", 9.4), (690, "valid/bleu", 23.4), (1030, "valid/bleu", 30.0)])
    _log(tmp_path, "softmax", 2, [(345, "valid/bleu", 9.5), (700, "valid/bleu", 26.8)])
    got = curves.learning_curves(tmp_path, [SystemResults("softmax", "softmax")])
    text = "\n".join(curves.curves_section(got, None))
    assert "| system | seed | 340 | 345 | 690 | 700 | 1,030 |" in text
    assert "| softmax | seed1 | 9.40 | 9.40 | 23.40 | 23.40 | 30.00 |" in text
    assert "| softmax | seed2 | – | 9.50 | 9.50 | 26.80 | – |" in text


def test_the_output_length_shows_where_runs_logged_it(tmp_path: Path) -> None:
    """``valid/len_ratio`` (logged since it was added) gets a column and a panel; a run from before it shows "–"."""
    _log(tmp_path, "softmax", 1, [(2000, "valid/ppl", 116.0), (2000, "valid/bleu", 2.78)])  # from before
    _log(tmp_path, "csparsemax", 1, [(2000, "valid/ppl", 120.0), (2000, "valid/bleu", 2.50),
                                     (2000, "valid/len_ratio", 1.176)])
    got = curves.learning_curves(tmp_path, [SystemResults("softmax", "softmax"), SystemResults("csparsemax", "c")])
    text = "\n".join(curves.curves_section(got, None))
    assert "| system | seed | 2,000 | best (update) | last perplexity | last length ratio |" in text
    assert "| softmax | seed1 | 2.78 | 2.78 (2,000) | 116.00 (2,000) | – |" in text
    assert "| c | seed1 | 2.50 | 2.50 (2,000) | 120.00 (2,000) | 1.18 (2,000) |" in text
    assert curves.draw_curves_figure(got, tmp_path / "with.png")
    only_old = {"softmax": got["softmax"]}
    assert "length" not in "\n".join(curves.curves_section(only_old, None))
    assert curves.draw_curves_figure(only_old, tmp_path / "without.png")
    from PIL import Image

    # three panels side by side against two: the figure is wider
    assert Image.open(tmp_path / "with.png").size[0] > Image.open(tmp_path / "without.png").size[0]
