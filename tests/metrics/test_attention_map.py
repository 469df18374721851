"""Attention maps: a rendered figure is a valid PNG of the expected pixel size."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np
import pytest

from scanmt.viz.attention_map import Panel, display_tokens, figure_pixels, plot_attention_maps

SRC = ["▁ein", "▁Hund", "e", "▁läuft", "▁.", "<sink>"]
HYP = ["▁a", "▁dog", "▁runs", "▁.", "</s>"]


def png_header(path: Path) -> tuple[int, int]:
    """Check the PNG signature and IHDR chunk (with its CRC); return (width, height)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    length, kind = struct.unpack(">I4s", data[8:16])
    assert kind == b"IHDR" and length == 13
    body = data[16 : 16 + length]
    (crc,) = struct.unpack(">I", data[16 + length : 20 + length])
    assert crc == zlib.crc32(kind + body)
    assert data[-8:-4] == b"IEND"
    width, height = struct.unpack(">II", body[:8])
    return width, height


def _panels() -> list[Panel]:
    rng = np.random.default_rng(0)
    a = rng.dirichlet(np.full(len(SRC), 0.3), size=len(HYP))
    sparse = np.where(a < 0.15, 0.0, a)
    sparse /= sparse.sum(axis=1, keepdims=True)
    return [Panel("softmax", a, SRC, HYP), Panel("csparsemax", sparse, SRC, HYP)]


def test_renders_png_of_expected_size(tmp_path):
    out = tmp_path / "map.png"
    panels = _panels()
    size = plot_attention_maps(panels, out, title="sentence 0", dpi=80)
    assert size == figure_pixels(panels, 80)
    assert png_header(out) == size
    # 6 source cells of 0.28 in + 1.3 in of labels per panel + 0.3 in; 5 output cells + 2.3 in
    assert size == (round((2 * (6 * 0.28 + 1.3) + 0.3) * 80), round((5 * 0.28 + 2.3) * 80))
    # two side-by-side panels are wider than one, same height
    one = plot_attention_maps(panels[:1], tmp_path / "one.png", dpi=80)
    assert one[0] < size[0] and one[1] == size[1]
    assert png_header(tmp_path / "one.png") == one


def test_white_is_zero(tmp_path):
    # a map that is all zeros except one cell renders almost entirely white
    a = np.zeros((3, 3))
    a[1, 1] = 1.0
    out = tmp_path / "z.png"
    plot_attention_maps([Panel("x", a, ["▁a", "▁b", "▁c"], ["▁x", "▁y", "▁z"])], out)
    import matplotlib.image as mpimg

    img = mpimg.imread(out)[..., :3]
    white = (img > 0.99).all(axis=-1).mean()
    assert white > 0.8
    assert (img < 0.05).all(axis=-1).any()  # the single 1.0 cell is black


def test_display_tokens_marks_subwords():
    assert display_tokens(SRC) == ["ein", "Hund@@", "e", "läuft", ".", "<sink>"]
    assert display_tokens(["word", "level"]) == ["word", "level"]


def test_panel_shape_checked():
    with pytest.raises(ValueError, match="attention shape"):
        Panel("x", np.zeros((2, 2)), ["a"], ["b", "c"])


def test_a_long_panel_name_wraps_onto_two_lines_that_fit_the_panel():
    from scanmt.viz.attention_map import wrap_name

    assert wrap_name("softmax", 2.0) == "softmax"
    long = "csparsemax (c = 0.2, last layer, cosine scores) with a much longer tail than fits"
    lines = wrap_name(long, 3.0).split("\n")
    per_line = int(3.0 * 72 / (11 * 0.6))
    assert len(lines) == 2 and all(len(x) <= per_line for x in lines) and lines[1].endswith("…")
    assert wrap_name("csparsemax (c = 0.2, last layer, cosine scores)", 4.0).replace("\n", " ") == \
        "csparsemax (c = 0.2, last layer, cosine scores)"
