"""A sparse output layer (issue 29, item 3): ``model.output`` sparsemax | entmax15 | entmax with the matching
Fenchel–Young loss (values against the definition in float64, gradients, label smoothing), softmax unchanged,
config errors, and tiny LSTM / Transformer models trained and decoded through the normal path."""

from __future__ import annotations

import math

import pytest
import torch
from torch.nn import functional as F

from scanmt import choices
from scanmt.config import Config, ModelConfig
from scanmt.model.transformer.config import TransformerConfig
from scanmt.data.vocab import PAD_ID
from scanmt.decoding.search import SearchSettings, search
from scanmt.errors import ConfigError
from scanmt.model.loss import nmt_loss
from scanmt.model.lstm.model import LSTMModel
from scanmt.model.output import fy_loss, output_log_probs, output_loss, output_probs, token_accuracy
from scanmt.model.transformer.model import TransformerModel
from scanmt.ops import entmax_bisect
from tests.conftest import tiny_config

SPARSE = [("sparsemax", 2.0), ("entmax15", 1.5), ("entmax", 1.3), ("entmax", 2.5)]


def _omega(p: torch.Tensor, a: float) -> torch.Tensor:
    """The negative Tsallis entropy ``(sum p^a - 1) / (a (a - 1))`` of each row."""
    return (p.pow(a).sum(-1) - 1.0) / (a * (a - 1.0))


def _direct(z: torch.Tensor, y: torch.Tensor, a: float, eps: float) -> torch.Tensor:
    """``sum_i L(z_i; q_i)`` from the definition ``Omega*(z) + Omega(q) - z.q`` with ``Omega*(z) = z.p* - Omega(p*)``,
    ``p* = entmax_alpha(z)`` (by bisection) and the smoothed target written out as a vector."""
    V = z.size(1)
    q = torch.full_like(z, eps / V)
    q[torch.arange(z.size(0)), y] += 1.0 - eps
    p = entmax_bisect(z, a)
    conj = (z * p).sum(-1) - _omega(p, a)
    loss = conj + _omega(q, a) - (z * q).sum(-1)
    return loss[y != PAD_ID].sum()


def _rows(seed=0, n=7, V=11):
    g = torch.Generator().manual_seed(seed)
    z = (torch.randn(n, V, generator=g, dtype=torch.float64) * 2).requires_grad_()
    y = torch.randint(1, V, (n,), generator=g)
    y[2] = PAD_ID  # one padding target, ignored
    return z, y


@pytest.mark.parametrize("output, alpha", SPARSE)
def test_fy_loss_backward_twice(output, alpha):
    """The first backward pass hands out the forward's scratch tensor as the gradient; a second one (retain_graph)
    must give the same gradient without writing over the first."""
    z, y = _rows()
    loss = fy_loss(z, y, output, alpha, 0.1)
    (g1,) = torch.autograd.grad(loss * 0.5, z, retain_graph=True)
    kept = g1.clone()
    (g2,) = torch.autograd.grad(loss * 0.5, z)
    assert torch.equal(g1, kept) and torch.equal(g2, kept)
    assert g1.data_ptr() != g2.data_ptr()


@pytest.mark.parametrize("output, alpha", SPARSE)
@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_fy_loss_equals_its_definition_in_float64(output, alpha, eps):
    z, y = _rows()
    got = fy_loss(z, y, output, alpha, eps)
    assert got.dtype == torch.float64
    torch.testing.assert_close(got, _direct(z.detach(), y, alpha, eps), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("output, alpha", SPARSE)
@pytest.mark.parametrize("eps", [0.0, 0.2])
def test_fy_loss_gradient_is_p_minus_q_and_passes_gradcheck(output, alpha, eps):
    z, y = _rows(1)
    assert torch.autograd.gradcheck(lambda x: fy_loss(x, y, output, alpha, eps), (z,))
    fy_loss(z, y, output, alpha, eps).backward()
    p = output_probs(z.detach(), output, alpha)
    q = torch.full_like(p, eps / p.size(1))
    q[torch.arange(p.size(0)), y] += 1.0 - eps
    want = (p - q) * (y != PAD_ID).unsqueeze(1)
    torch.testing.assert_close(z.grad, want)


@pytest.mark.parametrize("output, alpha", SPARSE)
def test_fy_loss_is_nonnegative_and_zero_at_its_target(output, alpha):
    z, y = _rows(2)
    z = z.detach()
    for i in range(z.size(0)):
        assert float(fy_loss(z[i : i + 1], y[i : i + 1], output, alpha)) >= -1e-12
    # a score vector whose entmax is exactly e_y: the loss is 0 (and so is its gradient)
    z1 = torch.full((1, 6), -50.0, dtype=torch.float64)
    z1[0, 3] = 50.0
    assert abs(float(fy_loss(z1, torch.tensor([3]), output, alpha))) < 1e-9


def test_label_smoothing_is_the_loss_at_the_smoothed_target():
    """With eps > 0 the target is q = (1 - eps) e_y + eps / V; the loss is larger where p* is one-hot on y
    (the smoothed target is not reached), and smoothing 0 is the plain loss."""
    z1 = torch.full((1, 6), -50.0, dtype=torch.float64)
    z1[0, 3] = 50.0
    y = torch.tensor([3])
    assert float(fy_loss(z1, y, "sparsemax", label_smoothing=0.1)) > 1e-3
    z, y = _rows(3)
    assert torch.equal(fy_loss(z, y, "sparsemax", label_smoothing=0.0), fy_loss(z, y, "sparsemax"))


def test_fy_loss_takes_b_t_v_and_low_precision():
    z = torch.randn(2, 3, 9).bfloat16()
    y = torch.tensor([[4, 5, PAD_ID], [6, 7, 8]])
    got = fy_loss(z, y, "entmax15")
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, fy_loss(z.float().reshape(-1, 9), y.reshape(-1), "entmax15"))


def test_softmax_output_is_unchanged():
    z = torch.randn(4, 5, 13)
    assert torch.equal(output_log_probs(z, "softmax"), F.log_softmax(z, dim=-1))
    y = torch.randint(1, 13, (4, 5))
    assert torch.equal(output_loss(z, y, "softmax", label_smoothing=0.1), nmt_loss(z, y, 0.1))


@pytest.mark.parametrize("output, alpha", SPARSE)
def test_log_probs_are_minus_inf_at_zero_probability_never_nan(output, alpha):
    z = torch.tensor([[3.0, 2.9, -5.0, -9.0, 0.0]])
    lp = output_log_probs(z, output, alpha)
    p = output_probs(z, output, alpha)
    assert not torch.isnan(lp).any()
    assert torch.equal(torch.isneginf(lp), p == 0) and bool((p == 0).any())
    torch.testing.assert_close(lp.exp().sum(), torch.tensor(1.0))


def test_token_accuracy_ignores_padding():
    z = torch.tensor([[[0.0, 0, 0, 0, 1.0, 0], [0, 0, 0, 0, 0, 1.0], [1.0, 0, 0, 0, 0, 0]]])
    y = torch.tensor([[4, 4, PAD_ID]])
    assert token_accuracy(z, y) == (1, 2)


# ---------------------------------------------------------------------------------------------- config
def test_output_is_a_declared_choice_with_softmax_by_default():
    assert choices.OUTPUTS == ("softmax", "sparsemax", "entmax15", "entmax")
    cfg = Config.from_dict({})
    assert cfg.model.output == "softmax" and cfg.model.output_alpha == 1.5
    # a saved config from before the key existed loads as softmax
    raw = Config().to_dict()
    del raw["model"]["output"], raw["model"]["output_alpha"]
    assert Config.from_dict(raw).model.output == "softmax"


def test_unknown_output_is_refused():
    with pytest.raises(ConfigError, match=r"model.output: unknown output 'sparsemaxx' \(known: softmax, sparsemax, "
                                          r"entmax15, entmax\)"):
        Config.from_dict({"model": {"output": "sparsemaxx"}})


@pytest.mark.parametrize("alpha", [1.0, 0.5, 10.5, float("nan")])
def test_output_alpha_out_of_range_is_refused(alpha):
    with pytest.raises(ConfigError, match=r"model.output_alpha" + ("" if math.isnan(alpha) else r" must be in \(1, 10\]")):
        Config.from_dict({"model": {"output": "entmax", "output_alpha": alpha}})


def test_output_alpha_in_range_is_accepted():
    assert Config.from_dict({"model": {"output": "entmax", "output_alpha": 10}}).model.output_alpha == 10


# ---------------------------------------------------------------------------------------------- models
def _lstm(output: str, alpha: float = 1.5) -> LSTMModel:
    torch.manual_seed(0)
    return LSTMModel(ModelConfig(emb_size=16, hidden_size=16, dropout=0.0, output=output, output_alpha=alpha), 20).eval()


def _transformer(output: str, alpha: float = 1.5) -> TransformerModel:
    torch.manual_seed(0)
    t = TransformerConfig(heads=2, ff_size=32, encoder_layers=1, decoder_layers=1, attention_dropout=0.0)
    cfg = ModelConfig(arch="transformer", emb_size=16, hidden_size=16, dropout=0.0, transformer=t, output=output,
                      output_alpha=alpha)
    return TransformerModel(cfg, 20).eval()


@pytest.mark.parametrize("build", [_lstm, _transformer], ids=["lstm", "transformer"])
@pytest.mark.parametrize("output, alpha", [("softmax", 1.5)] + SPARSE)
def test_step_log_probs_are_the_output_of_the_forward_logits(build, output, alpha):
    """Both architectures' step gives ``log p*`` of the teacher-forced logits (softmax: log_softmax)."""
    m = build(output, alpha)
    src, src_len = torch.tensor([[5, 6, 7]]), torch.tensor([3])
    tgt_in = torch.tensor([[2, 8, 9]])
    with torch.no_grad():
        logits = m(src, src_len, tgt_in).logits
        enc = m.encode(src, src_len)
        state = m.init_state(enc)
        for t, y in enumerate(tgt_in.unbind(1)):
            step = m.step(y, state, enc)
            state = step.state
            want = output_log_probs(logits[:, t], output, alpha)
            torch.testing.assert_close(step.log_probs, want, atol=1e-5, rtol=1e-5)
            assert not torch.isnan(step.log_probs).any()


@pytest.mark.parametrize("build", [_lstm, _transformer], ids=["lstm", "transformer"])
def test_search_with_a_mostly_zero_probability_output(build):
    """Most words get zero probability (biased generator): every sentence still gets a finite hypothesis."""
    m = build("sparsemax")
    with torch.no_grad():
        m.generator.bias.copy_(torch.linspace(-20, 4, 20))
    src = torch.tensor([[5, 6, 7, 8], [9, 10, PAD_ID, PAD_ID]])
    src_len = torch.tensor([4, 2])
    for beam in (1, 4):
        hyps = search(m, src, src_len, settings=SearchSettings(beam=beam, max_len_a=1.0, max_len_b=3))
        assert len(hyps) == 2
        for h in hyps:
            assert math.isfinite(h.log_prob) and math.isfinite(h.score)
            assert torch.isfinite(h.attention).all()
            assert h.support is not None and len(h.support) == len(h.tokens) + 1 and max(h.support) < 20
            assert h.exact is not None


# ---------------------------------------------------------------------------------------------- training
TRAIN_CASES = [("lstm", "sparsemax"), ("lstm", "entmax15"), ("transformer", "sparsemax"), ("transformer", "entmax15")]


@pytest.mark.parametrize("arch, output", TRAIN_CASES, ids=[f"{a}-{o}" for a, o in TRAIN_CASES])
def test_tiny_models_train_and_translate_with_a_sparse_output(small_data_dir, tmp_path, caplog, arch, output):
    from scanmt.decoding.translator import SearchStats, Translator
    from scanmt.training.trainer import SPARSE_OUTPUT_NOTE, Trainer

    extra = {"model__transformer__heads": 2, "model__transformer__ff_size": 32, "model__transformer__encoder_layers": 1,
             "model__transformer__decoder_layers": 1} if arch == "transformer" else {}
    cfg = tiny_config(small_data_dir, model__arch=arch, model__output=output, train__max_steps=4,
                      train__label_smoothing=0.1, data__valid_limit=10, **extra)
    with caplog.at_level("INFO", logger="scanmt.train"):
        trainer = Trainer(cfg, tmp_path / "run")
        p = trainer.train()
    assert SPARSE_OUTPUT_NOTE in caplog.text
    assert trainer.task.decay_key == "valid/fy_loss"
    last = p.history[-1]
    assert set(last) >= {"valid/fy_loss", "valid/accuracy", "valid/bleu"} and "valid/ppl" not in last
    assert math.isfinite(last["valid/fy_loss"]) and last["valid/fy_loss"] >= 0 and 0 <= last["valid/accuracy"] <= 1
    tr = Translator.from_checkpoint(tmp_path / "run" / "best.pt")
    assert tr.model.cfg.output == output
    out = tr.translate_lines(["ein mann fährt fahrrad .", "zwei hunde spielen im schnee ."], beam=3)
    for t in out:
        h = t.hypothesis
        assert math.isfinite(h.log_prob) and math.isfinite(h.score) and torch.isfinite(h.attention).all()
        assert h.tokens or h.forced  # min_len 1: a word unless the search had to force </s>
    stats = SearchStats.of(out)
    assert stats.sentences == 2 and 1 <= stats.mean_support <= len(tr.pipeline.vocab)
    forced = tr.force(["ein mann ."], ["a man ."])
    assert not math.isnan(forced[0].hypothesis.log_prob)  # -inf where a reference word has probability 0
    if arch == "lstm" and output == "sparsemax":  # the command's summary line
        from scanmt import api

        src = tmp_path / "in.de"
        src.write_text("ein mann fährt fahrrad .\n\nzwei hunde .\n", encoding="utf-8")
        request = api.TranslateRequest(model=str(tmp_path / "run" / "best.pt"), input=str(src),
                                       output=str(tmp_path / "out.en"), beam=2)
        result = api.translate_file(request)
        assert result.output == "sparsemax" and result.search_stats.sentences == 2  # the empty line left out
        assert f"  output sparsemax: mean support {result.search_stats.mean_support:.2f} words per step; search " \
               f"exact for {result.search_stats.exact}/2 sentences" in result.summary(request)


def test_softmax_validation_keeps_perplexity(small_data_dir, tmp_path):
    from scanmt.training.trainer import Trainer

    trainer = Trainer(tiny_config(small_data_dir, train__max_steps=2, data__valid_limit=5), tmp_path / "run")
    assert trainer.task.decay_key == "valid/ppl" and trainer.task.reports_perplexity
    last = trainer.train().history[-1]
    assert set(last) == {"step", "epoch", "valid/ppl", "valid/bleu", "valid/len_ratio"}
    # the greedy output's length over the references', in sacreBLEU's 13a words, counted here independently
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a
    from scanmt.decoding.translator import Translator

    task, tok = trainer.task, Tokenizer13a()
    pipe = task.data.pipeline
    hyps = Translator(task.model, pipe, task.cfg.decode).search(task.data.valid, beam=1)
    words = sum(len(tok(pipe.detokenize_target(pipe.target_pieces(h.tokens))).split()) for h in hyps)
    ref_words = sum(len(tok(r).split()) for r in task.data.valid_refs)
    assert last["valid/len_ratio"] != 1 and last["valid/len_ratio"] == pytest.approx(words / ref_words)
    line = trainer.task.describe_validation(last)
    assert line.endswith(f"greedy BLEU {last['valid/bleu']:.2f} (length ratio {last['valid/len_ratio']:.2f})")
