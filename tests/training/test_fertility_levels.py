"""The predictor's ``level`` key: config, old checkpoints (subword), word-level bounds, evaluation helpers."""

from __future__ import annotations

import pytest
import torch

from scanmt.config import PredictorConfig
from scanmt.data.dataset import collate
from scanmt.data.vocab import SPECIALS, Vocab
from scanmt.errors import ConfigError
from scanmt.fertility.predictor.network import FertilityPredictor
from scanmt.fertility.providers import PredictedFertility, provider_from_state, provider_state
from scanmt.model.checkpoint import load_checkpoint, save_checkpoint
from scanmt.fertility.predictor.evaluation import class_shares, majority_class

SENTS = [["▁ein", "▁Spiel", "ha", "us", "▁."], ["▁zwei", "▁Hund", "e"]]


def make_checkpoint(path, level: str | None) -> dict:
    """A predictor checkpoint as `scanmt fertility --train-predictor` writes it; ``level=None``: as before the key."""
    torch.manual_seed(0)
    vocab = Vocab(list(SPECIALS) + sorted({t for s in SENTS for t in s}))
    cfg = PredictorConfig.from_dict({"model": {"emb_size": 8, "hidden_size": 8}}).to_dict()
    if level is None:
        del cfg["level"]
    else:
        cfg["level"] = level
    m = cfg["model"]
    net = FertilityPredictor(len(vocab), m["emb_size"], m["hidden_size"], m["layers"], 0.0, m["max_fertility"])
    save_checkpoint(path, {"config": cfg, "model": net.state_dict(), "vocab": vocab.itos, "kind": "fertility-predictor"})
    return load_checkpoint(path)


def expected_by_hand(ckpt: dict, sent: list[str]) -> list[float]:
    m = ckpt["config"]["model"]
    net = FertilityPredictor(len(ckpt["vocab"]), m["emb_size"], m["hidden_size"], m["layers"], 0.0, m["max_fertility"])
    net.load_state_dict(ckpt["model"])
    b = collate([Vocab(ckpt["vocab"]).encode(sent)], None, [0])
    with torch.no_grad():
        p = torch.softmax(net.eval()(b.src, b.src_len).float(), -1)[0]
    return (p * torch.arange(m["max_fertility"] + 1)).sum(-1).tolist()


def test_old_checkpoint_without_level_loads_as_subword(tmp_path):
    ckpt = make_checkpoint(tmp_path / "old.pt", level=None)
    prov = PredictedFertility.from_checkpoint_state(ckpt, add=1.0)
    assert prov.level == "subword"
    got = prov.apply(SENTS)
    for sent, g in zip(SENTS, got):
        assert g == pytest.approx([e + 1.0 for e in expected_by_hand(ckpt, sent)], abs=1e-6)
    # the same through an NMT checkpoint's provider state (saved without `level` too)
    again = provider_from_state(provider_state(prov))
    assert again.level == "subword" and again.apply(SENTS) == got


def test_word_level_checkpoint_shares_the_word_prediction(tmp_path):
    ckpt = make_checkpoint(tmp_path / "word.pt", level="word")
    prov = PredictedFertility.from_checkpoint_state(ckpt, add=1.0)
    assert prov.level == "word" and provider_from_state(provider_state(prov)).level == "word"
    e = expected_by_hand(ckpt, SENTS[0])
    spiel = (e[1] + e[2] + e[3]) / 3
    want = [e[0] + 1, spiel / 3 + 1, spiel / 3 + 1, spiel / 3 + 1, e[4] + 1]
    assert prov.apply(SENTS[:1])[0] == pytest.approx(want, abs=1e-6)


def test_level_config():
    assert PredictorConfig.from_dict({}).level == "subword"
    assert PredictorConfig.from_dict({"level": "word"}).level == "word"
    with pytest.raises(ConfigError, match="level: unknown fertility level 'char'"):
        PredictorConfig.from_dict({"level": "char"})


def test_a_train_override_keeps_the_predictor_train_defaults():
    """`--set train.threads=1` used to replace the predictor's Adam recipe by the NMT defaults (SGD, lr 1)."""
    base = PredictorConfig.from_dict({}).train
    cfg = PredictorConfig.from_dict({"train": {"threads": 1}}).train
    assert (cfg.optimizer, cfg.lr, cfg.epochs, cfg.patience, cfg.threads) == ("adam", 0.002, 8, 2, 1)
    assert (base.optimizer, base.lr) == ("adam", 0.002)
    cfg = PredictorConfig.from_dict({"train": {"optimizer": "sgd", "lr": 1.0}}).train
    assert (cfg.optimizer, cfg.lr, cfg.epochs) == ("sgd", 1.0, 8)


def test_majority_class_and_shares():
    assert majority_class([[1, 0, 7], [1, 2]], cap=5) == 1
    assert majority_class([[0, 7, 6]], cap=5) == 5  # capped: two 5s
    assert majority_class([[0, 2]], cap=5) == 0  # ties: the smallest
    assert class_shares([1, 1, 0, 2]) == {"0": 25.0, "1": 50.0, "2": 25.0}


def test_word_view_by_hand(tmp_path):
    from scanmt.fertility.predictor.evaluation import word_view

    pieces = [["▁ein", "▁Spiel", "ha", "us", "▁."]]  # words: ein, Spielhaus (3 pieces), .
    align = tmp_path / "valid.word.align"
    align.write_text("0-0 1-1 1-2\n", encoding="utf-8")  # F = ein 1, Spielhaus 2, . 0
    bounds = [[1.0, 0.5, 0.5, 0.5, 1.0]]  # without add: word sums 1, 1.5, 1
    v = word_view(pieces, bounds, align, add=1.0)
    assert v.words == 3
    assert v.word_sum_mae == pytest.approx((0 + 0.5 + 1) / 3)
    assert v.word_sum_mae_baseline == pytest.approx((0 + 1 + 1) / 3)
    assert v.one_piece_share == pytest.approx(200 / 3)
    assert (v.one_piece_bound_mean, v.one_piece_bound_std, v.one_piece_corr) == (2.0, 0.0, 0.0)  # constant bound
    assert v.multi_piece_bound_mean == pytest.approx(1.5)
