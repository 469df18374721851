"""``scanmt.packed_lstm``: both BiLSTMs (the LSTM model's encoder, the fertility predictor) under CPU bf16 autocast.

On a processor without AVX-512 oneDNN cannot build a bf16 LSTM ("could not create a primitive descriptor for the
LSTM forward propagation primitive"), and PyTorch takes oneDNN's path when every sentence of a batch has the same
length.  ``test_resume_accepts_the_changeable_keys`` failed that way on a Zen 3 EPYC; the fertility predictor
crashed the same way there under ``train.precision=bf16``."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pad_packed_sequence

from scanmt import packed_lstm
from scanmt.fertility.predictor.network import FertilityPredictor
from scanmt.model.lstm.encoder import BiLSTMEncoder

#: one batch of mixed lengths and one whose sentences all have the same length (oneDNN's path)
BATCHES = {
    "mixed": (torch.tensor([[3, 4, 5, 6], [7, 8, 0, 0]]), torch.tensor([4, 2])),
    "equal": (torch.tensor([[3, 4, 5, 6], [7, 8, 9, 3]]), torch.tensor([4, 4])),
}


def _encoder() -> nn.Module:
    return BiLSTMEncoder(nn.Embedding(10, 6, padding_idx=0), hidden_size=8, layers=2, dropout=0.0)


def _predictor() -> nn.Module:
    return FertilityPredictor(10, emb_size=6, hidden_size=8, layers=2, dropout=0.0, max_fertility=3)


def _lstm_output(net: nn.Module, src: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """The outputs ``[B, S, 8]`` of the network's own ``nn.LSTM`` (caught by a hook) when the whole network runs."""
    caught = []
    hook = net.rnn.register_forward_hook(lambda module, args, out: caught.append(out[0]))
    try:
        net(src, lengths)
    finally:
        hook.remove()
    (packed,) = caught
    return pad_packed_sequence(packed, batch_first=True, total_length=src.size(1))[0]


def test_the_condition_needs_cpu_bf16_autocast_and_no_avx512(monkeypatch):
    x = torch.zeros(1)
    monkeypatch.setattr(torch.cpu, "_is_avx512_supported", lambda: False)
    assert not packed_lstm.onednn_lacks_bf16_lstm(x)  # no autocast: nothing to avoid
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert packed_lstm.onednn_lacks_bf16_lstm(x)
    monkeypatch.setattr(torch.cpu, "_is_avx512_supported", lambda: True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not packed_lstm.onednn_lacks_bf16_lstm(x)  # AVX-512: oneDNN's bf16 LSTM is left to run


@pytest.mark.parametrize("batch", sorted(BATCHES))
@pytest.mark.parametrize("make", [_encoder, _predictor], ids=["encoder", "predictor"])
def test_without_avx512_the_lstm_runs_in_fp32_under_bf16_autocast(monkeypatch, make, batch):
    torch.manual_seed(0)
    net = make().eval()
    src, lengths = BATCHES[batch]
    monkeypatch.setattr(torch.cpu, "_is_avx512_supported", lambda: False)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = _lstm_output(net, src, lengths)
    assert out.dtype == torch.float32 and out.shape == (2, 4, 8)
    with torch.no_grad():  # the same as the network in fp32 outside autocast
        reference = _lstm_output(net, src, lengths)
    torch.testing.assert_close(out, reference)


@pytest.mark.parametrize("make", [_encoder, _predictor], ids=["encoder", "predictor"])
def test_a_batch_of_equal_lengths_trains_under_bf16_autocast_on_this_processor(make):
    """No monkeypatching: on a processor without AVX-512 this raised before the guard (for the predictor, until
    both networks shared ``run_lstm``); elsewhere oneDNN's bf16 LSTM runs."""
    torch.manual_seed(0)
    net = make().train()
    src, lengths = BATCHES["equal"]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = net(src, lengths)
    out = out[0] if isinstance(out, tuple) else out
    out.float().sum().backward()
    grads = [p.grad for p in net.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)
