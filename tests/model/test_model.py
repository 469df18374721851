import pytest
import torch

from scanmt.config import Config, ModelConfig
from scanmt.data.vocab import PAD_ID, SINK_ID
from scanmt.errors import ConfigError
from scanmt.model.lstm.model import LSTMModel
from scanmt.model.loss import nmt_loss


def _batch():
    src = torch.tensor([[5, 6, 7, 8], [9, 10, PAD_ID, PAD_ID]])
    src_len = torch.tensor([4, 2])
    tgt_in = torch.tensor([[2, 11, 12], [2, 13, PAD_ID]])
    tgt_out = torch.tensor([[11, 12, 3], [13, 3, PAD_ID]])
    return src, src_len, tgt_in, tgt_out


@pytest.mark.parametrize("score", ["general", "mlp"])
@pytest.mark.parametrize("transform", ["softmax", "sparsemax"])
def test_padding_gets_exactly_zero_attention(score, transform):
    torch.manual_seed(0)
    cfg = ModelConfig(emb_size=16, hidden_size=16, layers=2, dropout=0.0)
    cfg.attention.score, cfg.attention.transform = score, transform
    m = LSTMModel(cfg, 20)
    src, src_len, tgt_in, _ = _batch()
    out = m(src, src_len, tgt_in)
    assert out.logits.shape == (2, 3, 20)
    assert out.attention.shape == (2, 3, 4)
    assert torch.all(out.attention[1, :, 2:] == 0)
    torch.testing.assert_close(out.attention.sum(-1), torch.ones(2, 3))


def test_sink_is_appended_after_the_last_real_token():
    cfg = ModelConfig(emb_size=8, hidden_size=8)
    cfg.attention.sink = True
    m = LSTMModel(cfg, 20)
    seen = {}
    orig = m.encoder.forward

    def spy(src, src_len):
        seen["src"], seen["len"] = src.clone(), src_len.clone()
        return orig(src, src_len)

    m.encoder.forward = spy
    src, src_len, tgt_in, _ = _batch()
    out = m(src, src_len, tgt_in)
    assert seen["src"].tolist() == [[5, 6, 7, 8, SINK_ID], [9, 10, SINK_ID, PAD_ID, PAD_ID]]
    assert seen["len"].tolist() == [5, 3]
    assert out.attention.shape == (2, 3, 5)
    assert torch.all(out.attention[1, :, 3:] == 0)


def test_loss_falls_on_a_tiny_batch():
    torch.manual_seed(0)
    m = LSTMModel(ModelConfig(emb_size=16, hidden_size=16, dropout=0.0), 20)
    opt = torch.optim.Adam(m.parameters(), lr=0.02)
    src, src_len, tgt_in, tgt_out = _batch()
    losses = []
    for _ in range(30):
        loss = nmt_loss(m(src, src_len, tgt_in).logits, tgt_out)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    assert losses[-1] < 0.2 * losses[0]


def test_unknown_transform_and_bad_tying_are_config_errors():
    cfg = ModelConfig()
    cfg.attention.transform = "entmax42"
    with pytest.raises(ConfigError, match="model.attention.transform: unknown transform 'entmax42'"):
        LSTMModel(cfg, 10)
    # checked once, when the Config is built (issue 54: the constructors no longer check again)
    with pytest.raises(ConfigError, match="tie_generator needs model.emb_size == model.hidden_size"):
        Config.from_dict({"model": {"emb_size": 8, "hidden_size": 16, "tie_generator": True}})


def test_an_odd_hidden_size_is_refused_when_the_config_is_built():
    """The BiLSTM encoder gives each direction half of model.hidden_size (lstm only: a transformer's d_model
    may be odd when its heads divide it)."""
    with pytest.raises(ConfigError, match="model.hidden_size must be even for a bidirectional encoder, got 15"):
        Config.from_dict({"model": {"emb_size": 15, "hidden_size": 15}})
    t = {"arch": "transformer", "emb_size": 15, "hidden_size": 15, "transformer": {"heads": 3}}
    assert Config.from_dict({"model": t}).model.hidden_size == 15
