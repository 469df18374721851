"""``scripts/stress_rep_by_length.py``: REP at equal length, read from a grid folder's stress tests.

A fake grid folder with two systems: the baseline's REP is higher on long outputs, and the system writes
longer; the expected figures are computed by hand.  One run predates ``hyp_words`` and is measured from its
output file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import load_module

ROOT = Path(__file__).resolve().parents[1]
script = load_module(ROOT / "scripts" / "stress_rep_by_length.py")


def run(out: Path, system: str, seed: int, counts: dict, hyp_lines: list[str] | None = None) -> None:
    d = out / "runs" / system / f"seed{seed}"
    (d / "stress").mkdir(parents=True)
    (d / "metrics.json").write_text(json.dumps({"seed": seed, "stress": {"per_input": {"2": counts}}}))
    (d / "DONE").write_text("done\n")
    if hyp_lines is not None:
        (d / "stress" / f"{system}.k2.hyp.en").write_text("\n".join(hyp_lines) + "\n", encoding="utf-8")


def grid(tmp_path: Path) -> Path:
    out = tmp_path / "exp"
    # softmax: a short output (ratio 0.5, σ 0) and a long one (ratio 1.0, σ 2), 10 reference words each, 2 seeds
    for seed in (1, 2):
        run(out, "softmax", seed, {"rep_sigma": [0, 2], "ref_words": [10, 10], "hyp_words": [5, 10]})
    # csparsemax: both outputs long (ratio 1.0), σ 3 each; seed 2 without hyp_words: its output file says 10 words
    run(out, "csparsemax", 1, {"rep_sigma": [3, 3], "ref_words": [10, 10], "hyp_words": [10, 10]})
    words = "a b c d e f g h i j"  # 10 Moses tokens
    run(out, "csparsemax", 2, {"rep_sigma": [3, 3], "ref_words": [10, 10]}, [words, words])
    return out


def test_the_table_by_hand(tmp_path, capsys):
    out = grid(tmp_path)
    assert script.main([str(out), "--systems", "csparsemax", "--k", "2", "--edges", "0.75"]) == 0
    printed = capsys.readouterr().out
    # softmax REP 100 * 4 / 40 = 10; csparsemax 100 * 12 / 40 = 30; softmax at csparsemax's lengths (all long):
    # its long group's 100 * 4 / 20 = 20, so length explains (20 - 10) / (30 - 10) = 50 %
    row = next(line for line in printed.splitlines() if line.startswith("| csparsemax |"))
    assert row == "| csparsemax | 2 | 1.00 / 0.75 | 10.00 | 30.00 | 20.00 | 50 % | 0.0 % |"


def test_missing_runs_and_k_are_named(tmp_path):
    out = grid(tmp_path)
    with pytest.raises(SystemExit) as e:
        script.main([str(out), "--systems", "csoftmax", "--k", "2"])
    assert e.value.code == 2
    with pytest.raises(script.DataError, match="no stress test at K = 3"):
        script.system_counts(out, "softmax", 3)
    with pytest.raises(script.DataError, match="expected one output file"):
        (out / "runs" / "csparsemax" / "seed2" / "stress" / "csparsemax.k2.hyp.en").unlink()
        script.system_counts(out, "csparsemax", 2)


def test_no_length_group_in_common_is_named_not_nan(tmp_path, capsys):
    """The system writes only at ratios the baseline never reaches: no REP at its lengths, said in words."""
    out = tmp_path / "exp"
    run(out, "softmax", 1, {"rep_sigma": [0, 0], "ref_words": [10, 10], "hyp_words": [3, 4]})
    run(out, "csparsemax", 1, {"rep_sigma": [1, 1], "ref_words": [10, 10], "hyp_words": [10, 10]})
    assert script.main([str(out), "--systems", "csparsemax", "--k", "2", "--edges", "0.75"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("| csparsemax |"))
    assert "nan" not in row
    assert row == "| csparsemax | 2 | 1.00 / 0.35 | 0.00 | 10.00 | – (no length group in common) | – | 100.0 % |"
