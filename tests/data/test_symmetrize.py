"""Symmetrization: hand-worked cases, and the fast grow-diag against a literal grid scan."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scanmt.data.symmetrize import (
    METHODS,
    NEIGHBOURS,
    get_method,
    grow_diag,
    grow_diag_final,
    grow_diag_final_and,
    intersect,
    symmetrize,
    union,
)
from scanmt.errors import ConfigError


def reference(fwd, rev, src_len, tgt_len, final):
    """Koehn's pseudo-code, literally: full grid scans, live 'aligned' state."""
    uni = set(fwd) | set(rev)
    a = set(fwd) & set(rev)

    def src_al(i):
        return any(x == i for x, _ in a)

    def tgt_al(j):
        return any(y == j for _, y in a)

    changed = True
    while changed:
        changed = False
        for e in range(src_len):
            for f in range(tgt_len):
                if (e, f) not in a:
                    continue
                for de, df in NEIGHBOURS:
                    n = (e + de, f + df)
                    if n not in a and n in uni and (not src_al(n[0]) or not tgt_al(n[1])):
                        a.add(n)
                        changed = True
    if final:
        for direction in (fwd, rev):
            for e in range(src_len):
                for f in range(tgt_len):
                    if (e, f) not in direction or (e, f) in a:
                        continue
                    fe, ff = not src_al(e), not tgt_al(f)
                    if (fe and ff) if final == "and" else (fe or ff):
                        a.add((e, f))
    return a


# ---------------------------------------------------------------------------- hand-worked


def test_intersect_union():
    f = {(0, 0), (1, 2)}
    r = {(0, 0), (2, 1)}
    assert intersect(f, r) == {(0, 0)}
    assert union(f, r) == {(0, 0), (1, 2), (2, 1)}


def test_final_and_versus_final():
    # empty intersection: nothing to grow from; the final steps decide
    fwd, rev = {(0, 0)}, {(0, 1)}
    assert grow_diag(fwd, rev) == set()
    # FINAL(fwd) adds (0,0) (both words free); (0,1) has source 0 aligned by then
    assert grow_diag_final_and(fwd, rev) == {(0, 0)}
    # -final only needs one free word: target 1 is free
    assert grow_diag_final(fwd, rev) == {(0, 0), (0, 1)}


def test_grow_follows_diagonal_but_not_distant_links():
    fwd = {(0, 0), (1, 1), (3, 3)}
    rev = {(0, 0)}
    # (1,1) is a diagonal neighbour of (0,0); (3,3) touches nothing
    assert grow_diag(fwd, rev) == {(0, 0), (1, 1)}
    assert grow_diag_final_and(fwd, rev) == {(0, 0), (1, 1), (3, 3)}


def test_grow_chain_in_one_sweep():
    fwd = {(0, 0), (1, 1), (2, 2), (3, 3), (4, 4)}
    rev = {(0, 0)}
    assert grow_diag(fwd, rev) == fwd


def test_grow_needs_an_unaligned_word():
    # (0,1) neighbours (0,0) but source 0 and target 1 are both aligned already
    fwd = {(0, 0), (1, 1), (0, 1)}
    rev = {(0, 0), (1, 1)}
    for m in ("grow-diag", "grow-diag-final", "grow-diag-final-and"):
        assert symmetrize(fwd, rev, m) == {(0, 0), (1, 1)}
    assert symmetrize(fwd, rev, "union") == fwd


def test_one_to_many_grows_from_intersection():
    # German compound (source 1) -> two English words (targets 1, 2)
    fwd = {(0, 0), (1, 1), (1, 2), (2, 3)}  # every target picks one source
    rev = {(0, 0), (1, 1), (2, 3)}  # every source picks one target
    assert grow_diag_final_and(fwd, rev) == fwd
    assert intersect(fwd, rev) == rev


def test_get_method_and_unknown():
    assert get_method("grow-diag-final-and") is grow_diag_final_and
    with pytest.raises(ConfigError, match="grow-diag-final-and"):
        get_method("gdfa")
    with pytest.raises(ConfigError):
        symmetrize(set(), set(), "nope")


def test_empty():
    for m in METHODS:
        assert symmetrize(set(), set(), m) == set()


# ---------------------------------------------------------------------------- properties


@st.composite
def directional_pair(draw, ibm_like: bool):
    n = draw(st.integers(1, 7))
    m = draw(st.integers(1, 7))
    if ibm_like:  # fwd: each target at most one source; rev: each source at most one target
        fwd = {(i, j) for j in range(m) if (i := draw(st.integers(-1, n - 1))) >= 0}
        rev = {(i, j) for i in range(n) if (j := draw(st.integers(-1, m - 1))) >= 0}
    else:
        cells = st.tuples(st.integers(0, n - 1), st.integers(0, m - 1))
        fwd = draw(st.sets(cells, max_size=n * m))
        rev = draw(st.sets(cells, max_size=n * m))
    return fwd, rev, n, m


@settings(max_examples=300, deadline=None)
@given(st.booleans().flatmap(directional_pair))
def test_matches_literal_pseudocode(case):
    fwd, rev, n, m = case
    assert grow_diag(fwd, rev) == reference(fwd, rev, n, m, None)
    assert grow_diag_final(fwd, rev) == reference(fwd, rev, n, m, "or")
    assert grow_diag_final_and(fwd, rev) == reference(fwd, rev, n, m, "and")


@settings(max_examples=200, deadline=None)
@given(directional_pair(True))
def test_inclusions(case):
    fwd, rev, _, _ = case
    i, u = intersect(fwd, rev), union(fwd, rev)
    gd = grow_diag(fwd, rev)
    gdfa = grow_diag_final_and(fwd, rev)
    gdf = grow_diag_final(fwd, rev)
    assert i <= gd <= gdfa <= u
    assert gd <= gdf <= u
    # every source and target word that is aligned in either direction and free of
    # intersection links ends up aligned by -final (the OR rule leaves nobody out)
    src_any = {x for x, _ in u}
    tgt_any = {y for _, y in u}
    assert {x for x, _ in gdf} == src_any
    assert {y for _, y in gdf} == tgt_any


@settings(max_examples=100, deadline=None)
@given(directional_pair(False))
def test_agreeing_directions(case):
    fwd, _, _, _ = case
    for m in METHODS:
        assert symmetrize(fwd, set(fwd), m) == fwd
