"""scripts/repetition_budget.py on a hand-made attention file whose counts are worked out by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from scanmt.data.attention_file import SentenceAttention, save_attention
from tests.conftest import load_module

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "repetition_budget.py"


def _script():
    return load_module(SCRIPT)


def test_counts_repetitions_retranslations_and_bound_room(tmp_path):
    # "a horse a horse </s>" over source [A, B, <sink>]: only step 4 closes a bigram seen before ("a", "horse")
    attention = np.array([
        [0.9, 0.1, 0.0],   # a      -> A
        [0.0, 0.8, 0.2],   # horse  -> B
        [0.1, 0.0, 0.9],   # a      -> sink: ("horse", "a") is new, not counted anyway
        [0.0, 1.0, 0.0],   # horse  -> B, repeats ("a", "horse"); B had 0.9 before, bound 1.0 there
        [0.0, 0.0, 1.0],   # </s>   -> sink
    ])
    sent = SentenceAttention(attention=attention, src=["A", "B", "<sink>"], hyp=["a", "horse", "a", "horse", "</s>"],
                             fertility=np.array([2.0, 1.0, np.inf]), sink=True)
    path = tmp_path / "x.attn.npz"
    save_attention(path, [sent])
    stats = _script().budget_stats(path, used=0.5, bound=1.5)
    assert stats["repeated_tokens"] == 1           # only step 4 repeats a bigram
    assert stats["sink_argmax"] == pytest.approx(0.0)    # and it attends B most, not the sink
    assert stats["retranslated"] == pytest.approx(1.0)   # B had 0.9 >= 0.5 before it
    assert stats["bound_room"] == pytest.approx(0.0)     # B's bound 1.0 < 1.5
    # totals: A 1.0, B 1.9 -> one of the two source words reaches 1.5
    assert stats["src_over_bound"] == pytest.approx(0.5)
    assert stats["mean_bound"] == pytest.approx(1.5)     # the sink's inf is left out
    assert stats["prior_attention_bins"] == [0, 1, 0, 0, 0]  # B's 0.9 lies in [0.5, 1.0)
    # the largest source weight: 1.0 at the repeated "horse"; 0.8 ("horse") and 0.1 ("a") at the other two
    assert stats["peak_repeated"] == pytest.approx(1.0) and stats["peak_other"] == pytest.approx(0.45)
    # the sink's weight: 0.0 at the repeated "horse"; 0.2 and 0.9 at the other two
    assert stats["sink_repeated"] == pytest.approx(0.0) and stats["sink_other"] == pytest.approx(0.55)
    # weight on source words at half their bound or more before the step: at "horse" (t=1) none (A 0.9 < 1.0,
    # B 0.1 < 0.5); at "a" (t=2) B (0.9 >= 0.5) gets 0.0; at the repeated "horse" A (1.0 >= 1.0) and B: 1.0
    assert stats["spent_repeated"] == pytest.approx(1.0) and stats["spent_other"] == pytest.approx(0.0)


def test_unbounded_file_prints_dashes_for_sink_and_spent_weights(tmp_path, capsys, monkeypatch):
    attention = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
    sent = SentenceAttention(attention=attention, src=["A", "B"], hyp=["a", "b", "a", "b"], fertility=None, sink=False)
    path = tmp_path / "soft.attn.npz"
    save_attention(path, [sent])
    script = _script()
    stats = script.budget_stats(path, used=0.5, bound=1.5)
    assert stats["repeated_tokens"] == 1 and stats["peak_repeated"] == pytest.approx(1.0)
    assert np.isnan(stats["sink_repeated"]) and np.isnan(stats["spent_other"])
    monkeypatch.setattr("sys.argv", ["repetition_budget.py", str(path)])
    script.main()
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith(f"| {path} | 1 |"))
    assert row.endswith("| 1.000 / 1.000 | – | – |")


def test_repetitions_that_attend_to_the_sink_count_but_stay_out_of_the_source_word_statistics(tmp_path):
    # "a b a b a b" over [A, <sink>]: steps 3 and 5 close ("a", "b") again; step 3 attends the sink most
    attention = np.array([
        [1.0, 0.0],   # a
        [0.6, 0.4],   # b
        [0.3, 0.7],   # a  ("b", "a") new
        [0.2, 0.8],   # b  repeats ("a", "b"), the sink most
        [0.5, 0.5],   # a  repeats ("b", "a"): a tie, argmax takes A (the first)
        [0.9, 0.1],   # b  repeats ("a", "b"), A most, which had 1.0 + 0.6 + 0.3 + 0.2 + 0.5 = 2.6 before
    ])
    sent = SentenceAttention(attention=attention, src=["A", "<sink>"], hyp=["a", "b", "a", "b", "a", "b"],
                             fertility=np.array([3.0, np.inf]), sink=True)
    path = tmp_path / "s.attn.npz"
    save_attention(path, [sent])
    stats = _script().budget_stats(path, used=0.5, bound=1.5)
    assert stats["repeated_tokens"] == 3
    assert stats["sink_argmax"] == pytest.approx(1 / 3)
    # the two that attend A most: A had 2.1 and 2.6 before them, both >= 0.5, bound 3.0 >= 1.5
    assert stats["retranslated"] == pytest.approx(1.0) and stats["bound_room"] == pytest.approx(1.0)
    assert stats["prior_attention_bins"] == [0, 0, 0, 0, 2]
