"""Attention maps with Japanese labels (issue 53): drawn with a CJK font, or with one warning when none is installed."""

from __future__ import annotations

import logging
import warnings

import numpy as np
import pytest

from scanmt.viz import cjk_font
from scanmt.viz.attention_map import Panel, plot_attention_maps

SRC = ["▁京都", "▁は", "▁日本", "▁の", "▁都市", "▁です", "▁。", "<sink>"]
HYP = ["▁Kyoto", "▁is", "▁a", "▁city", "▁in", "▁Japan", "▁.", "</s>"]


def _panel() -> Panel:
    return Panel("softmax", np.full((len(HYP), len(SRC)), 1.0 / len(SRC)), SRC, HYP)


def test_cjk_characters_are_recognized():
    assert cjk_font.has_cjk(["a", "京都"]) and cjk_font.has_cjk(["カタカナ"]) and cjk_font.has_cjk(["ひらがな"])
    assert not cjk_font.has_cjk(["Kyoto", "Straße", "<sink>", "—"])
    assert cjk_font.font_families(["Kyoto", "is"]) is None  # Latin labels keep matplotlib's default


def _render(tmp_path, name: str) -> np.ndarray:
    import matplotlib.image

    plot_attention_maps([_panel()], tmp_path / name, title="京都は日本の都市です。", dpi=60)
    return matplotlib.image.imread(tmp_path / name)


def test_japanese_labels_are_drawn_with_a_cjk_font(tmp_path, monkeypatch):
    family = cjk_font.cjk_family()
    if family is None:
        pytest.skip("no CJK font installed (scripts/install.sh installs fonts-noto-cjk): Japanese labels can't be checked")
    assert cjk_font.font_families(SRC) == [cjk_font.BASE_FAMILY, family]
    with_font = _render(tmp_path, "cjk.png")
    monkeypatch.setattr(cjk_font, "cjk_family", lambda: None)
    boxes = _render(tmp_path, "boxes.png")  # DejaVu Sans alone: a box for each kanji and kana
    assert with_font.shape == boxes.shape and not np.array_equal(with_font, boxes)


def test_without_a_cjk_font_one_warning_and_the_map_is_still_drawn(tmp_path, monkeypatch, caplog):
    from matplotlib import font_manager

    monkeypatch.setattr(cjk_font, "CJK_FAMILIES", ("No Such CJK Font",))
    monkeypatch.setattr(font_manager, "findSystemFonts", lambda *a, **k: [])
    cjk_font.cjk_family.cache_clear()
    try:
        with caplog.at_level(logging.WARNING, logger="scanmt.viz.cjk_font"), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _render(tmp_path, "a.png")
            _render(tmp_path, "b.png")
    finally:
        cjk_font.cjk_family.cache_clear()
    warned = [r for r in caplog.records if "no font with Japanese" in r.getMessage()]
    assert len(warned) == 1 and (tmp_path / "a.png").stat().st_size > 0
    # matplotlib's own warning for each missing glyph stays quiet: the one above says it all
    assert not [str(w.message) for w in caught if "missing from font" in str(w.message)]
