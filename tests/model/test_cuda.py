"""The model and the search on a CUDA device give what they give on the CPU.

Skipped, with the reason in the summary, where there is no CUDA device (CI has
none); run on a GPU machine with ``pytest tests/model/test_cuda.py tests/ops``.
"""

import pytest
import torch

from scanmt.config import ModelConfig
from scanmt.data.vocab import PAD_ID
from scanmt.decoding.search import SearchSettings, search
from scanmt.model.lstm_model import LSTMModel
from scanmt.model.loss import nmt_loss

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")

TRANSFORMS = ["softmax", "sparsemax", "csoftmax", "csparsemax", "entmax", "centmax"]


def _model(transform: str, coverage: str = "none") -> LSTMModel:
    torch.manual_seed(0)
    cfg = ModelConfig(emb_size=16, hidden_size=16, dropout=0.0)
    cfg.attention.transform = transform
    if transform.startswith("c"):
        cfg.attention.exhaustion = 0.2
    if transform in ("entmax", "centmax"):  # a learned alpha (its gradient is compared too), not 1.5
        cfg.attention.alpha, cfg.attention.learn_alpha = 1.7, "model"
    cfg.coverage.type = coverage
    return LSTMModel(cfg, 15).double()


def _batch():
    src = torch.tensor([[5, 6, 7, 8, 9, 10], [9, 10, 11, PAD_ID, PAD_ID, PAD_ID], [7, 8, PAD_ID, PAD_ID, PAD_ID, PAD_ID]])
    n = torch.tensor([6, 3, 2])
    fert = torch.tensor([[1.0, 2.0, 0.5, 1.0, 1.0, 3.0], [1.0, 1.0, 1.0, 0, 0, 0], [0.7, 2.0, 0, 0, 0, 0]])
    tgt_in = torch.tensor([[2, 11, 12, 13, 6, 7], [2, 13, 5, 9, PAD_ID, PAD_ID], [2, 14, 8, PAD_ID, PAD_ID, PAD_ID]])
    tgt_out = torch.tensor([[11, 12, 13, 6, 7, 3], [13, 5, 9, 3, PAD_ID, PAD_ID], [14, 8, 3, PAD_ID, PAD_ID, PAD_ID]])
    return src, n, fert.double(), tgt_in, tgt_out


def _loss_and_grads(m: LSTMModel, device: str):
    m = m.to(device).train()  # cuDNN's LSTM backward needs training mode; dropout is 0
    src, n, fert, tgt_in, tgt_out = (t.to(device) for t in _batch())
    fert = fert if m.constrained else None
    m.zero_grad()
    out = m(src, n, tgt_in, fert)
    loss = nmt_loss(out.logits, tgt_out)
    loss.backward()
    grads = {k: p.grad.detach().cpu().clone() for k, p in m.named_parameters() if p.grad is not None}
    return loss.detach().cpu(), out.attention.detach().cpu(), grads


@pytest.mark.parametrize("coverage", ["none", "linguistic"])
@pytest.mark.parametrize("transform", TRANSFORMS)
def test_forward_and_backward_match_the_cpu(transform, coverage):
    m = _model(transform, coverage)
    loss0, attn0, g0 = _loss_and_grads(m, "cpu")
    loss1, attn1, g1 = _loss_and_grads(m, "cuda")
    # the model runs in float64, but nmt_loss computes the cross-entropy in float32 by design,
    # so the loss and the gradients agree to float32 rounding; the attention to float64's
    torch.testing.assert_close(loss1, loss0, atol=0, rtol=1e-6)
    torch.testing.assert_close(attn1, attn0, atol=1e-9, rtol=0)
    assert g0.keys() == g1.keys() and g0
    for k in g0:
        torch.testing.assert_close(g1[k], g0[k], atol=1e-6, rtol=1e-5, msg=lambda m, k=k: f"gradient of {k}: {m}")


@pytest.mark.parametrize("transform", TRANSFORMS)
def test_beam_search_matches_the_cpu(transform):
    m = _model(transform).eval()
    src, n, fert, _, _ = _batch()
    fert = fert if m.constrained else None
    kw = dict(beam=4, max_len_a=3.0, max_len_b=4)
    hyps0 = search(m.to("cpu"), src, n, fert, settings=SearchSettings(**kw))
    hyps1 = search(m.to("cuda"), src.cuda(), n.cuda(), None if fert is None else fert.cuda(), settings=SearchSettings(**kw))
    assert len(hyps0) == len(hyps1) == len(n)
    for h0, h1 in zip(hyps0, hyps1):
        assert h1.tokens == h0.tokens
        assert h1.log_prob == pytest.approx(h0.log_prob, abs=1e-9)
        torch.testing.assert_close(h1.attention.cpu(), h0.attention, atol=1e-9, rtol=0)
