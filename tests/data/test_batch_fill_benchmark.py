"""``benchmarks/batch_fill.py`` on the small prepared Multi30k subset: one row per batch size and sort, the counts
those of :meth:`ParallelData.token_batches`, and the fill a share of real tokens."""

from __future__ import annotations

import sys
from pathlib import Path

from scanmt.data.dataset import ParallelData
from scanmt.data.pipeline import TextPipeline
from tests.conftest import load_module

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "batch_fill.py"


def test_counts_and_fill_per_sort(small_data_dir, monkeypatch, capsys):
    bench = load_module(BENCH)
    monkeypatch.setattr(sys, "argv", ["batch_fill.py", "--data", str(small_data_dir), "--src", "de", "--tgt", "en",
                                      "--batch-tokens", "600", "1200"])
    bench.main()
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[2:]]
    assert [(r[0], r[1]) for r in rows] == [("600", "source"), ("600", "longest"), ("1200", "source"),
                                            ("1200", "longest")]
    pipe = TextPipeline.from_data_dir(small_data_dir, "de", "en")
    train = ParallelData.from_files(small_data_dir / "train.bpe.de", small_data_dir / "train.bpe.en", pipe.vocab,
                                    max_len=80, limit=0)
    for r in rows:
        batches = train.token_batches(int(r[0]), seed=1, epoch=1, sort=r[1])
        assert int(r[2]) == len(batches) and 0 < float(r[3]) <= 1
        real = sum(sum(train._cost(i)) for b in batches for i in b)
        assert float(r[3]) == round(real / sum(len(b) * (max(train._cost(i)[0] for i in b) + max(
            train._cost(i)[1] for i in b)) for b in batches), 3)
    assert rows[0][4] == "1.000" and rows[2][4] == "1.000"
