"""AER and SAER against hand computations; hard and soft alignments from subword attention."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from scanmt.data.subword import word_index
from scanmt.errors import DataError
from scanmt.metrics.aer import aer, hard_alignment, saer, strip_specials, word_attention
from scanmt.data.links import parse_links


def test_aer_three_sentences_by_hand():
    gold = [
        parse_links("0-0 1-1 2p1"),  # S = {00, 11}, P = S + {21}
        parse_links("0-1 1-0"),
        parse_links("0p0"),  # no sure link
    ]
    predicted = [{(0, 0), (2, 1), (2, 2)}, {(0, 1), (1, 0)}, {(1, 1)}]
    # |A∩S| = 1 + 2 + 0 = 3; |A∩P| = 2 + 2 + 0 = 4; |A| = 3 + 2 + 1 = 6; |S| = 2 + 2 + 0 = 4
    assert aer(predicted, gold) == pytest.approx(100 * (1 - 7 / 10))


def test_aer_perfect_and_worst():
    gold = [parse_links("0-0 1-1")]
    assert aer([{(0, 0), (1, 1)}], gold) == pytest.approx(0.0)
    assert aer([{(0, 1), (1, 0)}], gold) == pytest.approx(100.0)


def test_aer_adds_sure_to_possible():
    # a gold pair whose possible set lacks the sure link is repaired
    assert aer([{(0, 0)}], [({(0, 0)}, set())]) == pytest.approx(0.0)


def test_aer_errors():
    with pytest.raises(DataError, match="2 predicted alignments but 1 gold"):
        aer([set(), set()], [(set(), set())])
    with pytest.raises(DataError, match="undefined"):
        aer([set()], [(set(), {(0, 0)})])


def test_saer_by_hand():
    m_a = np.array([[0.8, 0.2], [0.5, 0.5]])  # [target word, source word]
    gold = [parse_links("0-0 1p1")]
    # |MA.MS| = 0.8; |MA.MP| = 0.8 + 0.5; |MA| = 2; |MS| = 1
    assert saer([m_a], gold) == pytest.approx(100 * (1 - 2.1 / 3))


def test_saer_link_out_of_range():
    with pytest.raises(DataError, match="sentence 1: gold link 2-0 .* outside 2 source x 2 target words"):
        saer([np.eye(2)], [parse_links("2-0")])


def test_strip_specials():
    a = np.arange(12, dtype=float).reshape(3, 4)
    out, src, hyp = strip_specials(a, ["▁ein", "▁Hund", "▁.", "<sink>"], ["▁a", "▁dog", "</s>"])
    assert src == ["▁ein", "▁Hund", "▁."] and hyp == ["▁a", "▁dog"]
    np.testing.assert_array_equal(out, a[:2, :3])
    out, src, hyp = strip_specials(a[:, :3], ["▁ein", "▁Hund", "▁."], ["▁a", "▁dog", "▁."])
    assert out.shape == (3, 3) and len(src) == 3 and len(hyp) == 3


def test_hard_alignment_maps_subwords_to_words():
    src = ["▁ein", "▁Hund", "e", "▁."]
    hyp = ["▁a", "▁dog", "s", "▁.", "▁x"]
    a = np.array(
        [
            [0.9, 0.1, 0.0, 0.0],
            [0.0, 0.2, 0.7, 0.1],  # piece "e" belongs to word 1
            [0.0, 0.6, 0.4, 0.0],
            [0.0, 0.0, 0.0, 1.0],
            [0.0, 0.0, 0.0, 0.0],  # no weight on any real source token: no link
        ]
    )
    links = hard_alignment(a, word_index(src), word_index(hyp))
    assert links == {(0, 0), (1, 1), (2, 2)}


def test_word_attention_sums_source_pieces_and_averages_target_pieces():
    a = np.array([[0.2, 0.3, 0.5], [0.1, 0.1, 0.8], [0.3, 0.3, 0.4]])
    w = word_attention(a, [0, 0, 1], [0, 1, 1])
    np.testing.assert_allclose(w, [[0.5, 0.5], [0.4, 0.6]])
    with pytest.raises(DataError, match="does not match"):
        word_attention(a, [0, 1], [0, 1, 1])


@given(
    arrays(np.float64, st.tuples(st.integers(1, 6), st.integers(1, 6)), elements=st.floats(0.01, 1.0)),
    st.data(),
)
def test_saer_equals_aer_for_one_hot_attention(att, data):
    t, s = att.shape
    cells = st.tuples(st.integers(0, s - 1), st.integers(0, t - 1))
    sure = data.draw(st.sets(cells, max_size=8))
    possible = data.draw(st.sets(cells, max_size=8)) | sure
    identity = list(range(s)), list(range(t))
    hard = hard_alignment(att, *identity)
    one_hot = np.zeros_like(att)
    one_hot[np.arange(t), att.argmax(axis=1)] = 1.0
    np.testing.assert_array_equal(word_attention(one_hot, *identity), one_hot)
    assert saer([one_hot], [(sure, possible)]) == pytest.approx(aer([hard], [(sure, possible)]))


def test_rwth_gold_against_itself_and_a_diagonal(rwth):
    from scanmt.data.links import read_links

    de = (rwth / "test.de").read_text(encoding="utf-8").splitlines()
    en = (rwth / "test.en").read_text(encoding="utf-8").splitlines()
    gold = read_links(rwth / "test.talp", one_indexed=True, src_lens=[len(x.split()) for x in de],
                      tgt_lens=[len(x.split()) for x in en])
    assert aer([s for s, _ in gold], gold) == pytest.approx(0.0)
    assert aer([p for _, p in gold], gold) == pytest.approx(0.0)  # 1 - (|S| + |P|) / (|P| + |S|)
    # a diagonal "aligner": every target word j linked to source word round(j * S / T)
    diag = []
    for d, e in zip(de, en):
        s, t = len(d.split()), len(e.split())
        diag.append({(min(s - 1, round(j * s / t)), j) for j in range(t)})
    value = aer(diag, gold)
    assert 30.0 < value < 100.0
    # its one-hot word matrices give the same SAER
    mats = []
    for links, d, e in zip(diag, de, en):
        m = np.zeros((len(e.split()), len(d.split())))
        for i, j in links:
            m[j, i] = 1.0
        mats.append(m)
    assert saer(mats, gold) == pytest.approx(value)
