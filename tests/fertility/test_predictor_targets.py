"""The predictor's targets: word-level fertilities and bounds on subword sources (``level: word``)."""

from __future__ import annotations

import pytest

from scanmt.errors import DataError
from scanmt.fertility.predictor.targets import fertility_targets, piece_bounds, spread_to_pieces, word_count, word_targets

# "ein Spielhaus aus Holz ." in pieces: Spielhaus is 3 pieces, Holz 2
PIECES = ["▁ein", "▁Spiel", "ha", "us", "▁aus", "▁Hol", "z", "▁."]
# "a play house made of wood ." word links (source word - target word), 0-based:
#   ein-a; Spielhaus-play, Spielhaus-house; aus-made, aus-of; Holz-wood; .-.
# plus a duplicate link (counted once)
WORD_LINKS = [(0, 0), (1, 1), (1, 2), (2, 3), (2, 4), (3, 5), (4, 6), (1, 2)]


def test_word_targets_by_hand():
    assert word_count(PIECES) == 5 and word_count([]) == 0
    # word fertilities: ein 1, Spielhaus 2, aus 2, Holz 1, . 1; each piece carries its word's
    assert word_targets(PIECES, WORD_LINKS) == [1, 2, 2, 2, 2, 1, 1, 1]
    # an unaligned word has fertility 0 on all its pieces
    assert word_targets(PIECES, [(0, 0), (4, 6)]) == [1, 0, 0, 0, 0, 0, 0, 1]
    # a first piece without ▁ still starts word 0
    assert word_targets(["Spiel", "haus", "▁."], [(0, 0), (0, 1)]) == [2, 2, 0]


def test_word_targets_errors():
    with pytest.raises(DataError, match="source index 5 out of range for 5 source tokens"):
        word_targets(PIECES, [(5, 0)])
    with pytest.raises(DataError, match="4 word values for a subword sentence of 5 words"):
        spread_to_pieces([1, 1, 1, 1], PIECES)


def test_piece_bounds_share_the_word_mean_evenly():
    # per-piece expectations of the word fertility; Spielhaus's pieces say 1.5, 2.1, 2.4 (mean 2.0)
    expected = [1.0, 1.5, 2.1, 2.4, 1.8, 0.9, 1.1, 1.0]
    got = piece_bounds(expected, PIECES)
    want = [1.0, 2.0 / 3, 2.0 / 3, 2.0 / 3, 1.8, 0.5, 0.5, 1.0]
    assert got == pytest.approx(want)
    # the pieces of a word sum to the word's mean prediction
    assert sum(got[1:4]) == pytest.approx(2.0) and sum(got[5:7]) == pytest.approx(1.0)
    with pytest.raises(DataError, match="7 expected fertilities for 8 source pieces"):
        piece_bounds(expected[:7], PIECES)


def test_fertility_targets_from_links_files(tmp_path):
    """Both levels from Pharaoh files; a word link outside the sentence names the file and line."""
    sents = [PIECES, ["▁zwei", "▁Hund", "e"]]
    word = tmp_path / "train.word.align"
    word.write_text("0-0 1-1 1-2 2-3 2-4 3-5 4-6\n0-0 1-1\n", encoding="utf-8")
    assert fertility_targets(sents, word, "word") == [[1, 2, 2, 2, 2, 1, 1, 1], [1, 1, 1]]
    sub = tmp_path / "train.subword.align"
    sub.write_text("0-0 1-1 2-2 2-3\n0-0 1-1 2-1\n", encoding="utf-8")
    assert fertility_targets(sents, sub, "subword") == [[1, 1, 2, 0, 0, 0, 0, 0], [1, 1, 1]]
    word.write_text("0-0\n2-0\n", encoding="utf-8")  # sentence 2 has only 2 words
    with pytest.raises(DataError, match="train.word.align:2"):
        fertility_targets(sents, word, "word")
