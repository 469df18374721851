"""The report's scores by source length (:mod:`scanmt.experiments.report.lengths`)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scanmt.experiments.report import lengths
from scanmt.experiments.report.collection import SystemResults


def _run(seed: int, sigma: list[float], dropped: list[float], src: list[int], ref: list[int]) -> dict[str, Any]:
    counts = {"rep_sigma": sigma, "ref_words": ref, "hyp_words": ref, "dropped": dropped, "source_words": src}
    return {"seed": seed, "stress": {"k": [1], "per_input": {"1": counts}}}


def test_groups_split_at_the_edges_and_small_groups_join_a_neighbour_towards_the_middle() -> None:
    words = [5] * 40 + [15] * 40 + [25] * 3 + [35] * 40 + [70] * 2
    groups = lengths.length_groups(words, edges=(10, 20, 30, 40, 60), min_group=30)
    # 21-30 (3 sentences) joins 31-40 (it sits past the middle), 61+ (2) joins 31-40's group, 41-60 is empty
    assert [g.label for g in groups] == ["1–10", "11–20", "21+"]
    assert [len(g.indices) for g in groups] == [40, 40, 45]
    # a small first group joins the next one; an empty source line counts in the first group
    groups = lengths.length_groups([0, 3] + [15] * 40, edges=(10, 20), min_group=30)
    assert [(g.label, len(g.indices)) for g in groups] == [("1–20", 42)]
    # every group small: one group of everything
    assert [len(g.indices) for g in lengths.length_groups([1, 12, 25, 50], min_group=30)] == [4]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=120), min_size=1, max_size=300), st.integers(1, 50))
def test_groups_partition_the_sentences(words: list[int], min_group: int) -> None:
    groups = lengths.length_groups(words, min_group=min_group)
    assert sorted(i for g in groups for i in g.indices) == list(range(len(words)))
    assert len(groups) == 1 or all(len(g.indices) >= min_group for g in groups)
    for a, b in zip(groups, groups[1:]):  # ordered, disjoint ranges
        assert a.high is not None and a.high < b.low


def test_section_gives_the_baselines_rates_and_each_systems_ratio_by_group() -> None:
    src = [5] * 30 + [15] * 30
    ref = [10] * 60
    # softmax repeats only on the long group: σ 1 on each long sentence, 2 seeds
    soft = SystemResults("softmax", "softmax", [_run(k, [0.0] * 30 + [1.0] * 30, [0.0] * 30 + [2.0] * 30, src, ref)
                                                for k in (1, 2)])
    # csparsemax halves the long group's repetitions and drops
    csp = SystemResults("csparsemax", "csparsemax", [_run(k, [0.0] * 30 + [0.5] * 30, [0.0] * 30 + [1.0] * 30, src, ref)
                                                     for k in (1, 2)])
    hyps = {"softmax": {1: ["a b c d"] * 60, 2: ["a b c d"] * 60}, "csparsemax": {1: ["a b c d"] * 60}}
    lines = lengths.length_section([soft, csp], {"softmax": "softmax", "csparsemax": "softmax"}, "softmax",
                                   src, hyps, ["a b c d"] * 60)
    text = "\n".join(lines)
    # REP = 100 * 30 / (30 * 10) = 10.00 on the long group; DROP = 100 * 60 / (30 * 15) = 13.33
    assert "| 1–10 | 30 | 4.0 | 100.00 | 0.00 | 0.00 |" in text
    assert "| 11–20 | 30 | 4.0 | 100.00 | 10.00 | 13.33 |" in text
    assert "**csparsemax** against softmax (2 seeds):" in text
    row = next(line for line in lines if line.startswith("| 11–20") and "×" in line)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2] == "+0.00"  # Δ BLEU over the one seed both have
    assert cells[3] == "10.00" and cells[4].startswith("5.00 (×0.50, p ")
    assert cells[5] == "13.33" and cells[6].startswith("6.67 (×0.50, p ")
    p = float(cells[4].split("p ")[1].split()[0].rstrip(")"))
    assert p < 0.05  # halved on every one of 60 paired inputs
    # the short group: both rates 0, no ratio
    short = next(line for line in lines if line.startswith("| 1–10") and "×" in line)
    assert "0.00 (× –, p " in short


def test_no_stress_test_at_k1_gives_no_section() -> None:
    run = {"seed": 1, "stress": {"k": [2], "per_input": {"2": {"rep_sigma": [0.0], "ref_words": [3]}}}}
    assert lengths.length_section([SystemResults("softmax", "softmax", [run])], {"softmax": "softmax"}, "softmax",
                                  [3], {}, ["a b c"]) == []


def test_source_words_come_from_the_runs_drop_counts() -> None:
    soft = SystemResults("softmax", "softmax", [_run(1, [0.0, 0.0], [0.0, 0.0], [4, 9], [3, 3])])
    assert lengths.source_words([soft], 2) == [4, 9]
    assert lengths.source_words([soft], 3) is None  # another test set's counts


@pytest.mark.parametrize("field", ["dropped", "source_words"])
def test_runs_without_drop_counts_show_rep_only(field: str) -> None:
    run = _run(1, [1.0, 0.0] * 20, [0.0] * 40, [5] * 40, [10] * 40)
    del run["stress"]["per_input"]["1"][field]
    other = _run(1, [0.0] * 40, [0.0] * 40, [5] * 40, [10] * 40)
    del other["stress"]["per_input"]["1"][field]
    text = "\n".join(lengths.length_section(
        [SystemResults("softmax", "softmax", [run]), SystemResults("csparsemax", "csparsemax", [other])],
        {"softmax": "softmax", "csparsemax": "softmax"}, "softmax", [5] * 40, {}, ["a"] * 40))
    assert "| 1–10 | 40 | 1.0 | – | 5.00 | – |" in text
    assert "| 1–10 | 40 | – | 5.00 | 0.00 (×0.00, p " in text and text.rstrip().endswith("| – | – |")


def test_training_length_rows_split_the_test_set_at_the_filter() -> None:
    src = [5] * 30 + [45] * 30
    ref = [10] * 60
    # csparsemax repeats more only beyond the training lengths (σ 2 against 1 there)
    soft = SystemResults("softmax", "softmax", [_run(1, [0.0] * 30 + [1.0] * 30, [1.0] * 60, src, ref)])
    csp = SystemResults("csparsemax", "csparsemax", [_run(1, [0.0] * 30 + [2.0] * 30, [1.0] * 60, src, ref)])
    hyps = {"softmax": {1: ["a b c d"] * 60}, "csparsemax": {1: ["a b c d"] * 60}}
    args = ([soft, csp], {"softmax": "softmax", "csparsemax": "softmax"}, "softmax", src, hyps, ["a b c d"] * 60)
    lines = lengths.length_section(*args, trained_words=40)
    text = "\n".join(lines)
    # REP beyond: 100 * 30 / (30 * 10) = 10.00 for softmax; DROP everywhere 100 * 1 / 5 = 20.00 and 100 / 45 = 2.22
    assert "| 1–40 (the training lengths) | 30 | 4.0 | 100.00 | 0.00 | 20.00 |" in text
    assert "| 41+ (longer than any training source) | 30 | 4.0 | 100.00 | 10.00 | 2.22 |" in text
    beyond = next(x for x in lines if x.startswith("| 41+ (longer") and "×" in x)
    assert "| 10.00 | 20.00 (×2.00, p " in beyond
    # no limit, or a limit no test sentence passes: no such rows
    assert "training lengths" not in "\n".join(lengths.length_section(*args))
    assert "training lengths" not in "\n".join(lengths.length_section(*args, trained_words=50))


def test_cut_short_counts_outputs_under_a_third_of_their_reference() -> None:
    ref = ["27 . Fukuroi-juku Station ( Fukuroi City )", "a b c", "one two three four five six"]
    # "27" is 1 of 8 words; "x" against a 3-word reference does not count; 2 of 6 is not under a third
    assert lengths.cut_short(["27", "x", "one two"], ref) == (1, 1)
    assert lengths.cut_short(["27 .", "x", "one"], ref) == (2, 1)
    soft = SystemResults("softmax", "softmax", [_run(1, [0.0] * 3, [0.0] * 3, [5] * 3, [8, 3, 6])])
    csp = SystemResults("csparsemax", "csparsemax", [_run(1, [0.0] * 3, [0.0] * 3, [5] * 3, [8, 3, 6])])
    text = "\n".join(lengths.length_section(
        [soft, csp], {"softmax": "softmax", "csparsemax": "softmax"}, "softmax", [5] * 3,
        {"softmax": {1: ["27 . Fukuroi-juku", "x", "one two three"]}, "csparsemax": {1: ["27", "x", "one"]}}, ref))
    assert "softmax 0 (one word: 0); csparsemax 2 (one word: 2)." in text
