"""The guided table is learned once per training run, cached fertilities or not (issue 54)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scanmt.data.dataset import ParallelData
from scanmt.fertility.providers import GuidedFertility
from tests.conftest import tiny_config


@pytest.fixture
def data_dir(fertility_data_dir: Path) -> Path:
    return fertility_data_dir


@pytest.fixture
def train_spy(monkeypatch) -> list[int]:
    """Counts the calls of :meth:`GuidedFertility.train`."""
    calls: list[int] = []
    real = GuidedFertility.train.__func__

    def spy(cls, src, links):
        calls.append(len(src))
        return real(cls, src, links)

    monkeypatch.setattr(GuidedFertility, "train", classmethod(spy))
    return calls


def _setup(data_dir: Path):
    from scanmt.fertility.setup import setup_fertility

    cfg = tiny_config(data_dir, model__attention__transform="csoftmax",
                      model__attention__fertility={"strategy": "guided"})
    train = ParallelData([[4, 5, 6], [4, 7]], None)
    valid = ParallelData([[4, 8]], None)
    return setup_fertility(cfg, train, valid)


def test_guided_table_trained_once_per_training_run(data_dir, train_spy):
    fert = _setup(data_dir)  # a cache miss for train and valid
    assert train_spy == [2], f"the guided table was trained {len(train_spy)} times"
    assert fert.train.fertility == [[1.0, 2.0, 1.0], [1.0, 1.0]] and fert.valid.fertility == [[1.0, 1.0]]
    assert fert.provider.state()["table"] == {"▁ein": 1, "▁Hund": 2, "e": 0, "▁Mann": 0}
    _setup(data_dir)  # cache hits: the checkpoint still needs the table, learned once
    assert train_spy == [2, 2]
