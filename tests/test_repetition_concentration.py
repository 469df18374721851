"""scripts/repetition_concentration.py on three hand-made sentences whose REP terms are worked out by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from scanmt.errors import DataError
from tests.conftest import load_module

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "repetition_concentration.py"

REF = ["the cat sat on the mat", "27 . Fukuroi station in Shizuoka", "a b c d"]  # 6 + 6 + 4 = 16 tokens
BASE = ["the cat sat on the mat", "27 . Fukuroi station", "a b c d"]  # no bigram twice: σ = 0, 0, 0
# σ: ("the", "cat") 5 times (reference 1) -> 4, ("cat", "the") 4 times (reference 0) -> 4: 8, a loop (8 >= 0.25 × 10);
# "27" alone: a number, 1 token < 6 / 3; ("a", "a") once: the doubled-word term, λ2 = 2
SYSTEM = ["the cat the cat the cat the cat the cat", "27", "a a b c d"]


def _write(tmp_path: Path, name: str, lines: list[str]) -> Path:
    path = tmp_path / name
    path.write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    return path


def test_system_stats_by_hand():
    script = load_module(SCRIPT)
    ref = [x.split() for x in REF]
    s = script.system_stats([x.split() for x in SYSTEM], ref, runaway_min=8, runaway_frac=0.25)
    np.testing.assert_allclose(s.sigma, [8.0, 0.0, 2.0])
    assert s.tokens.tolist() == [10, 1, 5]
    assert s.runaway.tolist() == [True, False, False]
    assert s.cut_short.tolist() == [False, True, False]
    assert s.number_only.tolist() == [False, True, False]
    base = script.system_stats([x.split() for x in BASE], ref, runaway_min=8, runaway_frac=0.25)
    assert base.sigma.tolist() == [0.0, 0.0, 0.0] and not base.cut_short.any()  # 4 tokens is not under 6 / 3


def test_report_splits_the_difference(tmp_path):
    script = load_module(SCRIPT)
    ref = [x.split() for x in REF]
    a = script.system_stats([x.split() for x in BASE], ref, runaway_min=8, runaway_frac=0.25)
    b = script.system_stats([x.split() for x in SYSTEM], ref, runaway_min=8, runaway_frac=0.25)
    lines = script.report(("A", "B"), a, b, np.array([6, 6, 4]), np.array([3, 50, 5]), 40, tops=(1,))
    text = "\n".join(lines)
    assert "B: REP 62.50" in text  # 100 × (8 + 0 + 2) / 16
    assert "cut-short outputs 1, of which a number alone 1" in text
    assert "σ higher in 2 sentences, lower in 0, equal in 1" in text
    # the top sentence carries +8 of +10; the other two: REP 0 against 100 × 2 / 10
    assert "the 1 sentences where B gains most carry +8; without them Σσ differs by +2 (REP 0.00 against 20.00)" in text
    assert "where neither runs away (2 sentences): REP 0.00 against 20.00; output tokens 8 against 6" in text
    assert "at most 40 source words (2 sentences, 8 source words): REP 0.00 against 100.00;" in text
    assert "over 40 source words (1 sentences, 50 source words): REP 0.00 against 0.00; runaways 0 against 0; " \
           "cut short 0 against 1" in text


def test_main_reads_files_and_checks_line_counts(tmp_path, capsys):
    script = load_module(SCRIPT)
    ref, a, b = _write(tmp_path, "ref.en", REF), _write(tmp_path, "a.en", BASE), _write(tmp_path, "b.en", SYSTEM)
    script.main(["--ref", str(ref), "--hyp", str(a), str(b), "--names", "softmax", "csparsemax"])
    out = capsys.readouterr().out
    assert "csparsemax: REP 62.50" in out and "softmax: REP 0.00" in out
    short = _write(tmp_path, "short.en", SYSTEM[:2])
    with pytest.raises(DataError, match="short.en"):
        script.main(["--ref", str(ref), "--hyp", str(a), str(short)])
