"""The BiLSTM encoder under CPU bf16 autocast on a processor without AVX-512, where oneDNN cannot build a bf16
LSTM (a Zen 3 EPYC: ``test_resume_accepts_the_changeable_keys`` failed there with "could not create a primitive
descriptor for the LSTM forward propagation primitive")."""

from __future__ import annotations

import torch
from torch import nn

from scanmt.model.lstm import encoder as lstm_encoder
from scanmt.model.lstm.encoder import BiLSTMEncoder


def _encode(enc: BiLSTMEncoder) -> torch.Tensor:
    src = torch.tensor([[3, 4, 5, 6], [7, 8, 0, 0]])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.is_autocast_enabled("cpu")
        memory, (h, c) = enc(src, torch.tensor([4, 2]))
    assert memory.shape == (2, 4, 8) and h.shape == c.shape == (1, 2, 8)
    return memory


def test_without_avx512_the_lstm_runs_in_fp32_under_bf16_autocast(monkeypatch):
    torch.manual_seed(0)
    enc = BiLSTMEncoder(nn.Embedding(10, 6, padding_idx=0), hidden_size=8, layers=1, dropout=0.0).eval()
    monkeypatch.setattr(torch.cpu, "_is_avx512_supported", lambda: False)
    x = torch.zeros(1, device="cpu")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert lstm_encoder.onednn_lacks_bf16_lstm(x)
    assert not lstm_encoder.onednn_lacks_bf16_lstm(x)  # no autocast: nothing to avoid
    memory = _encode(enc)
    assert memory.dtype == torch.float32
    with torch.no_grad():  # the same as the encoder in fp32 outside autocast
        reference, _ = enc(torch.tensor([[3, 4, 5, 6], [7, 8, 0, 0]]), torch.tensor([4, 2]))
    torch.testing.assert_close(memory, reference)
    monkeypatch.setattr(torch.cpu, "_is_avx512_supported", lambda: True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not lstm_encoder.onednn_lacks_bf16_lstm(x)  # AVX-512: oneDNN's bf16 LSTM is left to run
