"""alpha-entmax attention (issue 29, item 2): ``model.attention.transform`` entmax / centmax, ``alpha`` fixed or
learned (``learn_alpha``: one per model, or one per Transformer cross-attention head), trained through the
normal path, saved in checkpoints and reported in the training log."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest
import torch

from scanmt.config import Config, ModelConfig
from scanmt.model.transformer.config import TransformerConfig
from scanmt.data.vocab import PAD_ID
from scanmt.decoding.search import SearchSettings, search
from scanmt.errors import ConfigError
from scanmt.model.bounds import LearnedAlpha
from scanmt.model.lstm.model import LSTMModel
from scanmt.model.transformer.model import TransformerModel

V = 15
#: (arch, transform, learn_alpha) of the runs trained through the Trainer
RUNS = [("lstm", "entmax", "model"), ("lstm", "centmax", "model"),
        ("transformer", "entmax", "head"), ("transformer", "centmax", "head"), ("transformer", "centmax", "model")]
STEPS = 6


def _raw(alpha: float) -> float:
    """The LearnedAlpha parameter of ``alpha``."""
    return math.log(math.expm1(alpha - 1.0))


# ------------------------------------------------------------------ trained through the Trainer
@pytest.fixture(scope="module")
def runs(small_data_dir, tmp_path_factory) -> dict[tuple[str, str, str], Path]:
    from scanmt.training.trainer import Trainer
    from tests.conftest import tiny_config

    out = {}
    for arch, transform, learn in RUNS:
        extra = {"model__attention__transform": transform, "model__attention__learn_alpha": learn,
                 "model__attention__alpha": 1.5}
        if transform == "centmax":
            extra.update(model__attention__fertility__strategy="constant", model__attention__exhaustion=0.2)
        if arch == "transformer":
            extra.update(model__arch="transformer", model__transformer={
                "heads": 4, "ff_size": 64, "encoder_layers": 1, "decoder_layers": 2, "bounded": "last_layer"})
        cfg = tiny_config(small_data_dir, train__max_steps=STEPS, train__log_every=3, train__logger="csv",
                          train__checkpoint_every=STEPS, data__valid_limit=10, **extra)
        run = tmp_path_factory.mktemp(f"{arch}-{transform}-{learn}")
        torch.manual_seed(0)
        Trainer(cfg, run).train()
        out[(arch, transform, learn)] = run
    return out


def _metrics(run: Path) -> dict[int, dict[str, float]]:
    rows: dict[int, dict[str, float]] = {}
    with (run / "metrics.csv").open(encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            rows.setdefault(int(r["step"]), {})[r["name"]] = float(r["value"])
    return rows


@pytest.mark.parametrize("key", RUNS, ids=["-".join(r) for r in RUNS])
def test_learned_alpha_moves_and_is_logged(runs, key):
    arch, _, learn = key
    rows = _metrics(runs[key])
    logged = [rows[s] for s in (3, 6)]
    for r in logged:
        assert "attn/alpha" in r and r["attn/alpha"] > 1.0
        assert ("attn/alpha_min" in r) == (learn == "head")
        if learn == "head":
            assert r["attn/alpha_min"] <= r["attn/alpha"] <= r["attn/alpha_max"]
    assert abs(logged[-1]["attn/alpha"] - 1.5) > 1e-4, "alpha did not move from its initial value"
    if learn == "head":  # each head learns its own alpha
        assert logged[-1]["attn/alpha_max"] - logged[-1]["attn/alpha_min"] > 1e-5
    assert all(math.isfinite(r["train/loss"]) for r in logged)


@pytest.mark.parametrize("key", RUNS, ids=["-".join(r) for r in RUNS])
def test_checkpoint_round_trip_keeps_alpha(runs, key):
    from scanmt.decoding.translator import Translator
    from scanmt.model.checkpoint import Checkpoint

    arch, transform, learn = key
    ckpt = Checkpoint.load(runs[key] / "last.pt")
    assert ckpt.config["model"]["attention"]["learn_alpha"] == learn
    assert ckpt.config["model"]["attention"]["transform"] == transform
    name = "decoder.attention.alpha.raw" if arch == "lstm" else "cross_alpha.raw"
    raw = ckpt.weights[name]
    assert tuple(raw.shape) == ((2, 4) if learn == "head" else ())
    tr = Translator.from_checkpoint(runs[key] / "last.pt")
    loaded = tr.model.learned_alpha()
    logged = _metrics(runs[key])[STEPS]
    assert loaded["alpha"] == pytest.approx(logged["attn/alpha"], rel=1e-5)
    assert loaded["alpha"] == pytest.approx(float((1 + torch.nn.functional.softplus(raw)).mean()))
    out = tr.translate_lines(["Ein Hund läuft im Park."], beam=2)
    assert len(out) == 1


# ------------------------------------------------------------------ the models directly
def _cfg(arch: str, transform: str, learn: str = "none", alpha: float = 1.5, bounded: str = "last_layer") -> ModelConfig:
    cfg = ModelConfig(arch=arch, emb_size=16, hidden_size=16, dropout=0.0,
                      transformer=TransformerConfig(heads=4, ff_size=32, encoder_layers=1, decoder_layers=2,
                                                    attention_dropout=0.0, bounded=bounded))
    cfg.attention.transform = transform
    cfg.attention.learn_alpha = learn
    cfg.attention.alpha = alpha
    return cfg


def _model(arch: str, transform: str, learn: str = "none", alpha: float = 1.5, seed: int = 0, **kw):
    torch.manual_seed(seed)
    cls = LSTMModel if arch == "lstm" else TransformerModel
    return cls(_cfg(arch, transform, learn, alpha, **kw), V).double().eval()


def _src():
    src = torch.tensor([[5, 6, 7, 8, 9, 10], [9, 10, 11, PAD_ID, PAD_ID, PAD_ID], [7, PAD_ID, PAD_ID, PAD_ID, PAD_ID, PAD_ID]])
    n = torch.tensor([6, 3, 1])
    fert = torch.tensor([[1.0, 2.0, 0.5, 1.0, 1.0, 3.0], [1.0, 1.0, 1.0, 0, 0, 0], [0.7, 0, 0, 0, 0, 0]],
                        dtype=torch.float64)
    return src, n, fert


@pytest.mark.parametrize("arch,learn", [("lstm", "none"), ("lstm", "model"), ("transformer", "model"),
                                        ("transformer", "head")])
@pytest.mark.parametrize("beam", [1, 4])
def test_centmax_respects_the_bounds_in_search(arch, learn, beam):
    m = _model(arch, "centmax", learn, alpha=1.3)
    if learn != "none":  # spread the learned alphas (one per head: each its own)
        alpha = m.decoder.attention.alpha if arch == "lstm" else m.cross_alpha
        with torch.no_grad():
            alpha.raw.copy_(torch.linspace(_raw(1.2), _raw(3.0), alpha.raw.numel()).view_as(alpha.raw))
    src, n, fert = _src()
    hyps = search(m, src, n, fert, settings=SearchSettings(beam=beam, max_len_a=4.0, max_len_b=4))
    for b, h in enumerate(hyps):
        L = int(n[b])
        assert h.attention.shape[1] == L + 1, "attention covers the real tokens and the sink"
        beta = h.attention.sum(0)
        assert torch.all(beta[:L] <= fert[b, :L] + 1e-5), (beta[:L], fert[b, :L])
        torch.testing.assert_close(h.attention.sum(1), torch.ones(h.attention.size(0), dtype=h.attention.dtype))


@pytest.mark.parametrize("arch", ["lstm", "transformer"])
def test_fixed_alpha_reaches_the_transform(arch):
    """entmax with alpha 2 is sparsemax, centmax with alpha 2 csparsemax, entmax with alpha 1.5 entmax15."""
    src, n, fert = _src()
    tgt = torch.randint(5, V, (3, 7), generator=torch.Generator().manual_seed(1))
    for transform, alpha, same in (("entmax", 2.0, "sparsemax"), ("centmax", 2.0, "csparsemax"),
                                   ("entmax", 1.5, "entmax15"), ("centmax", 1.7, None)):
        f = fert if transform == "centmax" else None
        with torch.no_grad():
            got = _model(arch, transform, alpha=alpha)(src, n, tgt, f).attention
            if same is not None:
                want = _model(arch, same)(src, n, tgt, f).attention
                torch.testing.assert_close(got, want, atol=1e-7, rtol=1e-6)
            else:  # an alpha other than the default changes the attention
                other = _model(arch, transform, alpha=1.5)(src, n, tgt, f).attention
                assert (got - other).abs().max() > 1e-4


def test_per_head_alphas_apply_to_their_heads():
    """learn_alpha=head: heads whose alpha is 2 compute csparsemax; the one head with another alpha differs."""
    src, n, fert = _src()
    tgt = torch.randint(5, V, (3, 7), generator=torch.Generator().manual_seed(2))
    sparse = _model("transformer", "csparsemax", bounded="one_head")
    m = _model("transformer", "centmax", "head", bounded="one_head")
    weights = sparse.state_dict()
    raw = torch.full((2, 4), _raw(2.0), dtype=torch.float64)
    raw[1, 2] = _raw(1.2)  # a free head of the last layer (head 0 is the bounded one)
    m.load_state_dict({**weights, "cross_alpha.raw": raw})
    seen = {}
    for name, mod in (("sparse", sparse), ("entmax", m)):
        cross = mod.decoder_layers[-1].cross
        handle = cross.register_forward_hook(lambda _m, _a, out, name=name: seen.__setitem__(name, out[1]))
        with torch.no_grad():
            mod(src, n, tgt, fert)
        handle.remove()
    a, b = seen["sparse"], seen["entmax"]  # [N, h, T, S']
    for head in (0, 1, 3):
        torch.testing.assert_close(b[:, head], a[:, head], atol=1e-7, rtol=1e-6)
    assert (b[:, 2] - a[:, 2]).abs().max() > 1e-3


def test_alpha_gradient_flows_and_stays_above_one():
    m = _model("lstm", "centmax", "model").train()
    src, n, fert = _src()
    tgt = torch.randint(5, V, (3, 7), generator=torch.Generator().manual_seed(3))
    out = m(src, n, tgt, fert)
    torch.nn.functional.cross_entropy(out.logits.reshape(-1, V), tgt.reshape(-1)).backward()
    g = m.decoder.attention.alpha.raw.grad
    assert g is not None and torch.isfinite(g) and g != 0
    with torch.no_grad():  # far down, alpha rounds to 1 (never below): the transform is then csoftmax
        m.decoder.attention.alpha.raw.fill_(-50.0)
        assert float(m.decoder.attention.alpha()) == 1.0
        assert torch.isfinite(m(src, n, tgt, fert).attention).all()
    assert float(LearnedAlpha(3.25)().detach()) == pytest.approx(3.25)


def test_models_without_a_learned_alpha_have_the_same_weights():
    """Only learn_alpha != none adds a parameter: the state dicts of older models (and checkpoints) are unchanged."""
    for arch in ("lstm", "transformer"):
        base = set(_model(arch, "softmax").state_dict())
        assert set(_model(arch, "entmax").state_dict()) == base
        assert set(_model(arch, "centmax").state_dict()) == base
        learned = set(_model(arch, "entmax", "model").state_dict()) - base
        assert learned == {"decoder.attention.alpha.raw" if arch == "lstm" else "cross_alpha.raw"}


def test_uniform_init_keeps_the_initial_alpha():
    m = _model("lstm", "entmax", "model", alpha=2.5)
    m.reset_parameters(0.1)
    assert m.learned_alpha()["alpha"] == pytest.approx(2.5)
    t = _model("transformer", "entmax", "head", alpha=1.25)
    t.reset_parameters(0.1)
    assert t.learned_alpha() == pytest.approx({"alpha": 1.25, "alpha_min": 1.25, "alpha_max": 1.25})


# ------------------------------------------------------------------ config
def _config(**attention) -> Config:
    return Config.from_dict({"model": {"attention": attention}})


@pytest.mark.parametrize("attention,message", [
    ({"transform": "softmax", "learn_alpha": "model"}, "learn_alpha=model: only centmax and entmax have an alpha"),
    ({"transform": "entmax15", "learn_alpha": "model"}, "not model.attention.transform=entmax15"),
    ({"transform": "csparsemax", "learn_alpha": "head", "fertility": {"strategy": "constant"}},
     "learn_alpha=head: only centmax and entmax"),
    ({"transform": "entmax", "learn_alpha": "head"}, "learn_alpha=head: one alpha per attention head needs "
                                                     "model.arch=transformer"),
    ({"transform": "entmax", "learn_alpha": "layer"}, "model.attention.learn_alpha: unknown mode 'layer' "
                                                      "(known: none, model, head)"),
    ({"transform": "entmax", "alpha": 1.0}, "model.attention.alpha must be in (1, 10], got 1.0"),
    ({"transform": "entmax", "alpha": 0.5}, "model.attention.alpha must be in (1, 10]"),
    ({"transform": "entmax", "alpha": 10.5}, "model.attention.alpha must be in (1, 10]"),
    ({"transform": "centmax"}, "centmax needs model.attention.fertility.strategy"),
    ({"transform": "entmax", "exhaustion": 0.2}, "exhaustion=0.2 needs a constrained transform"),
])
def test_config_errors(attention, message):
    with pytest.raises(ConfigError) as info:
        _config(**attention)
    assert message in str(info.value), str(info.value)


def test_config_accepts_the_new_keys():
    cfg = _config(transform="centmax", alpha=2.5, learn_alpha="model", fertility={"strategy": "constant"})
    assert (cfg.model.attention.alpha, cfg.model.attention.learn_alpha) == (2.5, "model")
    assert Config.from_dict({"model": {"arch": "transformer", "emb_size": 32, "hidden_size": 32,
                                       "attention": {"transform": "entmax", "learn_alpha": "head"}}})
    # ignored by the transforms without an alpha; older configs (no such keys) load with the defaults
    assert _config(transform="softmax", alpha=3.0).model.attention.alpha == 3.0
    old = Config().to_dict()
    del old["model"]["attention"]["alpha"], old["model"]["attention"]["learn_alpha"]
    a = Config.from_dict(old).model.attention
    assert (a.alpha, a.learn_alpha) == (1.5, "none")
