"""Fertility strategies, fertility files, the cache and ``scanmt fertility`` (no eflomal needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scanmt.cli.main import main
from scanmt.data.fertility import fertility_stats, format_value, read_fertility, write_fertility
from scanmt.errors import ConfigError, DataError
from scanmt.fertility.alignments import alignment_counts
from scanmt.fertility.cache import cached_fertility, fertility_cache_path
from scanmt.fertility.strategies import compute_fertility, require_predictor
from scanmt.fertility.providers import GuidedFertility, actual_fertility, constant

# ---------------------------------------------------------------------------- strategies


def test_constant():
    assert constant(2).apply([["a", "b"], ["c"]]) == [[2.0, 2.0], [2.0]]
    assert constant(1.5).params == {"value": 1.5}
    for bad in (0, -1, float("inf"), float("nan"), "x"):
        with pytest.raises(DataError):
            constant(bad)


def test_alignment_counts():
    assert alignment_counts({(0, 0), (0, 1), (2, 1)}, 4) == [2, 0, 1, 0]
    assert alignment_counts([(1, 0), (1, 0)], 2) == [0, 1]  # duplicates count once
    with pytest.raises(DataError, match="out of range"):
        alignment_counts({(3, 0)}, 3)


def test_guided_hand_computed():
    src = [["a", "b", "a"], ["b", "c"], ["a"]]
    links = [
        {(0, 0), (0, 1), (1, 2)},  # a->2, b->1, a->0
        {(0, 0), (0, 1), (0, 2)},  # b->3, c->0
        set(),  # a->0
    ]
    g = GuidedFertility.train(src, links)
    assert g.table == {"a": 2, "b": 3, "c": 0}
    # c was seen but never aligned -> 1; d unseen -> 1
    assert g.apply([["a", "b", "c", "d"]]) == [[2.0, 3.0, 1.0, 1.0]]


def test_guided_errors():
    with pytest.raises(DataError, match="2 source sentences but 1"):
        GuidedFertility.train([["a"], ["b"]], [set()])
    with pytest.raises(DataError, match="sentence 2"):
        GuidedFertility.train([["a"], ["b"]], [set(), {(1, 0)}])


def test_actual_floor_of_one():
    src = [["a", "b", "c"], ["d"]]
    links = [{(0, 0), (0, 1), (0, 2), (2, 3)}, set()]
    assert actual_fertility(src, links) == [[3.0, 1.0, 1.0], [1.0]]
    with pytest.raises(DataError, match="sentence 1"):
        actual_fertility([["a"]], [{(1, 1)}])


def test_require_predictor(tmp_path):
    with pytest.raises(ConfigError, match="attention.fertility.*predicted.*trained fertility predictor"):
        require_predictor(None)
    with pytest.raises(ConfigError, match="my.key"):
        require_predictor("", key="my.key")
    with pytest.raises(ConfigError, match="not found"):
        require_predictor(tmp_path / "nope.pt")
    p = tmp_path / "pred.pt"
    p.write_bytes(b"x")
    assert require_predictor(p) == p


# ---------------------------------------------------------------------------- files


def test_write_read_roundtrip(tmp_path):
    f = tmp_path / "x.fert"
    vals = [[1.0, 2.0, 3.0], [0.5, 1.25]]
    write_fertility(f, vals)
    assert f.read_text() == "1 2 3\n0.5 1.25\n"
    assert read_fertility(f) == vals
    assert read_fertility(f, src_lens=[3, 2]) == vals
    assert format_value(2.0) == "2" and format_value(1 / 3) == "0.333333"


def test_write_rejects_zero(tmp_path):
    with pytest.raises(DataError, match=r"x\.fert:2: token 1"):
        write_fertility(tmp_path / "x.fert", [[1], [0]])
    assert not (tmp_path / "x.fert").exists()


@pytest.mark.parametrize(
    "content, lens, pattern",
    [
        ("1 2\n1 1 1\n", [2, 2], r"f\.fert:2: 3 fertilities for a source sentence of 2 tokens \(src\.txt\)"),
        ("1 2\n1\n", [2, 2], r"f\.fert:2: 1 fertilities for a source sentence of 2"),
        ("1 2\n", [2, 2], r"f\.fert has 1 lines but the source \(src\.txt\) has 2 sentences"),
        ("1 0\n", [2], r"f\.fert:1: token 2: fertility 0 is not allowed \(must be > 0\)"),
        ("1 1\n2 -1\n", [2, 2], r"f\.fert:2: token 2: fertility -1 is not allowed"),
        ("nan 1\n", [2], r"f\.fert:1: token 1: fertility nan is not allowed"),
        ("inf\n", [1], r"f\.fert:1: token 1: fertility inf is not allowed \(must be finite\)"),
        ("1 two\n", [2], r"f\.fert:1: token 2: 'two' is not a number"),
        ("1\n\n", None, r"f\.fert:2: empty line"),
        ("1\n\n", [1, 1], r"f\.fert:2: 0 fertilities for a source sentence of 1"),
    ],
)
def test_read_errors_name_the_line(tmp_path, content, lens, pattern):
    f = tmp_path / "f.fert"
    f.write_text(content)
    with pytest.raises(DataError, match=pattern):
        read_fertility(f, src_lens=lens, src_path="src.txt" if lens else None)


def test_stats():
    st = fertility_stats([[1, 2], [1, 1.5]])
    assert st["tokens"] == 4 and st["max"] == 2 and st["share_1"] == 0.5
    assert st["histogram"] == {"1": 2, "2": 1, "other": 1}


# ---------------------------------------------------------------------------- cache


def test_cache_path_names(tmp_path):
    assert fertility_cache_path(tmp_path, "train", "constant", {"value": 2.0}) == (
        tmp_path / "fertility" / "train.constant-2.fert"
    )
    assert fertility_cache_path(tmp_path, "valid", "constant", {"value": 1.5}).name == "valid.constant-1.5.fert"
    p1 = fertility_cache_path(tmp_path, "train", "guided", {"align": "ab", "train_src": "cd"})
    p2 = fertility_cache_path(tmp_path, "train", "guided", {"align": "ab", "train_src": "ce"})
    assert p1 != p2 and p1.name.startswith("train.guided-") and p1.suffix == ".fert"
    with pytest.raises(ConfigError, match="unknown fertility strategy"):
        fertility_cache_path(tmp_path, "train", "magic", {})


def test_cache_reuse_and_invalidation(tmp_path):
    src = tmp_path / "train.bpe.de"
    src.write_text("▁a ▁b\n▁c\n")
    calls = []

    def compute(sents):
        calls.append(len(sents))
        return [[2.0] * len(s) for s in sents]

    r1 = cached_fertility(tmp_path, "train", "constant", {"value": 2}, src, compute)
    assert not r1.reused and r1.values == [[2.0, 2.0], [2.0]] and len(calls) == 1
    side = json.loads(r1.path.with_name(r1.path.name + ".json").read_text())
    assert side["params"] == {"value": 2} and side["stats"]["tokens"] == 3
    r2 = cached_fertility(tmp_path, "train", "constant", {"value": 2}, src, compute)
    assert r2.reused and r2.values == r1.values and len(calls) == 1
    cached_fertility(tmp_path, "train", "constant", {"value": 2}, src, compute, force=True)
    assert len(calls) == 2
    # a changed source is noticed through its digest
    src.write_text("▁a ▁b ▁d\n▁c\n")
    r3 = cached_fertility(tmp_path, "train", "constant", {"value": 2}, src, compute)
    assert not r3.reused and r3.values == [[2.0] * 3, [2.0]] and len(calls) == 3
    # a hand-edited cache file is an error naming the line, not silently used
    r3.path.write_text("2 2 2\n0\n")
    with pytest.raises(DataError, match=r"train\.constant-2\.fert:2: token 1: fertility 0"):
        cached_fertility(tmp_path, "train", "constant", {"value": 2}, src, compute)


def test_cache_checks_computed_lengths(tmp_path):
    src = tmp_path / "s"
    src.write_text("a b\n")
    with pytest.raises(DataError, match=r"s:1: 1 values for a sentence of 2 tokens"):
        cached_fertility(tmp_path, "train", "actual", {"x": 1}, src, lambda s: [[1.0]])


# ---------------------------------------------------------------------------- prepared directory


@pytest.fixture
def data_dir(fertility_data_dir: Path) -> Path:
    return fertility_data_dir


def test_compute_guided_and_actual(data_dir):
    g = compute_fertility(data_dir, "train", "guided")
    assert g.values == [[1.0, 2.0, 1.0], [1.0, 1.0]]
    gv = compute_fertility(data_dir, "valid", "guided")
    assert gv.values == [[1.0, 1.0]]  # Katze unseen -> 1
    assert compute_fertility(data_dir, "valid", "guided").reused
    act = compute_fertility(data_dir, "train", "actual")
    assert act.values == [[1.0, 2.0, 1.0], [1.0, 1.0]]
    assert act.path.parent == data_dir / "fertility"
    # re-aligning changes the key: a new file, the old one stays
    (data_dir / "align" / "train.subword.align").write_text("0-0 0-1 0-2 1-1\n0-0 1-1\n")
    g2 = compute_fertility(data_dir, "train", "guided")
    assert not g2.reused and g2.path != g.path
    assert g2.values == [[3.0, 1.0, 1.0], [3.0, 1.0]]


def test_compute_errors(data_dir):
    with pytest.raises(ConfigError, match="needs a value"):
        compute_fertility(data_dir, "train", "constant")
    with pytest.raises(ConfigError, match="takes no value"):
        compute_fertility(data_dir, "train", "guided", value=2)
    with pytest.raises(ConfigError, match="predicted.*trained fertility predictor"):
        compute_fertility(data_dir, "train", "predicted")
    with pytest.raises(DataError, match="no subword source for split 'test'"):
        compute_fertility(data_dir, "test", "constant", value=1)
    (data_dir / "align" / "valid.subword.align").unlink()
    with pytest.raises(DataError, match="scanmt align --data"):
        compute_fertility(data_dir, "valid", "actual")
    # a link outside the sentence names the alignment file and line
    (data_dir / "align" / "valid.subword.align").write_text("0-0 5-1\n")
    with pytest.raises(DataError, match=r"valid\.subword\.align:1: .*source index 5 out of range"):
        compute_fertility(data_dir, "valid", "actual")


def test_compute_predicted_with_predictor(data_dir):
    res = compute_fertility(
        data_dir, "valid", "predicted", predictor=lambda s: [[1.5] * len(x) for x in s], predictor_id="abc"
    )
    assert res.values == [[1.5, 1.5]] and res.path.name == "valid.predicted-abc.fert"


def test_cli(data_dir, capsys):
    assert main(["fertility", "--data", str(data_dir), "--strategy", "constant", "--value", "2"]) == 0
    out = capsys.readouterr().out
    assert "train" in out and "valid" in out and "2.00" in out
    assert (data_dir / "fertility" / "valid.constant-2.fert").read_text() == "2 2\n"
    assert main(["fertility", "--data", str(data_dir), "--strategy", "guided", "--splits", "valid"]) == 0
    assert main(["fertility", "--data", str(data_dir), "--strategy", "guided", "--splits", "valid"]) == 0
    assert "(cached)" in capsys.readouterr().out
    assert main(["fertility", "--data", str(data_dir), "--strategy", "predicted"]) == 2
    assert "predicted" in capsys.readouterr().err
    assert main(["fertility", "--data", str(data_dir), "--strategy", "constant"]) == 2
    assert "--value" in capsys.readouterr().err
    assert main(["fertility", "--data", str(data_dir / "nope"), "--strategy", "actual"]) == 2
    assert "meta.json" in capsys.readouterr().err
