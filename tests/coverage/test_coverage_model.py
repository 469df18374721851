"""CovVector (Tu et al. 2016) in the model: parameters, updates, scores, training, transforms."""

import pytest
import torch

from scanmt.config import Config, ModelConfig
from scanmt.model.lstm.config import CoverageConfig
from scanmt.data.vocab import PAD_ID
from scanmt.errors import ConfigError
from scanmt.model.lstm.covvector import build_covvector, expected_parameters
from scanmt.model.lstm.model import LSTMModel
from scanmt.model.loss import nmt_loss

VARIANTS = [("linguistic", 1), ("linguistic_fertility", 1), ("nn", 1), ("nn_gru", 1), ("nn_gru", 10)]


def _cfg(cov="none", dim=1, score="general", transform="softmax", hidden=16):
    cfg = ModelConfig(emb_size=hidden, hidden_size=hidden, dropout=0.0)
    cfg.attention.score, cfg.attention.transform = score, transform
    cfg.coverage = CoverageConfig(type=cov, dim=dim)
    return cfg


def _model(cov="none", dim=1, seed=0, **kw):
    torch.manual_seed(seed)
    return LSTMModel(_cfg(cov, dim, **kw), 20)


def _batch():
    src = torch.tensor([[5, 6, 7, 8], [9, 10, PAD_ID, PAD_ID]])
    src_len = torch.tensor([4, 2])
    tgt_in = torch.tensor([[2, 11, 12, 13], [2, 13, 14, PAD_ID]])
    tgt_out = torch.tensor([[11, 12, 13, 3], [13, 14, 3, PAD_ID]])
    return src, src_len, tgt_in, tgt_out


def _n(module):
    return sum(p.numel() for p in module.parameters())


def _run_states(m, src, src_len, tgt_in, fert=None):
    enc = m.encode(src, src_len, fert)
    state = m.init_state(enc)
    states, attns = [state], []
    for t in range(tgt_in.size(1)):
        _, a, state = m.decoder.step(m.decoder.emb(tgt_in[:, t]), state, enc)
        states.append(state)
        attns.append(a)
    return enc, states, torch.stack(attns, 1)


# ------------------------------------------------------------------ parameters
@pytest.mark.parametrize("cov, dim", VARIANTS)
@pytest.mark.parametrize("score", ["general", "mlp"])
def test_parameter_count_matches_the_formula(cov, dim, score):
    base = _n(_model(score=score))
    m = _model(cov, dim, score=score)
    added = _n(m) - base
    assert added == expected_parameters(m.cfg.coverage, 16, 16) == _n(m.decoder.covvector)


@pytest.mark.parametrize(
    "cov, dim, paper_k",
    # Tu et al. 2016, Table 1 / Section 5.1: hidden n = 1000, annotations 2n = 2000
    [("linguistic", 1, 1), ("linguistic_fertility", 1, 3), ("nn", 1, 4), ("nn_gru", 1, 10), ("nn_gru", 10, 100)],
)
def test_parameter_count_matches_tu_et_al(cov, dim, paper_k):
    c = build_covvector(CoverageConfig(type=cov, dim=dim), query_size=1000, memory_size=2000)
    assert round(_n(c) / 1000) == paper_k
    if cov == "linguistic_fertility":
        assert _n(c.U_f) == 2000  # "2K for fertility model"
    if cov == "nn_gru":
        gating = _n(c) - _n(c.V) - dim * (dim + 1 + 2000 + 1000 + 1)  # z and r blocks
        assert round(gating / 1000) == 6 * dim  # "6K x d for gating"


def test_no_coverage_adds_nothing():
    m = _model()
    assert m.decoder.covvector is None
    assert not [k for k in m.state_dict() if "coverage" in k]
    src, src_len, tgt_in, _ = _batch()
    enc, states, _ = _run_states(m, src, src_len, tgt_in)
    assert enc.covvector_features is None and all(s.covvector is None for s in states)


@pytest.mark.parametrize("cov, dim", VARIANTS)
@pytest.mark.parametrize("score", ["general", "mlp"])
def test_zero_coverage_weights_give_the_plain_model(cov, dim, score):
    """V C enters only the scores: with V = 0 the model is the coverage-free one."""
    plain = _model(score=score).eval()
    m = _model(cov, dim, seed=1, score=score).eval()
    missing = m.load_state_dict(plain.state_dict(), strict=False).missing_keys
    assert missing and all(k.startswith("decoder.covvector.") for k in missing)
    with torch.no_grad():
        m.decoder.covvector.V.weight.zero_()
    src, src_len, tgt_in, _ = _batch()
    a, b = plain(src, src_len, tgt_in), m(src, src_len, tgt_in)
    torch.testing.assert_close(a.logits, b.logits)
    torch.testing.assert_close(a.attention, b.attention)
    with torch.no_grad():
        m.decoder.covvector.V.weight.fill_(0.5)
    assert not torch.allclose(m(src, src_len, tgt_in).attention, a.attention)


# ------------------------------------------------------------------ updates
def test_linguistic_coverage_is_the_cumulative_attention():
    m = _model("linguistic").eval()
    src, src_len, tgt_in, _ = _batch()
    _, states, attn = _run_states(m, src, src_len, tgt_in)
    for t, s in enumerate(states):
        torch.testing.assert_close(s.covvector.squeeze(-1), attn[:, :t].sum(1) if t else torch.zeros(2, 4))
        torch.testing.assert_close(s.covvector.squeeze(-1), s.attention_sum)


def test_fertility_coverage_divides_by_phi():
    m = _model("linguistic_fertility").eval()
    m.decoder.covvector.scale = 2.0
    src, src_len, tgt_in, _ = _batch()
    enc, states, attn = _run_states(m, src, src_len, tgt_in)
    phi = enc.covvector_features.squeeze(-1)
    manual = 2.0 * torch.sigmoid(enc.memory @ m.decoder.covvector.U_f.weight.squeeze(0))
    torch.testing.assert_close(phi, manual)
    assert torch.all((phi > 0) & (phi < 2.0))
    torch.testing.assert_close(states[-1].covvector.squeeze(-1), attn.sum(1) / phi)


@pytest.mark.parametrize("cov, dim", [("nn", 1), ("nn_gru", 1), ("nn_gru", 10)])
def test_nn_coverage_state_shape_and_padding(cov, dim):
    m = _model(cov, dim).eval()
    src, src_len, tgt_in, _ = _batch()
    _, states, _ = _run_states(m, src, src_len, tgt_in)
    for s in states:
        assert s.covvector.shape == (2, 4, dim)
        assert torch.all(s.covvector[1, 2:] == 0), "padding keeps zero coverage"
    assert states[-1].covvector[:, :2].abs().sum() > 0
    assert states[-1].covvector.abs().max() <= 1.0  # tanh / convex GRU combination of tanh values


def test_nn_coverage_depends_on_its_inputs():
    """C_t = f(C_{t-1}, alpha_tj, h_j, s): changing alpha or the decoder state changes C_t."""
    c = build_covvector(CoverageConfig(type="nn_gru", dim=3), query_size=8, memory_size=6)
    torch.manual_seed(0)
    memory, mask = torch.randn(2, 5, 6), torch.ones(2, 5, dtype=torch.bool)
    feats, cov = c.precompute(memory), torch.rand(2, 5, 3)
    alpha, query = torch.softmax(torch.randn(2, 5), -1), torch.randn(2, 8)
    base = c.update(cov, alpha, feats, query, mask)
    assert not torch.allclose(base, c.update(cov, alpha.flip(-1), feats, query, mask))
    assert not torch.allclose(base, c.update(cov, alpha, feats, -query, mask))
    assert not torch.allclose(base, c.update(cov * 0, alpha, feats, query, mask))


# ------------------------------------------------------------------ training
@pytest.mark.parametrize("cov, dim", VARIANTS)
@pytest.mark.parametrize("score", ["general", "mlp"])
def test_every_variant_trains_on_a_tiny_batch(cov, dim, score):
    m = _model(cov, dim, score=score)
    opt = torch.optim.Adam(m.parameters(), lr=0.02)
    src, src_len, tgt_in, tgt_out = _batch()
    losses = []
    for _ in range(25):
        loss = nmt_loss(m(src, src_len, tgt_in).logits, tgt_out)
        opt.zero_grad()
        loss.backward()
        grads = [p.grad for p in m.decoder.covvector.parameters()]
        assert all(g is not None and torch.isfinite(g).all() for g in grads)
        opt.step()
        losses.append(float(loss.detach()))
    assert losses[-1] < 0.5 * losses[0], losses
    assert any(float(g.abs().sum()) > 0 for g in grads), "coverage parameters get gradients"


# ------------------------------------------------------------------ transforms
@pytest.mark.parametrize("cov, dim", VARIANTS)
@pytest.mark.parametrize("transform", ["sparsemax", "csoftmax", "csparsemax"])
def test_coverage_combines_with_every_transform(cov, dim, transform):
    m = _model(cov, dim, transform=transform, score="mlp" if cov == "nn" else "general").eval()
    with torch.no_grad():
        m.decoder.covvector.V.weight.normal_(0, 2.0)
    src, src_len, tgt_in, tgt_out = _batch()
    fert = torch.tensor([[1.0, 2.0, 1.0, 1.0], [1.5, 1.0, 0, 0]]) if m.constrained else None
    out = m(src, src_len, tgt_in, fert)
    S = out.attention.size(2)
    assert S == 4 + int(m.sink)
    torch.testing.assert_close(out.attention.sum(-1), torch.ones(2, 4))
    assert torch.all(out.attention[1, :, 2 + int(m.sink):] == 0)
    assert torch.all(out.attention >= 0)
    if m.constrained:
        beta = out.attention.sum(1)
        assert torch.all(beta[0, :4] <= fert[0] + 1e-5) and torch.all(beta[1, :2] <= fert[1, :2] + 1e-5)
    loss = nmt_loss(out.logits, tgt_out)
    loss.backward()
    assert torch.isfinite(m.decoder.covvector.V.weight.grad).all()


# ------------------------------------------------------------------ config
@pytest.mark.parametrize(
    "section, match",
    [
        ({"model": {"coverage": {"type": "tu"}}}, "model.coverage.type"),
        ({"model": {"coverage": {"type": "nn", "dim": 0}}}, "model.coverage.dim"),
        ({"model": {"coverage": {"type": "linguistic", "dim": 10}}}, "model.coverage.dim"),
        ({"model": {"coverage": {"type": "linguistic_fertility", "fertility_scale": 0}}}, "model.coverage.fertility_scale"),
        ({"decode": {"penalty_mode": "always"}}, "decode.penalty_mode"),
        ({"decode": {"coverage_eps": 0.0}}, "decode.coverage_eps"),
        ({"decode": {"coverage_beta": -0.2}}, "decode.coverage_beta"),
    ],
)
def test_bad_coverage_config_names_the_key(section, match):
    with pytest.raises(ConfigError, match=match):
        Config.from_dict(section)


def test_good_coverage_config_loads():
    cfg = Config.from_dict({"model": {"coverage": {"type": "nn_gru", "dim": 10}},
                            "decode": {"coverage_beta": 0.2, "penalty_mode": "step"}})
    assert cfg.model.coverage.dim == 10 and cfg.decode.penalty_mode == "step"
