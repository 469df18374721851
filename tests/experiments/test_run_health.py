"""A run's attention health, read back from a hand-written metrics.csv."""

from __future__ import annotations

import pytest

from scanmt.errors import DataError
from scanmt.experiments.run_health import run_health


def write(path, rows):
    path.write_text("step,name,value\n" + "".join(f"{s},{n},{v}\n" for s, n, v in rows), encoding="utf-8")
    return path


def test_epoch_one_overall_support_and_gradient(tmp_path):
    # 10 steps per epoch (20 steps, 2 epochs): windows 5 and 10 are epoch 1, 15 and 20 epoch 2
    rows = []
    for step, one_hot, support, grad in [(5, 0.10, 3.0, 0.5), (10, 0.60, 1.5, 0.01),
                                         (15, 0.95, 1.1, 0.002), (20, 0.30, 2.0, 0.04)]:
        rows += [(step, "train/loss", 5.0), (step, "attn/one_hot", one_hot), (step, "attn/support", support),
                 (step, "attn/score_grad", grad)]
    rows.append((10, "valid/bleu", 3.0))
    h = run_health(write(tmp_path / "metrics.csv", rows), steps=20, epochs=2)
    assert h.one_hot_epoch1 == pytest.approx(0.60)  # not 0.95, which came in epoch 2
    assert h.one_hot_max == pytest.approx(0.95)
    assert h.support_last == pytest.approx(2.0)
    assert h.score_grad_after_epoch1 == (pytest.approx(0.002), pytest.approx(0.04))


def test_a_window_that_straddles_the_epoch_end_counts_for_epoch_two(tmp_path):
    # 7 steps per epoch (ceil(20 / 3)); the window logged at step 10 ends after it
    csv = write(tmp_path / "metrics.csv", [(5, "attn/one_hot", 0.2), (10, "attn/one_hot", 0.9)])
    h = run_health(csv, steps=20, epochs=3)
    assert h.one_hot_epoch1 == pytest.approx(0.2) and h.one_hot_max == pytest.approx(0.9)
    assert h.support_last is None and h.score_grad_after_epoch1 is None


def test_unknown_epoch_length_leaves_epoch_one_out(tmp_path):
    h = run_health(write(tmp_path / "metrics.csv", [(5, "attn/one_hot", 0.2)]), steps=None, epochs=None)
    assert h.one_hot_epoch1 is None and h.one_hot_max == pytest.approx(0.2)


def test_absent_file_or_no_attention_gives_none(tmp_path):
    assert run_health(tmp_path / "missing.csv", 10, 1) is None
    assert run_health(write(tmp_path / "metrics.csv", [(5, "train/loss", 4.0)]), 10, 1) is None


def test_bad_file_names_file_and_line(tmp_path):
    bad = tmp_path / "metrics.csv"
    bad.write_text("step,name,value\n5,attn/one_hot,0.1\nfive,attn/one_hot,0.2\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"metrics\.csv:3: expected 'step,name,value', got 'five,attn/one_hot,0\.2'"):
        run_health(bad, 10, 1)
    bad.write_text("a,b\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"metrics\.csv:1: expected the header"):
        run_health(bad, 10, 1)
    bad.write_bytes(b"step,name,value\n5,\xff,1\n")
    with pytest.raises(DataError, match="not UTF-8"):
        run_health(bad, 10, 1)
