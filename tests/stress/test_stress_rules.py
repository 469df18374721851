"""The stress test's pure rules: joining K lines (both sides, the remainder left out) and the dropped-sentence
criterion on constructed alignments."""

from __future__ import annotations

import pytest

from scanmt.errors import ConfigError, DataError
from scanmt.metrics.stress import DROPPED_COVERAGE, dropped_in_line, dropped_sentences, join_groups, sentence_spans


def test_join_groups_k_lines_by_a_space_and_leaves_out_the_incomplete_group():
    lines = ["a b.", " c.", "d e f. ", "g.", "h."]
    assert join_groups(lines, 1) == ["a b.", "c.", "d e f.", "g.", "h."]
    assert join_groups(lines, 2) == ["a b. c.", "d e f. g."]  # "h." (5 mod 2 = 1 line) is left out
    assert join_groups(lines, 3) == ["a b. c. d e f."]
    assert join_groups(lines, 5) == ["a b. c. d e f. g. h."]
    assert join_groups(lines, 6) == []


def test_join_groups_is_the_same_rule_on_both_sides():
    src, ref = [f"s{i}" for i in range(7)], [f"r{i}" for i in range(7)]
    for k in (1, 2, 3, 4):
        s, r = join_groups(src, k), join_groups(ref, k)
        assert len(s) == len(r) == 7 // k
        assert [x.replace("s", "r") for x in s] == r


@pytest.mark.parametrize("k", [0, -1, 1.5, True])
def test_join_groups_refuses_a_bad_k(k):
    with pytest.raises(ConfigError, match="--k must be whole numbers >= 1"):
        join_groups(["a"], k)


def test_sentence_spans():
    assert sentence_spans([3, 0, 2]) == [(0, 3), (3, 3), (3, 5)]


def test_a_sentence_is_dropped_below_a_fifth_of_its_words_linked():
    assert DROPPED_COVERAGE == 0.2
    spans = sentence_spans([5, 10])  # words 0-4, 5-14
    # sentence 2: 1 of 10 words linked (10 % < 20 %): dropped; sentence 1 fully linked
    links = {(i, i) for i in range(5)} | {(7, 5)}
    assert dropped_in_line(links, spans) == [False, True]
    # 2 of 10 linked (20 %, not fewer): kept
    assert dropped_in_line(links | {(8, 6)}, spans) == [False, False]
    # a sentence without a link at all, and an empty sentence (never dropped)
    assert dropped_in_line(set(), sentence_spans([3, 0])) == [True, False]
    # several links to one source word count it once
    assert dropped_in_line({(5, 0), (5, 1), (5, 2)}, spans) == [True, True]


def test_dropped_sentences_counts_inputs_and_sentences():
    lengths = [[2, 2], [2, 2], [3, 1]]
    links = [
        {(0, 0), (1, 1), (2, 2), (3, 3)},  # both sentences there
        {(0, 0), (1, 1)},                  # second sentence dropped
        {(3, 0)},                          # first dropped (0 of 3), second kept (1 of 1)
    ]
    d = dropped_sentences(links, lengths)
    assert (d.inputs, d.inputs_dropping, d.sentences, d.dropped) == (3, 2, 6, 2)
    assert d.share == pytest.approx(200 / 3) and d.sentence_share == pytest.approx(100 / 3)
    assert dropped_sentences([], []).share == 0.0


def test_dropped_sentences_refuses_mismatched_inputs():
    with pytest.raises(DataError, match="2 alignments but 1 joined inputs"):
        dropped_sentences([set(), set()], [[1]])
    with pytest.raises(DataError, match="joined input 1: link 4-0 outside a source of 4 words"):
        dropped_sentences([{(4, 0)}], [[2, 2]])


def test_the_stress_table_fits_100_columns():
    """Issue 52, item 18: the table put every model's metric columns side by side, about 150 columns for two."""
    from types import SimpleNamespace

    from scanmt.api.stress import METRICS, _cell, format_table

    names = ["softmax-seed1", "csparsemax-seed1", "csoftmax-seed1"]
    scores = {n: {k: {key: 12.345 for key, _, _ in METRICS} for k in (1, 2, 5)} for n in names}
    result = SimpleNamespace(names=names, ks=[1, 2, 5], inputs={1: 1000, 2: 500, 5: 200}, scores=scores)
    lines = format_table(result).splitlines()
    assert max(map(len, lines)) <= 100, "\n".join(lines)
    cells = [_cell(12.345, key, 2) for key, _, _ in METRICS]
    assert sum(ln.split()[-len(METRICS):] == cells for ln in lines) == 9  # a row per K and model: every value
    assert lines[1].split()[:3] == ["1", "1000", "softmax-seed1"] and lines[2].split()[0] == "csparsemax-seed1"
