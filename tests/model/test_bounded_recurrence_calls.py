"""Both architectures compute their bounded attention with ``scanmt.ops.bounded_recurrence``: the
Transformer once per bounded layer over all target positions (teacher forcing) or over the one position of
a decoding step, the LSTM once per step.  (That its torch backend leaves every output and gradient bit for
bit as the per-position loop it replaced was checked when it was introduced; ``tests/ops/test_recurrence.py``
checks the op.)"""

from __future__ import annotations

import pytest
import torch

import scanmt.ops
from scanmt.config import ModelConfig
from scanmt.model.transformer.config import TransformerConfig
from scanmt.data.vocab import PAD_ID
from scanmt.model.lstm.model import LSTMModel
from scanmt.model.transformer.model import TransformerModel


@pytest.fixture
def calls(monkeypatch) -> list:
    seen: list = []
    real = scanmt.ops.bounded_recurrence

    def spy(z, *args, **kwargs):
        seen.append((tuple(z.shape), kwargs.get("shared", False)))
        return real(z, *args, **kwargs)

    monkeypatch.setattr(scanmt.ops, "bounded_recurrence", spy)
    return seen


def _batch():
    src = torch.tensor([[5, 6, 7, 8], [9, 10, PAD_ID, PAD_ID]])
    n = torch.tensor([4, 2])
    fert = torch.tensor([[1.0, 2.0, 0.5, 1.0], [1.0, 1.0, 0.0, 0.0]])
    tgt_in = torch.tensor([[2, 11, 12, 13, 6], [2, 13, 5, PAD_ID, PAD_ID]])
    return src, n, fert, tgt_in


@pytest.mark.parametrize("bounded", ["all", "shared"])
def test_transformer_calls_the_op_once_per_bounded_layer(calls, bounded: str) -> None:
    cfg = ModelConfig(arch="transformer", emb_size=16, hidden_size=16, dropout=0.0,
                      transformer=TransformerConfig(heads=4, ff_size=32, encoder_layers=1, decoder_layers=2,
                                                    attention_dropout=0.0, bounded=bounded))
    cfg.attention.transform = "csparsemax"
    cfg.attention.exhaustion = 0.2
    m = TransformerModel(cfg, 15).eval()
    src, n, fert, tgt_in = _batch()
    m(src, n, tgt_in, fert)
    layers = 2 if bounded == "all" else 1
    assert calls == [((2, 4, 5, 5), bounded == "shared")] * layers  # [N, heads, T, S + sink]
    calls.clear()
    enc = m.encode(src, n, fert)
    m.step(tgt_in[:, 0], m.init_state(enc), enc)
    assert calls == [((2, 4, 1, 5), bounded == "shared")] * layers


def test_lstm_calls_the_op_once_per_step(calls) -> None:
    cfg = ModelConfig(emb_size=16, hidden_size=16, dropout=0.0)
    cfg.attention.transform = "csoftmax"
    m = LSTMModel(cfg, 15).eval()
    src, n, fert, tgt_in = _batch()
    m(src, n, tgt_in, fert)
    assert calls == [((2, 1, 5), False)] * tgt_in.shape[1]  # [B, T = 1, S + sink]
