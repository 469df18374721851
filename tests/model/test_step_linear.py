"""Deferred per-step weight gradients equal plain autograd's, alone and inside the model."""

import pytest
import torch

from scanmt.config import ModelConfig
from scanmt.data.vocab import PAD_ID
from scanmt.model.lstm.model import LSTMModel
from scanmt.model.loss import nmt_loss
from scanmt.model.lstm.step_linear import DeferredLinear


def test_recurrence_gradients_match_plain_autograd():
    torch.manual_seed(0)
    W = torch.randn(6, 4, dtype=torch.float64, requires_grad=True)
    R = 0.3 * torch.randn(6, 6, dtype=torch.float64)
    xs = [torch.randn(3, 4, dtype=torch.float64, requires_grad=True) for _ in range(5)]

    def run(lin):
        h = torch.zeros(3, 6, dtype=torch.float64)
        for x in xs:
            h = torch.tanh(lin(x) + h @ R)
        return h.pow(2).sum()

    plain = torch.autograd.grad(run(lambda x: x @ W.t()), [W, *xs])
    deferred = torch.autograd.grad(run(DeferredLinear(W)), [W, *xs])
    for a, b in zip(plain, deferred):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_gradcheck_float64():
    torch.manual_seed(1)
    W = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    x1 = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    x2 = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)

    def f(W, x1, x2):
        lin = DeferredLinear(W)
        return torch.cat([lin(x1).sin(), lin(x2) ** 2])

    assert torch.autograd.gradcheck(f, (W, x1, x2))


def test_weight_also_used_directly_accumulates_both_paths():
    W = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
    x = torch.randn(2, 4, dtype=torch.float64)
    lin = DeferredLinear(W)
    (lin(x).sum() + (W ** 2).sum()).backward()
    torch.testing.assert_close(W.grad, torch.ones(2, 4, dtype=torch.float64).t().mm(x) + 2 * W.detach())


def test_autocast_falls_back_to_plain_linear():
    W = torch.randn(4, 3, requires_grad=True)
    x = torch.randn(2, 3)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = DeferredLinear(W)(x)
    assert y.dtype == torch.bfloat16
    y.float().sum().backward()
    torch.testing.assert_close(W.grad, torch.ones(2, 4).t().mm(x), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("transform", ["softmax", "csparsemax"])
def test_model_gradients_match_the_undeferred_decoder(transform):
    torch.manual_seed(0)
    cfg = ModelConfig(emb_size=16, hidden_size=16, layers=2, dropout=0.0)
    cfg.attention.transform = transform
    m = LSTMModel(cfg, 20).double()
    src = torch.tensor([[5, 6, 7, 8], [9, 10, PAD_ID, PAD_ID]])
    src_len = torch.tensor([4, 2])
    tgt_in = torch.tensor([[2, 11, 12], [2, 13, PAD_ID]])
    tgt_out = torch.tensor([[11, 12, 3], [13, 3, PAD_ID]])
    fert = torch.tensor([[1.0, 2.0, 1.0, 1.0], [2.0, 1.0, 0.0, 0.0]], dtype=torch.float64)
    fert = fert if m.constrained else None

    deferred = torch.autograd.grad(nmt_loss(m(src, src_len, tgt_in, fert).logits, tgt_out), list(m.parameters()))

    enc = m.encode(src, src_len, fert)

    state = m.init_state(enc)  # the same pass, one plain F.linear per step
    outs = []
    for y in m.decoder.emb(tgt_in).unbind(1):
        h, _, state = m.decoder.step(y, state, enc)
        outs.append(h)
    plain = torch.autograd.grad(nmt_loss(m.generator(torch.stack(outs, 1)), tgt_out), list(m.parameters()))
    for (name, _), a, b in zip(m.named_parameters(), plain, deferred):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12, msg=name)
