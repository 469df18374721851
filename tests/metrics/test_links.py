"""Alignment link parsing: Pharaoh / talp, sure / possible, 0- and 1-indexing, file:line errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scanmt.data.links import format_links, parse_links, read_links
from scanmt.errors import DataError


def test_parse_pharaoh_sure_links():
    sure, possible = parse_links("0-0 1-2 2-1")
    assert sure == {(0, 0), (1, 2), (2, 1)}
    assert possible == sure


def test_parse_talp_one_indexed_with_possible():
    sure, possible = parse_links("1-1 2p3 3-2", one_indexed=True)
    assert sure == {(0, 0), (2, 1)}
    assert possible == {(0, 0), (1, 2), (2, 1)}


def test_sure_and_possible_for_same_pair_is_sure():
    sure, possible = parse_links("0p1 0-1")
    assert sure == {(0, 1)} and possible == {(0, 1)}


def test_empty_line_has_no_links():
    assert parse_links("") == (set(), set())
    assert parse_links("   ") == (set(), set())


@pytest.mark.parametrize("bad", ["0:1", "a-b", "1-", "-1-2", "1x2", "1--2"])
def test_bad_token_is_named(bad):
    with pytest.raises(DataError, match=re.escape(f"bad alignment link {bad!r}")):
        parse_links(f"0-0 {bad}")


def test_zero_index_rejected_when_one_indexed():
    with pytest.raises(DataError, match="1-based"):
        parse_links("0-1", one_indexed=True)


def test_format_links_sorted_zero_based():
    assert format_links({(2, 1), (0, 3), (0, 0)}) == "0-0 0-3 2-1"
    assert format_links(set()) == ""


links_strategy = st.sets(st.tuples(st.integers(0, 60), st.integers(0, 60)), max_size=30)


@given(links_strategy)
def test_format_parse_roundtrip(links):
    sure, possible = parse_links(format_links(links))
    assert sure == links and possible == links


@given(links_strategy, links_strategy)
def test_possible_contains_sure(s, p):
    text = " ".join([f"{i + 1}-{j + 1}" for i, j in s] + [f"{i + 1}p{j + 1}" for i, j in p])
    sure, possible = parse_links(text, one_indexed=True)
    assert sure == s
    assert possible == s | p


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "gold.talp"
    path.write_text(text, encoding="utf-8")
    return path


def test_read_links_allows_empty_lines(tmp_path):
    path = _write(tmp_path, "0-0\n\n1-1 0p1\n")
    got = read_links(path, src_lens=[1, 1, 2], tgt_lens=[1, 1, 2])
    assert got == [({(0, 0)}, {(0, 0)}), (set(), set()), ({(1, 1)}, {(1, 1), (0, 1)})]


def test_read_links_bad_token_names_file_and_line(tmp_path):
    path = _write(tmp_path, "0-0\n0-1 x\n")
    with pytest.raises(DataError, match=rf"{path}:2: bad alignment link 'x'"):
        read_links(path)


def test_read_links_source_index_out_of_range(tmp_path):
    path = _write(tmp_path, "0-0\n0-0 3-1\n")
    with pytest.raises(DataError, match=rf"{path}:2: .*source index 3 out of range for 3 source words"):
        read_links(path, src_lens=[1, 3], tgt_lens=[1, 2])


def test_read_links_target_index_out_of_range_one_indexed(tmp_path):
    path = _write(tmp_path, "1-1 1p3\n")
    with pytest.raises(DataError, match=rf"{path}:1: .*target index 2 out of range for 2 target words"):
        read_links(path, one_indexed=True, src_lens=[1], tgt_lens=[2])


def test_read_links_line_count_mismatch(tmp_path):
    path = _write(tmp_path, "0-0\n0-0\n\n")  # an extra trailing newline: 3 lines
    with pytest.raises(DataError, match=rf"{path} has 3 lines but the source side has 2"):
        read_links(path, src_lens=[1, 1], tgt_lens=[1, 1])


def test_read_links_missing_file(tmp_path):
    with pytest.raises(DataError, match="file not found"):
        read_links(tmp_path / "nope.talp")


def test_rwth_gold_set(rwth):
    src_lens = [len(x.split()) for x in (rwth / "test.de").read_text(encoding="utf-8").splitlines()]
    tgt_lens = [len(x.split()) for x in (rwth / "test.en").read_text(encoding="utf-8").splitlines()]
    gold = read_links(rwth / "test.talp", one_indexed=True, src_lens=src_lens, tgt_lens=tgt_lens)
    assert len(gold) == 508
    first_sure, first_possible = gold[0]
    # line 1: "9-8 8-8 7-8 6-6 1-1 2-2 4-5 5-5 3-3 11-9 10-7 2-4", all sure, 1-indexed
    assert len(first_sure) == 12 and first_possible == first_sure
    assert (0, 0) in first_sure and (10, 8) in first_sure and (1, 3) in first_sure
    assert all(s <= p for s, p in gold)
    assert sum(len(p) - len(s) for s, p in gold) > 0  # the set has possible-only links
    # 0-indexed reading of a 1-indexed file puts links out of range somewhere
    with pytest.raises(DataError, match=r"test\.talp:\d+: .*out of range"):
        read_links(rwth / "test.talp", one_indexed=False, src_lens=src_lens, tgt_lens=tgt_lens)
