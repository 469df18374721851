"""train.normalization: the summed loss divided by the batch's target tokens or by its sentences."""

import pytest
import torch

from scanmt.errors import ConfigError
from tests.conftest import one_train_step, tiny_config


def test_unknown_normalization_names_the_key(small_data_dir):
    with pytest.raises(ConfigError, match=r"train\.normalization: unknown normalization 'batch' \(known: tokens, sents\)"):
        tiny_config(small_data_dir, train__normalization="batch")


def test_sents_scales_the_gradient_by_tokens_per_sentence(small_data_dir, tmp_path):
    """Without clipping, the two gradients differ exactly by (target tokens / sentences) of the batch."""
    over = {"model__dropout": 0.0, "train__optimizer": "sgd", "train__lr": 0.5, "train__max_grad_norm": 0.0}
    trainer, loss_t, g_tok = one_train_step(tiny_config(small_data_dir, **over), tmp_path / "tokens")
    _, loss_s, g_sent = one_train_step(tiny_config(small_data_dir, train__normalization="sents", **over),
                                       tmp_path / "sents")
    batch = trainer.task.make_batch(trainer.task.epoch_batches(1)[0], torch.device("cpu"))
    ratio = batch.n_tgt_tokens / trainer.task.sequences(batch)
    assert batch.src.size(0) == trainer.task.sequences(batch) and ratio > 2
    assert loss_t == pytest.approx(loss_s)  # the logged loss per token does not depend on the normalization
    assert g_tok.keys() == g_sent.keys()
    for name in g_tok:
        torch.testing.assert_close(g_sent[name], g_tok[name] * ratio, rtol=1e-4, atol=1e-6, msg=name)


def test_paper_preset_normalizes_by_sentences_like_opennmt():
    from pathlib import Path

    from scanmt.config import Config

    repo = Path(__file__).resolve().parents[2]
    assert Config.load(repo / "configs" / "paper.yaml").train.normalization == "sents"
    assert Config.load(repo / "configs" / "cpu-small.yaml").train.normalization == "tokens"


@pytest.mark.parametrize("sort", ["source", "longest"])
def test_training_batches_follow_data_batch_sort(small_data_dir, tmp_path, sort):
    """``data.batch_sort`` reaches the trainer's epochs: its batches are the batcher's with that sort (and the two
    sorts give different batches on this corpus, so the test could fail)."""
    from scanmt.training.trainer import Trainer

    trainer = Trainer(tiny_config(small_data_dir, data__batch_sort=sort), tmp_path / sort)
    c, train = trainer.cfg, trainer.task.data.train
    other = "longest" if sort == "source" else "source"
    expect = train.token_batches(c.data.batch_tokens, seed=c.train.seed, epoch=2,
                                 bucket_batches=c.data.bucket_batches, sort=sort)
    assert trainer.task.epoch_batches(2) == expect
    assert expect != train.token_batches(c.data.batch_tokens, seed=c.train.seed, epoch=2,
                                         bucket_batches=c.data.bucket_batches, sort=other)
