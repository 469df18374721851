"""``model.attention.scaling``: what each mode computes, and old checkpoints without the key."""

from __future__ import annotations

import math

import pytest
import torch

from scanmt.config import ModelConfig
from scanmt.errors import ConfigError
from scanmt.model.lstm.attention import Attention


def _scores(scaling: str, score: str = "general", d: int = 16):
    torch.manual_seed(0)
    att = Attention(d, d, score, "softmax", scaling=scaling)
    att.reset_scale()
    q, mem = torch.randn(3, d), torch.randn(3, 5, d)
    return att, q, att.keys(mem)


def test_sqrt_divides_the_raw_scores():
    att, q, k = _scores("sqrt")
    raw = torch.bmm(k, q.unsqueeze(2)).squeeze(2)
    torch.testing.assert_close(att.scores(q, k), raw / 4.0)


def test_learned_scale_starts_at_one_over_sqrt_d_and_learns():
    att, q, k = _scores("learned")
    raw = torch.bmm(k, q.unsqueeze(2)).squeeze(2)
    torch.testing.assert_close(att.scores(q, k), raw / 4.0)
    att.scores(q, k).sum().backward()
    assert att.log_scale.grad is not None and att.log_scale.grad != 0


@pytest.mark.parametrize("scaling,logged", [("learned", 0.25), ("cosine", 1.0), ("sqrt", None), ("none", None)])
def test_an_lstm_logs_its_learned_scale(scaling, logged):
    from scanmt.model.interface import log_summary
    from scanmt.model.lstm.model import LSTMModel

    cfg = ModelConfig(emb_size=16, hidden_size=16, dropout=0.0)
    cfg.attention.scaling = scaling
    m = LSTMModel(cfg, 30)
    m.reset_parameters(0.1)  # the uniform init puts the scale back at its start
    assert m.learned_scale() == ({} if logged is None else pytest.approx({"scale": logged}))
    assert log_summary("scale", torch.tensor([1.0, 3.0])) == {"scale": 2.0, "scale_min": 1.0, "scale_max": 3.0}


def test_cosine_scores_are_bounded_by_the_scale():
    att, q, k = _scores("cosine")
    with torch.no_grad():
        att.log_scale.fill_(math.log(3.0))
    z = att.scores(100 * q, k)
    assert z.abs().max() <= 3.0 + 1e-5
    cos = torch.nn.functional.cosine_similarity(k, q.unsqueeze(1), dim=-1)
    torch.testing.assert_close(z, 3.0 * cos)


def test_none_is_the_raw_bilinear_score_and_has_no_extra_parameter():
    att, q, k = _scores("none")
    torch.testing.assert_close(att.scores(q, k), torch.bmm(k, q.unsqueeze(2)).squeeze(2))
    assert "log_scale" not in dict(att.named_parameters())


def test_bad_scaling_values_name_the_key():
    from scanmt.config import Config

    with pytest.raises(ConfigError, match="model.attention.scaling"):  # refused when the config is built
        Config.from_dict({"model": {"attention": {"scaling": "tempered"}}})
    with pytest.raises(ConfigError, match="cosine needs model.attention.score=general"):
        Config.from_dict({"model": {"attention": {"score": "mlp", "scaling": "cosine"}}})


def test_checkpoint_without_scaling_key_loads_as_unscaled(small_data_dir, tmp_path):
    """Checkpoints written before model.attention.scaling existed keep their (unscaled) behaviour."""
    from scanmt.decoding.translator import Translator
    from scanmt.model.checkpoint import load_checkpoint, save_checkpoint
    from scanmt.training.trainer import Trainer
    from tests.conftest import tiny_config

    cfg = tiny_config(small_data_dir, model__attention__scaling="none", train__max_steps=2)
    Trainer(cfg, tmp_path / "run").train()
    ckpt = load_checkpoint(tmp_path / "run" / "best.pt")
    del ckpt["config"]["model"]["attention"]["scaling"]
    old = tmp_path / "old.pt"
    save_checkpoint(old, ckpt)
    tr = Translator.from_checkpoint(old)
    assert tr.model.decoder.attention.scaling == "none"
    new = Translator.from_checkpoint(tmp_path / "run" / "best.pt")
    src = ["Ein Hund läuft im Park."]
    assert tr.translate_lines(src, beam=2)[0].text == new.translate_lines(src, beam=2)[0].text
