"""``benchmarks/attention_storage.py``: the bytes of an attention file's weights under each encoding, checked
against a direct count, and the lossy encodings' errors within their step."""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np

from scanmt.data.attention_file import SentenceAttention, save_attention
from tests.conftest import load_module

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "attention_storage.py"


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_sizes_and_errors_of_each_encoding(tmp_path, capsys):
    bench = load_module(BENCH)
    rng = np.random.default_rng(0)
    dense = [_softmax(rng.normal(size=(t, s))) for t, s in [(7, 9), (12, 5), (3, 14)]]
    dense[0][0, :2] = [1e-9, 1e-3]  # float16 flushes the first to zero, 8 bits both
    dense[0][0, 2] += 1 - dense[0][0].sum()
    sparse = [np.where(a > 0.2, a, 0.0) for a in dense]
    path = tmp_path / "test.attn.npz"
    save_attention(path, [SentenceAttention(a, [f"s{j}" for j in range(a.shape[1])],
                                            [f"h{i}" for i in range(a.shape[0])]) for a in dense])
    arrays = bench.weights(path)
    assert [a.shape for a in arrays] == [a.shape for a in dense]
    rows = {r["name"]: r for r in bench.measure(arrays)}
    now = rows["float32, deflate (the archive now)"]
    assert now["bytes"] == sum(len(zlib.compress(a.astype(np.float32).tobytes(), 6)) for a in arrays)
    assert now["ratio"] == 1.0 and now["max_error"] == 0.0 and now["zeroed"] == 0
    assert rows["float32 byte-shuffled, deflate"]["max_error"] == 0.0
    assert 0 < rows["float16, deflate"]["max_error"] <= 2.0 ** -11
    assert 0 < rows["8-bit steps of 1/255, deflate"]["max_error"] <= 0.5 / 255 + 1e-7
    flat = np.concatenate([a.ravel() for a in arrays])
    assert rows["float16, deflate"]["zeroed"] == int((flat < 2.0 ** -25).sum()) == 1
    assert rows["8-bit steps of 1/255, deflate"]["zeroed"] == int((flat < 0.5 / 255).sum()) >= 2
    assert rows["float16, deflate"]["bytes"] < now["bytes"]
    # exact zeros stay zero, so a sparse attention deflates smaller than a dense one of the same shapes
    assert bench.measure([a.astype(np.float32) for a in sparse])[0]["bytes"] < now["bytes"]
    bench.main([str(path)])
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"{path}: 3 sentences, {sum(a.size for a in dense):,} weights")
    assert [line.split("  ")[0] for line in out[2:]] == list(rows)
