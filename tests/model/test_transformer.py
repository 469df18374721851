"""The Transformer (model.arch: transformer): incremental decoding, teacher forcing, bounded heads, search,
bf16, config errors and checkpoints, on tiny models."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
import torch
from torch.nn import functional as F

from scanmt.config import Config, ModelConfig
from scanmt.choices import BOUNDED_MODES
from scanmt.model.transformer.config import TransformerConfig
from scanmt.data.vocab import EOS_ID, PAD_ID
from scanmt.decoding.search import SearchSettings, search
from scanmt.errors import ConfigError
from scanmt.model.build import build_model
from scanmt.model.interface import DecoderState, EncoderOutput, NMTModel, Step
from scanmt.model.loss import nmt_loss
from scanmt.model.transformer.layers import CrossAttention
from scanmt.model.transformer.model import TransformerModel

V = 30
TRANSFORMS = ("softmax", "sparsemax", "csoftmax", "csparsemax", "entmax", "centmax")
CASES = [(t, m) for t in TRANSFORMS for m in BOUNDED_MODES]


def _cfg(transform="softmax", bounded="last_layer", exhaustion=0.0, **kw) -> ModelConfig:
    t = dict(heads=4, ff_size=32, encoder_layers=2, decoder_layers=2, attention_dropout=0.0, bounded=bounded)
    t.update(kw.pop("transformer", {}))
    cfg = ModelConfig(arch="transformer", emb_size=16, hidden_size=16, dropout=0.0,
                      transformer=TransformerConfig(**t), **kw)
    cfg.attention.transform = transform
    cfg.attention.exhaustion = exhaustion
    return cfg


def _model(transform="softmax", bounded="last_layer", seed=0, dtype=torch.float64, **kw) -> TransformerModel:
    torch.manual_seed(seed)
    exhaustion = 0.2 if transform.startswith("c") else 0.0
    return TransformerModel(_cfg(transform, bounded, exhaustion, **kw), V).to(dtype).eval()


def _batch(constrained: bool, fert_value: float = 0.6):
    src = torch.tensor([[5, 6, 7, 8, 9], [10, 11, 12, PAD_ID, PAD_ID]])
    src_len = torch.tensor([5, 3])
    tgt_in = torch.tensor([[2, 13, 14, 15, 16, 17], [2, 18, 19, 20, PAD_ID, PAD_ID]])
    fert = None
    if constrained:
        fert = (torch.arange(5) < src_len.unsqueeze(1)).double() * fert_value
    return src, src_len, tgt_in, fert


def _steps(m, src, src_len, tgt_in, fert):
    enc = m.encode(src, src_len, fert)
    state = m.init_state(enc)
    lps, atts = [], []
    for y in tgt_in.unbind(1):
        s = m.step(y, state, enc)
        state = s.state
        lps.append(s.log_probs)
        atts.append(s.attention)
    return torch.stack(lps, 1), torch.stack(atts, 1), state


def _forward_equals_steps(m, src, src_len, tgt_in, fert):
    """Assert that teacher forcing gives step-by-step decoding's log-probabilities and attention; return the
    forward output, the steps' attention and their final state."""
    lp, att, state = _steps(m, src, src_len, tgt_in, fert)
    with torch.no_grad():
        out = m(src, src_len, tgt_in, fert)
    real = tgt_in != PAD_ID
    torch.testing.assert_close(F.log_softmax(out.logits, -1)[real], lp[real], atol=1e-5, rtol=0)
    torch.testing.assert_close(out.attention, att, atol=1e-6, rtol=0)
    return out, att, state


# ------------------------------------------------------------------ incremental decoding
@pytest.mark.parametrize("transform,bounded", CASES)
def test_incremental_decoding_equals_full_recompute_of_each_prefix(transform, bounded):
    m = _model(transform, bounded)
    src, src_len, tgt_in, fert = _batch(m.constrained)
    lp, att, _ = _steps(m, src, src_len, tgt_in, fert)
    with torch.no_grad():
        for t in range(1, tgt_in.size(1) + 1):
            out = m(src, src_len, tgt_in[:, :t], fert)  # the prefix alone, recomputed from scratch
            torch.testing.assert_close(F.log_softmax(out.logits[:, -1], -1), lp[:, t - 1], atol=1e-5, rtol=0)
            torch.testing.assert_close(out.attention[:, -1], att[:, t - 1], atol=1e-6, rtol=0)


TOP_ONLY = dict(transformer=dict(transform_layers="last_layer"))


@pytest.mark.parametrize("transform,bounded", [("sparsemax", "last_layer"), ("csparsemax", "last_layer"),
                                               ("csoftmax", "shared"), ("centmax", "one_head")])
def test_incremental_decoding_equals_full_recompute_with_softmax_below_the_last_layer(transform, bounded):
    m = _model(transform, bounded, **TOP_ONLY)
    src, src_len, tgt_in, fert = _batch(m.constrained)
    lp, att, _ = _steps(m, src, src_len, tgt_in, fert)
    with torch.no_grad():
        for t in range(1, tgt_in.size(1) + 1):
            out = m(src, src_len, tgt_in[:, :t], fert)
            torch.testing.assert_close(F.log_softmax(out.logits[:, -1], -1), lp[:, t - 1], atol=1e-5, rtol=0)
            torch.testing.assert_close(out.attention[:, -1], att[:, t - 1], atol=1e-6, rtol=0)


@pytest.mark.parametrize("transform,bounded,kw", [(t, "last_layer", {}) for t in TRANSFORMS]
                         + [("csparsemax", "all", {}), ("csparsemax", "last_layer", TOP_ONLY)])
def test_teacher_forcing_equals_step_by_step(transform, bounded, kw):
    m = _model(transform, bounded, **kw)
    src, src_len, tgt_in, fert = _batch(m.constrained)
    out, att, state = _forward_equals_steps(m, src, src_len, tgt_in, fert)
    # the reported attention: a distribution over the columns (sink last), 0 at padding; attention_sum its sum
    S = src.size(1) + int(m.sink)
    assert out.attention.shape == (2, tgt_in.size(1), S)
    torch.testing.assert_close(out.attention.sum(-1), torch.ones(2, tgt_in.size(1), dtype=torch.float64))
    assert torch.all(out.attention[1, :, 3 + int(m.sink):] == 0)
    torch.testing.assert_close(state.attention_sum, att.sum(1))
    assert state.self_keys[0].shape == (2, 4, tgt_in.size(1), 4)


# ------------------------------------------------------------------ bounds
def _record_cross(m: TransformerModel):
    """Forward hooks on every cross-attention: (module, sums before, weights p [N, h, T, S'], mask, fertility)."""
    seen = []

    def hook(mod, args, out):
        _, _, _, mask, fertility, sums = args
        seen.append((mod, sums, out[1], mask, fertility))

    handles = [layer.cross.register_forward_hook(hook) for layer in m.decoder_layers]
    return seen, handles


@pytest.mark.parametrize("transform", ["csoftmax", "csparsemax", "centmax"])
@pytest.mark.parametrize("bounded", BOUNDED_MODES)
def test_bounded_heads_respect_their_bounds_and_padding_gets_nothing(transform, bounded):
    m = _model(transform, bounded)
    src, src_len, tgt_in, fert = _batch(True, fert_value=0.4)
    enc = m.encode(src, src_len, fert)
    state = m.init_state(enc)
    seen, handles = _record_cross(m)
    binding = 0
    n_bounded_layers = 0
    with torch.no_grad():
        for y in tgt_in.unbind(1):
            seen.clear()
            prev_sum = state.attention_sum
            state = m.step(y, state, enc).state
            n_bounded_layers = 0
            for mod, sums, p, mask, f in seen:
                if p is not None:  # explicit layers: nothing at padding, in any head
                    assert torch.all(p.squeeze(2).masked_select(~mask.unsqueeze(1)) == 0)
                if not mod.n_bounded:
                    continue
                n_bounded_layers += 1
                before = prev_sum.unsqueeze(1) if mod.shared else sums
                if mod.shared:
                    torch.testing.assert_close(sums, before)
                u = (f.unsqueeze(1) - before).clamp_min(0)  # [N, nb or 1, S']
                pb = p[:, : mod.n_bounded, 0]  # [N, nb, S']
                assert torch.all(pb <= u + 1e-9)
                words = ((f > 0) & torch.isfinite(f)).unsqueeze(1)  # real words (no padding, no sink)
                capped = ((pb - u).abs() < 1e-9) & (u > 0) & (u < 1) & words
                binding += int(capped.sum())
    for h in handles:
        h.remove()
    expected = {"all": 2, "last_layer": 1, "one_head": 1, "shared": 1}[bounded]
    assert n_bounded_layers == expected
    assert binding > 0, "the bounds never bound: the test does not test them"
    # the reported attention's own cumulative sum stays under the fertilities (each bounded head's does)
    if bounded != "one_head":
        S = src.size(1)
        assert torch.all(state.attention_sum[:, :S][fert > 0] <= fert[fert > 0] + 1e-9)


def test_heads_per_mode():
    per_layer = {
        mode: [(layer.cross.n_bounded, layer.cross.shared, layer.cross.explicit)
               for layer in _model("csparsemax", mode, transformer=dict(decoder_layers=3)).decoder_layers]
        for mode in BOUNDED_MODES
    }
    assert per_layer["all"] == [(4, False, True)] * 3
    assert per_layer["last_layer"] == [(0, False, True), (0, False, True), (4, False, True)]  # sparsemax: explicit
    assert per_layer["one_head"] == [(0, False, True), (0, False, True), (1, False, True)]
    assert per_layer["shared"] == [(0, False, True), (0, False, True), (4, True, True)]
    m = _model("csoftmax", "last_layer", transformer=dict(decoder_layers=3))
    assert [layer.cross.explicit for layer in m.decoder_layers] == [False, False, True]  # fused softmax
    assert m.decoder_layers[0].cross.free.transform.name == "softmax"
    assert m.decoder_layers[2].cross.bounded.transform.name == "csoftmax"
    assert all(layer.cross.n_bounded == 0 for layer in _model("sparsemax", "all").decoder_layers)


def test_transform_layers_last_layer_gives_the_layers_below_fused_softmax():
    for transform, bounded, n_bounded in [("csparsemax", "last_layer", 4), ("csparsemax", "one_head", 1),
                                          ("sparsemax", "last_layer", 0)]:
        m = _model(transform, bounded, transformer=dict(decoder_layers=3, transform_layers="last_layer"))
        below, last = m.decoder_layers[:2], m.decoder_layers[2].cross
        assert [(c.cross.n_bounded, c.cross.explicit, c.cross.free.transform.name) for c in below] == \
            [(0, False, "softmax")] * 2
        assert last.n_bounded == n_bounded and last.explicit
        assert last.free.transform.name == "sparsemax"
        if n_bounded:
            assert last.bounded.transform.name == "csparsemax" and last.bounded.exhaustion == 0.2
    # the default keeps the transform in every layer (checkpoints written before the key behave as before)
    m = _model("sparsemax", "last_layer", transformer=dict(decoder_layers=3))
    assert [c.cross.free.transform.name for c in m.decoder_layers] == ["sparsemax"] * 3


# ------------------------------------------------------------------ search
@dataclass
class _NaiveEnc(EncoderOutput):
    src: torch.Tensor | None = None
    src_len: torch.Tensor | None = None
    fert: torch.Tensor | None = None


@dataclass
class _NaiveState(DecoderState):
    prefix: torch.Tensor | None = None


class _Naive(NMTModel):
    """The same model without a cache: every step re-runs teacher forcing on the whole prefix."""

    def __init__(self, inner: TransformerModel):
        super().__init__(inner.cfg, inner.vocab_size)
        self.inner = inner

    def encode(self, src, src_len, fertility=None):
        e = self.inner.encode(src, src_len, fertility)
        return _NaiveEnc(e.memory, e.mask, e.fertility, src, src_len, fertility)

    def init_state(self, enc):
        return _NaiveState(torch.zeros(enc.mask.shape, dtype=torch.float64), enc.src.new_zeros(enc.src.size(0), 0))

    def step(self, y, state, enc):
        prefix = torch.cat([state.prefix, y.unsqueeze(1)], dim=1)
        out = self.inner(enc.src, enc.src_len, prefix, enc.fert)
        att = out.attention[:, -1]
        return Step(F.log_softmax(out.logits[:, -1], -1), att, _NaiveState(state.attention_sum + att, prefix))

    def forward(self, *a):
        return self.inner(*a)

    def reset_parameters(self, init_range):
        pass

    def probe_scores(self, on):
        return []


@pytest.mark.parametrize("transform,bounded", [("softmax", "last_layer"), ("csparsemax", "last_layer"),
                                               ("csoftmax", "all"), ("csparsemax", "shared")])
def test_beam_search_with_the_cache_equals_search_without_it(transform, bounded):
    m = _model(transform, bounded, seed=3)
    with torch.no_grad():
        m.generator.bias[EOS_ID] += 3.0  # some hypotheses finish before the length limit
    src, src_len, _, fert = _batch(m.constrained)
    settings = SearchSettings(beam=3, max_len_a=1.0, max_len_b=3)
    cached = search(m, src, src_len, fert, settings=settings)
    naive = search(_Naive(m), src, src_len, fert, settings=settings)
    lengths = set()
    for a, b in zip(cached, naive):
        assert a.tokens == b.tokens
        assert a.log_prob == pytest.approx(b.log_prob, abs=1e-6)
        torch.testing.assert_close(a.attention, b.attention, atol=1e-6, rtol=0)
        lengths.add(len(a.tokens))
    # well-formed hypotheses
    for h, n in zip(cached, src_len.tolist()):
        cols = n + int(m.sink)
        assert all(0 <= t < V and t != PAD_ID for t in h.tokens)
        assert h.attention.shape == (len(h.tokens) + 1, cols)
        torch.testing.assert_close(h.attention.sum(-1).double(), torch.ones(len(h.tokens) + 1, dtype=torch.float64))


def test_reordered_state_steps_like_the_rows_it_came_from():
    m = _model("csparsemax", "all")
    src, src_len, tgt_in, fert = _batch(True)
    enc = m.encode(src, src_len, fert)
    state = m.init_state(enc)
    with torch.no_grad():
        for y in tgt_in[:, :3].unbind(1):
            state = m.step(y, state, enc).state
        idx = torch.tensor([1, 0, 0, 1, 1])  # reorder and expand, as beams do
        y = torch.tensor([21, 22])
        direct = m.step(y, state, enc)
        moved = m.step(y.index_select(0, idx), m.reorder(state, idx), m.reorder(enc, idx))
    torch.testing.assert_close(moved.log_probs, direct.log_probs.index_select(0, idx))
    torch.testing.assert_close(moved.attention, direct.attention.index_select(0, idx))
    torch.testing.assert_close(moved.state.head_sums[0], direct.state.head_sums[0].index_select(0, idx))
    assert moved.state.self_keys[1].size(2) == 4


# ------------------------------------------------------------------ training hooks, precision
@pytest.mark.parametrize("transform", ["softmax", "csparsemax"])
def test_bf16_autocast_runs_and_is_finite(transform):
    m = _model(transform, "shared" if transform == "csparsemax" else "last_layer", dtype=torch.float32).train()
    src, src_len, tgt_in, fert = _batch(m.constrained)
    fert = fert.float() if fert is not None else None
    tgt_out = torch.cat([tgt_in[:, 1:], torch.full((2, 1), EOS_ID)], 1).masked_fill(tgt_in == PAD_ID, PAD_ID)
    m.probe_scores(True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = m(src, src_len, tgt_in, fert)
        loss = nmt_loss(out.logits, tgt_out)
    loss.backward()
    scores = m.probe_scores(False)
    assert torch.isfinite(loss) and torch.isfinite(out.logits.float()).all()
    assert out.attention.dtype == torch.float32 and torch.isfinite(out.attention).all()
    assert all(p.grad is None or torch.isfinite(p.grad).all() for p in m.parameters())
    assert len(scores) == 1 and scores[0].shape == (2, 4, tgt_in.size(1), src.size(1) + int(m.sink))
    assert scores[0].grad is not None and scores[0].grad.abs().sum() > 0
    m.eval()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        hyps = search(m, src, src_len, fert, settings=SearchSettings(beam=2, max_len_a=1.0, max_len_b=2))
    assert all(torch.isfinite(h.attention).all() and h.log_prob > float("-inf") for h in hyps)


def test_reset_parameters_ignores_param_init_and_keeps_padding_zero():
    m = _model("softmax", share_embeddings=True, tie_generator=True, dtype=torch.float32)
    assert m.src_emb is m.tgt_emb and m.generator.weight is m.tgt_emb.weight
    m.reset_parameters(0.1)
    w = m.decoder_layers[0].self_attn.qkv.weight
    assert w.abs().max() <= (6 / 32) ** 0.5 + 1e-6  # Xavier of each 16 x 16 block, not uniform(0.1)
    assert w.abs().max() > 0.1
    assert torch.all(m.src_emb.weight[PAD_ID] == 0)


# ------------------------------------------------------------------ config, checkpoints
def _config(**model) -> dict:
    base = {"arch": "transformer", "emb_size": 16, "hidden_size": 16, "transformer": {"heads": 4}}
    for k, v in model.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict):
            base[k] = {**base[k], **v}
        else:
            base[k] = v
    return {"model": base}


@pytest.mark.parametrize("model,message", [
    ({"transformer": {"heads": 3}}, r"model\.transformer\.heads=3 must divide d_model \(model\.hidden_size=16\)"),
    ({"transformer": {"heads": 0}}, r"model\.transformer\.heads must be in \[1, 1024\], got 0"),
    ({"transformer": {"bounded": "first_layer"}}, r"model\.transformer\.bounded: unknown mode 'first_layer'"),
    ({"transformer": {"decoder_layers": 0}}, r"model\.transformer\.decoder_layers must be in \[1, 64\], got 0"),
    ({"transformer": {"ff_size": 0}}, r"model\.transformer\.ff_size must be in \[1, \d+\], got 0"),
    ({"transformer": {"attention_dropout": 1.0}}, r"model\.transformer\.attention_dropout must be in \[0, 1\)"),
    ({"coverage": {"type": "linguistic"}}, r"model\.coverage\.type=linguistic: .*CovVector"),
    ({"emb_size": 8}, r"model\.emb_size=8: a transformer's embeddings have d_model = model\.hidden_size \(16\)"),
    ({"attention": {"score": "mlp"}}, r"model\.attention\.score=mlp"),
    ({"attention": {"scaling": "learned"}}, r"model\.attention\.scaling=learned"),
    ({"transformer": {"transform_layers": "first"}}, r"model\.transformer\.transform_layers: unknown choice 'first'"),
    ({"transformer": {"transform_layers": "last_layer", "bounded": "all"},
      "attention": {"transform": "csparsemax", "fertility": {"strategy": "constant"}}},
     r"model\.transformer\.bounded=all bounds every decoder layer, but model\.transformer\.transform_layers=last_layer"),
    ({"transformer": {"transform_layers": "last_layer"},
      "attention": {"transform": "entmax", "learn_alpha": "head"}},
     r"model\.attention\.learn_alpha=head .*model\.transformer\.transform_layers=last_layer"),
])
def test_config_errors_name_the_key(model, message):
    with pytest.raises(ConfigError, match=message):
        Config.from_dict(_config(**model))


def test_transformer_section_is_optional_and_ignored_by_the_lstm():
    assert Config.from_dict({}).model.transformer == TransformerConfig()
    cfg = Config.from_dict({"model": {"hidden_size": 10, "emb_size": 12, "transformer": {"heads": 3}}})
    assert cfg.model.arch == "lstm" and cfg.model.transformer.heads == 3
    assert Config.from_dict(cfg.to_dict()) == cfg
    t = Config.from_dict(_config()).model
    assert t.transformer.bounded == "last_layer" and t.transformer.decoder_layers == 3


@pytest.mark.parametrize("share", [False, True])
def test_checkpoint_round_trip(share):
    cfg = Config.from_dict(_config(share_embeddings=share, tie_generator=share, dropout=0.0,
                                   transformer={"encoder_layers": 1, "decoder_layers": 2, "ff_size": 24}))
    cfg.model.attention.transform = "csparsemax"
    cfg.model.attention.fertility.strategy = "constant"
    torch.manual_seed(1)
    a = build_model(cfg, V).eval()
    sd = {k: v.clone() for k, v in a.state_dict().items()}
    assert not any("positions" in k for k in sd)  # position encodings are not weights
    b = build_model(cfg, V, sd).eval()
    src, src_len, tgt_in, fert = _batch(True)
    with torch.no_grad():
        oa, ob = a(src, src_len, tgt_in, fert.float()), b(src, src_len, tgt_in, fert.float())
    torch.testing.assert_close(oa.logits, ob.logits, rtol=0, atol=0)
    other = Config.from_dict(cfg.to_dict())
    other.model.transformer.ff_size = 32
    with pytest.raises(ConfigError, match="checkpoint does not match the model its config describes"):
        build_model(other, V, sd)


def test_long_outputs_extend_the_position_table():
    m = _model("softmax")
    src, src_len, _, _ = _batch(False)
    tgt = torch.randint(4, V, (2, 300))
    with torch.no_grad():
        out = m(src, src_len, tgt)
    assert out.logits.shape == (2, 300, V) and torch.isfinite(out.logits).all()


@pytest.mark.parametrize("transform,kw,layers", [("sparsemax", {}, 2), ("softmax", {}, 1),
                                                 ("csparsemax", TOP_ONLY, 1)])
def test_forward_returns_the_explicit_heads_of_each_layer(transform, kw, layers):
    """ForwardOutput.heads: one [B, h, T, S'] per explicitly computed layer (the last one is the reported)."""
    m = _model(transform, "last_layer", **kw)
    src, src_len, tgt_in, fert = _batch(m.constrained)
    with torch.no_grad():
        out = m(src, src_len, tgt_in, fert)
    assert len(out.heads) == layers
    assert all(w.shape == (2, 4, tgt_in.size(1), src.size(1) + int(m.sink)) for w in out.heads)
    torch.testing.assert_close(out.heads[-1].mean(1), out.attention)


COSINE = dict(attention=dict(scaling="cosine"))


def _cosine_model(transform, bounded="last_layer", seed=0, **t):
    torch.manual_seed(seed)
    cfg = _cfg(transform, bounded, 0.2 if transform.startswith("c") else 0.0, transformer=t)
    cfg.attention.scaling = "cosine"
    return TransformerModel(cfg, V).double().eval()


@pytest.mark.parametrize("transform,bounded,t", [("softmax", "last_layer", {}), ("sparsemax", "last_layer", {}),
                                                 ("csparsemax", "all", {}), ("csoftmax", "shared", {}),
                                                 ("csparsemax", "last_layer", {"transform_layers": "last_layer"})])
def test_cosine_scores_decode_incrementally_and_in_parallel_alike(transform, bounded, t):
    m = _cosine_model(transform, bounded, **t)
    with torch.no_grad():  # scales away from 1, so that a missing factor would show
        for layer in m.decoder_layers:
            if layer.cross.cosine:
                layer.cross.log_scale.copy_(torch.tensor([0.3, 1.2, -0.4, 2.0]))
    _forward_equals_steps(m, *_batch(m.constrained))
    # which layers score by cosine: those that use the transform
    expect = [True, True] if t.get("transform_layers", "all") == "all" else [False, True]
    assert [layer.cross.cosine for layer in m.decoder_layers] == expect


def test_the_learned_cosine_scales_are_summarised_for_the_training_log():
    """attn/scale is the mean of g_h over the heads of the cosine layers, with its range; none without cosine."""
    m = _cosine_model("csparsemax", transform_layers="last_layer")
    assert m.learned_scale() == pytest.approx({"scale": 1.0, "scale_min": 1.0, "scale_max": 1.0})
    g = torch.tensor([0.3, 1.2, -0.4, 2.0])
    with torch.no_grad():
        m.decoder_layers[-1].cross.log_scale.copy_(g)
    assert m.learned_scale() == pytest.approx(
        {"scale": float(g.exp().mean()), "scale_min": math.exp(-0.4), "scale_max": math.exp(2.0)})
    assert _model("softmax", "last_layer").learned_scale() == {}


def test_cosine_scores_are_bounded_by_the_heads_scale_and_fused_equals_explicit():
    m = _cosine_model("softmax")
    cross = m.decoder_layers[0].cross
    assert not cross.explicit and torch.all(cross.log_scale == 0)  # fused; g = 1 at first
    with torch.no_grad():
        cross.log_scale.copy_(torch.tensor([0.0, 0.5, 1.0, 1.5]))
    src, src_len, tgt_in, _ = _batch(False)
    probe = []
    with torch.no_grad():
        fused = m(src, src_len, tgt_in).logits
        cross.explicit = True
        cross.probe = probe
        explicit = m(src, src_len, tgt_in).logits
        cross.probe = None
    torch.testing.assert_close(fused, explicit, atol=1e-10, rtol=0)
    m.train()
    cross.probe = probe
    m(src, src_len, tgt_in)  # the probe keeps scores that require grad
    z = probe[-1]
    g = torch.tensor([0.0, 0.5, 1.0, 1.5]).exp().double().view(1, 4, 1, 1)
    assert torch.all(z.abs() <= g + 1e-9) and torch.all((z.amax(-1) - z.amin(-1)) <= 2 * g.squeeze(-1) + 1e-9)
    m.reset_parameters(0.0)
    assert torch.all(cross.log_scale == 0)
    assert "decoder_layers.0.cross.log_scale" in m.state_dict()
    assert not any("log_scale" in k for k in _model("sparsemax").state_dict())
