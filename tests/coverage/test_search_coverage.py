"""Beam search with CovVector models and CovPenalty: state reordering, early finishes, both penalty modes."""

import math

import pytest
import torch

from scanmt.config import ModelConfig
from scanmt.model.lstm.config import CoverageConfig
from scanmt.data.vocab import BOS_ID, EOS_ID, PAD_ID
from scanmt.decoding.penalties import coverage_penalty, length_penalty
from scanmt.decoding.search import SearchSettings, rescore, search, search_encoded
from scanmt.model.lstm.decoder import LSTMEncoderOutput, LSTMState
from scanmt.model.lstm.model import LSTMModel

VARIANTS = [("none", 1), ("linguistic", 1), ("linguistic_fertility", 1), ("nn", 1), ("nn_gru", 1), ("nn_gru", 10)]
V = 14


def _model(cov, dim=1, transform="softmax", score="general", seed=0, eos_bias=0.0, peaky=False):
    torch.manual_seed(seed)
    cfg = ModelConfig(emb_size=16, hidden_size=16, dropout=0.0)
    cfg.attention.transform, cfg.attention.score = transform, score
    cfg.coverage = CoverageConfig(type=cov, dim=dim)
    m = LSTMModel(cfg, V).eval()
    with torch.no_grad():
        if m.decoder.covvector is not None:  # make coverage matter for the attention
            m.decoder.covvector.V.weight.normal_(0.0, 1.5)
        if peaky:  # state-dependent, peaked output distributions: hypotheses finish at different steps
            m.generator.weight.copy_(torch.randn(m.generator.weight.shape, generator=torch.Generator().manual_seed(7)) * 3)
        m.generator.bias[EOS_ID] += eos_bias
    return m


def _src():
    src = torch.tensor([[5, 6, 7, 8, 9, 10], [9, 10, 11, PAD_ID, PAD_ID, PAD_ID], [7, 12, PAD_ID, PAD_ID, PAD_ID, PAD_ID]])
    n = torch.tensor([6, 3, 2])
    fert = torch.tensor([[1.0, 2.0, 0.5, 1.0, 1.0, 3.0], [1.0, 1.0, 1.0, 0, 0, 0], [0.7, 2.0, 0, 0, 0, 0]])
    return src, n, fert


def _fert(m, fert):
    return fert if m.constrained else None


def _forced(m, src, n, fert, b, tokens):
    """Teacher-forced log P and attention of ``tokens + </s>`` for sentence ``b``."""
    tgt_in = torch.tensor([[BOS_ID] + tokens])
    L = int(n[b])
    f = fert[b : b + 1, :L] if fert is not None else None
    with torch.no_grad():
        out = m(src[b : b + 1, :L], n[b : b + 1], tgt_in, f)
    logp = torch.log_softmax(out.logits.float(), -1)[0]
    lp = float(logp.gather(1, torch.tensor(tokens + [EOS_ID]).unsqueeze(1)).sum())
    return lp, out.attention[0]


# ------------------------------------------------------------------ reindexing
def test_state_and_encoder_reindexing_moves_the_covvector_state():
    st = LSTMState(torch.arange(3.0).view(3, 1), (torch.zeros(3, 2),), (torch.zeros(3, 2),), torch.zeros(3, 2),
                   covvector=torch.arange(3.0).view(3, 1, 1))
    idx = torch.tensor([2, 2, 0])
    r = st.index_select(idx)
    assert r.covvector.flatten().tolist() == [2.0, 2.0, 0.0] and r.attention_sum.flatten().tolist() == [2.0, 2.0, 0.0]
    assert LSTMState(st.attention_sum, st.h, st.c, st.feed).index_select(idx).covvector is None
    enc = LSTMEncoderOutput(torch.zeros(3, 1, 2), torch.ones(3, 1, dtype=torch.bool), None, keys=torch.zeros(3, 1, 2),
                            covvector_features=torch.arange(3.0).view(3, 1, 1))
    e = enc.index_select(idx)
    assert e.covvector_features.flatten().tolist() == [2.0, 2.0, 0.0] and e.fertility is None


@pytest.mark.parametrize("cov, dim", VARIANTS + [("linguistic_fertility", "csparsemax"), ("nn_gru", "sparsemax")])
def test_every_finished_hypothesis_matches_forced_decoding(cov, dim, monkeypatch):
    """Coverage (and beta) follow the backpointers: each n-best entry, including those that finished
    early, has exactly the attention and log P that teacher forcing of its tokens gives."""
    transform = dim if isinstance(dim, str) else "softmax"
    dim = 1 if isinstance(dim, str) else dim
    # an </s> bias that makes hypotheses finish at different lengths (the point of the test)
    for eos_bias in (1.0, 0.5, 0.0, 1.5, -0.5, 2.0, -1.0):
        m = _model(cov, dim, transform=transform, score="mlp" if cov == "nn" else "general", eos_bias=eos_bias, peaky=True)
        src, n, fert = _src()
        enc = m.encode(src, n, _fert(m, fert))
        state = m.init_state(enc)
        nbest = search_encoded(m, enc, state, n, settings=SearchSettings(beam=4, max_len_a=2.0, max_len_b=4))
        lengths = {len(h.tokens) for hyps in nbest for h in hyps}
        if min(lengths) < max(lengths) and max(lengths) >= 3:
            break
    else:
        pytest.fail(f"no </s> bias gave early finishes (lengths {sorted(lengths)})")
    reorders = []
    orig = LSTMState.index_select

    def spy(self, idx):
        reorders.append(idx.clone())
        return orig(self, idx)

    monkeypatch.setattr(LSTMState, "index_select", spy)
    nbest = search_encoded(m, enc, state, n, settings=SearchSettings(beam=4, max_len_a=2.0, max_len_b=4))
    monkeypatch.undo()
    assert any(not torch.equal(i.sort().values, i) for i in reorders[1:]), "the beam never reordered"
    lengths = set()
    for b, hyps in enumerate(nbest):
        assert len(hyps) >= 4
        J = int(n[b])
        for h in hyps:
            lengths.add(len(h.tokens))
            lp, att = _forced(m, src, n, _fert(m, fert), b, h.tokens)
            assert math.isclose(lp, h.log_prob, rel_tol=1e-4, abs_tol=1e-4), (b, h.tokens)
            torch.testing.assert_close(att, h.attention, rtol=1e-4, atol=1e-5)
            assert h.attention_sum.shape == (J,)  # real words only: no padding, no sink
            torch.testing.assert_close(h.attention_sum, h.attention[:, :J].sum(0), rtol=1e-4, atol=1e-5)
    assert min(lengths) < max(lengths) and max(lengths) >= 3, f"want early finishes, got lengths {sorted(lengths)}"


# ------------------------------------------------------------------ greedy equivalence
@pytest.mark.parametrize("cov, dim", VARIANTS)
@pytest.mark.parametrize("mode", ["rescore", "step"])
def test_beam_one_without_penalties_equals_greedy(cov, dim, mode):
    m = _model(cov, dim, peaky=True)
    src, n, _ = _src()
    g = search(m, src, n, settings=SearchSettings(beam=1))
    b = search(m, src, n, settings=SearchSettings(beam=1, penalty_mode=mode, length_alpha=0.0, coverage_beta=0.0))
    for x, y in zip(g, b):
        assert x.tokens == y.tokens
        assert math.isclose(x.log_prob, y.log_prob, rel_tol=1e-5, abs_tol=1e-5)
        torch.testing.assert_close(x.attention, y.attention)
        torch.testing.assert_close(x.attention_sum, y.attention_sum)


# ------------------------------------------------------------------ scores
@pytest.mark.parametrize("mode", ["rescore", "step"])
@pytest.mark.parametrize("transform", ["softmax", "sparsemax", "csparsemax"])
def test_scores_are_log_p_over_lp_plus_cp(mode, transform):
    m = _model("linguistic", transform=transform, eos_bias=1.0, peaky=True)
    src, n, fert = _src()
    enc = m.encode(src, n, _fert(m, fert))
    state = m.init_state(enc)
    nbest = search_encoded(m, enc, state, n, settings=SearchSettings(beam=3, length_alpha=0.6, coverage_beta=0.8, penalty_mode=mode))
    for b, hyps in enumerate(nbest):
        J = int(n[b])
        scores = [h.score for h in hyps]
        assert scores == sorted(scores, reverse=True)
        for h in hyps:
            beta = h.attention[:, :J].sum(0)
            cp = 0.8 * sum(math.log(max(0.1, min(1.0, float(x)))) for x in beta)
            expected = h.log_prob / ((5 + len(h.tokens) + 1) / 6) ** 0.6 + cp
            assert math.isfinite(h.score)
            assert math.isclose(h.score, expected, rel_tol=1e-4, abs_tol=1e-4)


def test_rescoring_one_decode_equals_decoding_per_setting():
    """penalty_mode=rescore: the beam does not depend on (alpha, beta), so re-ranking is exact (tune-penalties)."""
    m = _model("nn_gru", 2, transform="sparsemax", eos_bias=1.0, peaky=True)
    src, n, _ = _src()
    enc = m.encode(src, n)
    state = m.init_state(enc)
    nbest = search_encoded(m, enc, state, n, settings=SearchSettings(beam=4))
    for a, b in [(0.0, 0.0), (0.6, 0.0), (0.0, 1.0), (1.0, 0.4)]:
        fresh = search(m, src, n, settings=SearchSettings(beam=4, length_alpha=a, coverage_beta=b))
        for x, y in zip(rescore(nbest, length_alpha=a, coverage_beta=b), fresh):
            assert x.tokens == y.tokens and math.isclose(x.score, y.score, rel_tol=1e-6)


def _reference_beam(m, src, n, fert, K, alpha, beta, mode, max_len, min_len):
    """One sentence, unbatched, written from the documented rules (search.py docstring)."""
    enc = m.encode(src, n, fert)
    state = m.init_state(enc)
    words = torch.arange(enc.mask.size(1)).unsqueeze(0) < n.unsqueeze(1)
    live = [(0.0, [], state)]
    finished = []
    for t in range(max_len):
        cands = []
        for acc, toks, st in live:
            y = torch.tensor([toks[-1] if toks else BOS_ID])
            h, _, st2 = m.decoder.step(m.decoder.emb(y), st, enc)
            logp = torch.log_softmax(m.generator(h).float(), -1)[0]
            cp = float(coverage_penalty(st2.attention_sum, words, beta, 0.1)[0])
            for w in range(V):
                if t + 1 >= max_len and w != EOS_ID:
                    continue
                if t + 1 < max_len and t < min_len and w == EOS_ID:
                    continue
                s = acc + float(logp[w])
                r = s / float(length_penalty(t + 1, alpha)) + cp if mode == "step" else s
                cands.append((r, s, toks + [w], st2, cp))
        cands.sort(key=lambda c: -c[0])
        top = cands[: 2 * K]
        for i, (r, s, toks, st2, cp) in enumerate(top):
            if toks[-1] == EOS_ID and i < K:
                finished.append((s / float(length_penalty(len(toks), alpha)) + cp, toks[:-1]))
        if len(finished) >= K:
            break
        live = [(s, toks, st2) for r, s, toks, st2, _ in top if toks[-1] != EOS_ID][:K]
    return max(finished, key=lambda f: f[0])


@pytest.mark.parametrize("min_len", [0, 1, 2])
@pytest.mark.parametrize("mode", ["rescore", "step"])
@pytest.mark.parametrize("cov", ["linguistic", "nn_gru"])
def test_batched_beam_matches_an_unbatched_reference(mode, cov, min_len):
    m = _model(cov, 1, seed=2, eos_bias=1.0, peaky=True)
    src, n, _ = _src()
    with torch.no_grad():
        hyps = search(m, src, n, settings=SearchSettings(beam=3, length_alpha=0.8, coverage_beta=1.0, penalty_mode=mode, max_len_a=1.0, max_len_b=3, min_len=min_len))
        for b, h in enumerate(hyps):
            L = int(n[b])
            ref_score, ref_tokens = _reference_beam(
                m, src[b : b + 1, :L], n[b : b + 1], None, 3, 0.8, 1.0, mode, max_len=L + 3, min_len=min_len
            )
            assert h.tokens == ref_tokens
            assert math.isclose(h.score, ref_score, rel_tol=1e-4, abs_tol=1e-4)


def test_step_mode_penalties_change_the_search():
    """In step mode the penalties steer which hypotheses survive, not only the final choice
    (its exact rules are checked against the reference above)."""
    m = _model("linguistic", transform="sparsemax", seed=4, peaky=True, eos_bias=1.0)
    with torch.no_grad():
        m.decoder.attention.W.weight.mul_(8)  # peaked attention: coverage differs between hypotheses
    src, n, _ = _src()
    kw = dict(beam=4, length_alpha=0.0, coverage_beta=2.0, max_len_a=1.0, max_len_b=2)
    step = search(m, src, n, settings=SearchSettings(penalty_mode="step", **kw))
    resc = search(m, src, n, settings=SearchSettings(penalty_mode="rescore", **kw))
    assert [h.tokens for h in step] != [h.tokens for h in resc]
    assert all(math.isfinite(h.score) for h in step + resc)
    off = dict(kw, coverage_beta=0.0)
    assert [h.tokens for h in search(m, src, n, settings=SearchSettings(penalty_mode="step", **off))] == [
        h.tokens for h in search(m, src, n, settings=SearchSettings(penalty_mode="rescore", **off))
    ]
