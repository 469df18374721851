"""Fertility-bounded attention in the model: bounds, sink, exhaustion, and beam bookkeeping."""

import pytest
import torch

from scanmt.config import ModelConfig
from scanmt.data.vocab import PAD_ID
from scanmt.decoding.search import SearchSettings, search
from scanmt.errors import ConfigError
from scanmt.model.lstm.model import LSTMModel
from scanmt.model.loss import nmt_loss


def _model(transform, exhaustion=0.0, seed=0):
    torch.manual_seed(seed)
    cfg = ModelConfig(emb_size=16, hidden_size=16, dropout=0.0)
    cfg.attention.transform = transform
    cfg.attention.exhaustion = exhaustion
    return LSTMModel(cfg, 15).eval()


def _src():
    src = torch.tensor([[5, 6, 7, 8, 9, 10], [9, 10, 11, PAD_ID, PAD_ID, PAD_ID], [7, PAD_ID, PAD_ID, PAD_ID, PAD_ID, PAD_ID]])
    n = torch.tensor([6, 3, 1])
    fert = torch.tensor([[1.0, 2.0, 0.5, 1.0, 1.0, 3.0], [1.0, 1.0, 1.0, 0, 0, 0], [0.7, 0, 0, 0, 0, 0]])
    return src, n, fert


@pytest.mark.parametrize("transform", ["csoftmax", "csparsemax"])
@pytest.mark.parametrize("beam", [1, 5])
@pytest.mark.parametrize("exhaustion", [0.0, 0.2])
def test_cumulative_attention_respects_fertility_in_search(transform, beam, exhaustion):
    m = _model(transform, exhaustion)
    src, n, fert = _src()
    # long outputs so that bounds bind: allow up to 4x the source length
    hyps = (search(m, src, n, fert, settings=SearchSettings(beam=1, max_len_a=4.0, max_len_b=4)) if beam == 1
            else search(m, src, n, fert, settings=SearchSettings(beam=beam, max_len_a=4.0, max_len_b=4)))
    for b, h in enumerate(hyps):
        L = int(n[b])
        assert h.attention.shape[1] == L + 1, "attention must cover the real tokens and the sink"
        beta = h.attention.sum(0)
        assert torch.all(beta[:L] <= fert[b, :L] + 1e-5), (beta[:L], fert[b, :L])
        torch.testing.assert_close(h.attention.sum(1), torch.ones(h.attention.size(0)))


@pytest.mark.parametrize("transform", ["csoftmax", "csparsemax"])
def test_teacher_forced_attention_respects_fertility_and_padding(transform):
    m = _model(transform)
    src, n, fert = _src()
    tgt_in = torch.randint(5, 15, (3, 12))
    out = m(src, n, tgt_in, fert)
    beta = out.attention.sum(1)  # [B, S+1]
    for b in range(3):
        L = int(n[b])
        assert torch.all(beta[b, :L] <= fert[b, :L] + 1e-5)
        assert torch.all(out.attention[b, :, L + 1:] == 0), "padding after the sink must get exactly zero"


@pytest.mark.parametrize("transform", ["csoftmax", "csparsemax"])
def test_gradients_flow_through_the_bounds_into_earlier_steps(transform):
    m = _model(transform)
    m.train()
    src, n, fert = _src()
    tgt_in = torch.randint(5, 15, (3, 10))
    tgt_out = torch.randint(5, 15, (3, 10))
    out = m(src, n, tgt_in, fert)
    loss = nmt_loss(out.logits, tgt_out)
    loss.backward()
    g = m.decoder.attention.W.weight.grad
    assert g is not None and torch.isfinite(g).all() and g.abs().sum() > 0

    # the attention at a late step depends on the scores of an earlier step only through beta -> u
    enc = m.encode(src, n, fert)
    state = m.init_state(enc)
    q = torch.zeros(3, 16, requires_grad=True)
    emb = m.decoder.emb(tgt_in)
    _, a0, state = m.decoder.step(emb[:, 0] + q, state, enc)
    for t in range(1, 6):
        _, a, state = m.decoder.step(emb[:, t], state, enc)
    a[:, 0].sum().backward()
    assert q.grad is not None and q.grad.abs().sum() > 0


def test_exhaustion_changes_scores_only_for_real_tokens():
    m0, m1 = _model("csparsemax", 0.0, seed=1), _model("csparsemax", 5.0, seed=1)
    src, n, fert = _src()
    tgt_in = torch.randint(5, 15, (3, 4))
    a0, a1 = m0(src, n, tgt_in, fert).attention, m1(src, n, tgt_in, fert).attention
    assert not torch.allclose(a0, a1)
    assert torch.isfinite(a1).all()


def test_constrained_model_needs_fertility_and_exhaustion_needs_constraints():
    m = _model("csparsemax")
    src, n, _ = _src()
    with pytest.raises(ConfigError, match="needs fertilities"):
        m(src, n, torch.randint(5, 15, (3, 4)))
    cfg = ModelConfig()
    cfg.attention.exhaustion = 0.2
    with pytest.raises(ConfigError, match="exhaustion=0.2 needs a constrained transform"):
        LSTMModel(cfg, 10)


def test_sink_on_by_default_only_for_constrained():
    assert _model("csoftmax").sink and _model("csparsemax").sink
    assert not _model("softmax").sink and not _model("sparsemax").sink
