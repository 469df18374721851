"""Architectures register themselves (issue 54): a third one, declared in this file alone, is built, trained
for one update and decodes through the normal entry points (``api.train``, ``api.translate``); an unknown
``model.arch`` is an error that names it and the known ones."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
from torch import nn

from scanmt import api
from scanmt import config as config_mod
from scanmt.config import Config, ModelConfig
from scanmt.data.vocab import PAD_ID
from scanmt.errors import ConfigError
from scanmt.model import build
from scanmt.model.interface import DecoderState, EncoderOutput, ForwardOutput, NMTModel, Step
from tests.conftest import tiny_config


@dataclass
class ToyState(DecoderState):
    """``attention_sum [N, S']`` (the interface's) only."""


class ToyModel(NMTModel):
    """Uniform attention over the source embeddings; the next word from the previous one and that context."""

    def __init__(self, cfg: ModelConfig, vocab_size: int):
        super().__init__(cfg, vocab_size)
        self.emb = nn.Embedding(vocab_size, cfg.emb_size, padding_idx=PAD_ID)
        self.out = nn.Linear(2 * cfg.emb_size, vocab_size)

    def encode(self, src, src_len, fertility=None) -> EncoderOutput:
        source = self.source_batch(src, src_len, fertility)
        return EncoderOutput(self.emb(source.src), source.mask, self.masked_fertility(source, torch.float32))

    def init_state(self, enc: EncoderOutput) -> ToyState:
        return ToyState(torch.zeros(enc.mask.shape, dtype=enc.memory.dtype))

    def _attend(self, enc: EncoderOutput) -> tuple[torch.Tensor, torch.Tensor]:
        """``(attention [N, S'], context [N, E])``: uniform over the real columns."""
        attention = enc.mask.to(enc.memory.dtype)
        attention = attention / attention.sum(-1, keepdim=True)
        return attention, torch.einsum("ns,nse->ne", attention, enc.memory)

    def step(self, y, state: ToyState, enc: EncoderOutput) -> Step:
        attention, context = self._attend(enc)
        logits = self.out(torch.cat([self.emb(y), context], -1))
        return Step(self.output_log_probs(logits), attention, ToyState(state.attention_sum + attention))

    def forward(self, src, src_len, tgt_in, fertility=None) -> ForwardOutput:
        enc = self.encode(src, src_len, fertility)
        attention, context = self._attend(enc)
        words = self.emb(tgt_in)  # [B, T, E]
        logits = self.out(torch.cat([words, context.unsqueeze(1).expand_as(words)], -1))
        return ForwardOutput(logits, attention.unsqueeze(1).expand(-1, tgt_in.size(1), -1))

    def reset_parameters(self, init_range: float) -> None:
        if init_range > 0:
            for p in self.parameters():
                nn.init.uniform_(p, -init_range, init_range)

    def probe_scores(self, on: bool) -> list[torch.Tensor]:
        return []


@pytest.fixture
def toy(monkeypatch):
    """``model.arch: toy`` registered for one test (the registries are restored afterwards)."""
    monkeypatch.setattr(build, "_ARCHITECTURES", dict(build.architectures()))
    monkeypatch.setattr(config_mod, "_ARCHITECTURE_CHECKS", dict(config_mod._ARCHITECTURE_CHECKS))
    checked = []
    config_mod.register_architecture_keys("toy", checked.append)
    build.register_architecture("toy", ToyModel)
    return checked


def test_a_registered_architecture_trains_and_decodes(toy, small_data_dir, tmp_path):
    cfg = tiny_config(small_data_dir, model__arch="toy", train__max_steps=1, train__valid_every=1)
    assert toy == [cfg.model]  # its check ran once, when the Config was built
    assert isinstance(build.build_model(cfg, 50), ToyModel)
    run = api.train(cfg, tmp_path / "run")
    assert run.step == 1 and run.best_checkpoint.exists()
    for beam in (1, 2):
        out = api.translate(["Ein Hund läuft."], run.best_checkpoint, beam=beam)
        assert len(out) == 1 and isinstance(out[0].text, str)


def test_an_unknown_architecture_names_the_known_ones():
    with pytest.raises(ConfigError, match=r"model.arch: unknown architecture 'gru' \(known: lstm, transformer\)"):
        Config.from_dict({"model": {"arch": "gru"}})
    with pytest.raises(ConfigError, match=r"model.arch: unknown architecture 'gru' \(known: lstm, transformer\)"):
        build.architecture(ModelConfig(arch="gru"), 10)


def test_the_built_in_architectures_are_registered():
    from scanmt.choices import ARCHS
    from scanmt.model.lstm.model import LSTMModel
    from scanmt.model.transformer.model import TransformerModel

    assert build.architectures() == {"lstm": LSTMModel, "transformer": TransformerModel}
    assert tuple(config_mod._ARCHITECTURE_CHECKS) == ARCHS
