"""Fertility caches written before the registry (issue 54) are still hits: same file names, same keys.

The names and parameters below are what ``scanmt.fertility.compute.compute_fertility`` (the code
before ``scanmt.fertility.strategies``) wrote for this folder; the cached values are replaced by
a marker (7) that no strategy computes here, so getting it back proves the file was reused.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from scanmt.fertility.strategies import compute_fertility, predictor_key

#: (file, strategy, params, keyword arguments) as the old code named and keyed them
OLD = [
    ("{split}.constant-2.5.fert", "constant", {"value": 2.5}, {"value": 2.5}),
    ("{split}.guided-2f094c4c7a.fert", "guided", {"align": "d3eaf81ea6f28e0b", "train_src": "13babe26d863ac82"}, {}),
    ("train.actual-98e42d35ac.fert", "actual", {"align": "d3eaf81ea6f28e0b", "rule": "max1"}, {}),
    ("valid.actual-1a282315b6.fert", "actual", {"align": "e8e3e7f5c6a6812d", "rule": "max1"}, {}),
    ("{split}.predicted-2fe268297b.fert", "predicted", {"predictor": "0123456789abcdef-add1"},
     {"predictor": lambda s: [[1.5] * len(x) for x in s], "predictor_id": "0123456789abcdef-add1"}),
]


@pytest.fixture
def data_dir(fertility_data_dir: Path) -> Path:
    return fertility_data_dir


def _write_old(data_dir: Path, name: str, split: str, strategy: str, params: dict) -> None:
    """A cache file and sidecar as the old code wrote them, values replaced by the marker 7."""
    src = data_dir / f"{split}.bpe.de"
    lines = src.read_text(encoding="utf-8").splitlines()
    (data_dir / "fertility").mkdir(exist_ok=True)
    (data_dir / "fertility" / name).write_text("".join(" ".join("7" for _ in ln.split()) + "\n" for ln in lines))
    side = {"strategy": strategy, "params": params, "split": split, "stats": {},
            "source": {"path": src.name, "sha256": hashlib.sha256(src.read_bytes()).hexdigest()}}
    (data_dir / "fertility" / (name + ".json")).write_text(json.dumps(side))


CASES = [(split, name.format(split=split), *rest) for split in ("train", "valid") for name, *rest in OLD
         if name.startswith(("{split}", split))]


@pytest.mark.parametrize("split,name,strategy,params,kwargs", CASES, ids=[c[1] for c in CASES])
def test_an_old_cache_is_a_hit(data_dir, split, name, strategy, params, kwargs):
    _write_old(data_dir, name, split, strategy, params)
    res = compute_fertility(data_dir, split, strategy, **kwargs)
    assert res.path.name == name and res.reused
    assert {v for vs in res.values for v in vs} == {7.0}


def test_predictor_key_is_the_old_one(tmp_path):
    """The ``predicted`` cache key of a predictor file: the first 16 hex digits of its SHA-256, then ``-add``."""
    p = tmp_path / "best.pt"
    p.write_bytes(b"a predictor")
    assert predictor_key(p, 1.0) == hashlib.sha256(b"a predictor").hexdigest()[:16] + "-add1"
    assert predictor_key(p, 0.5).endswith("-add0.5")
