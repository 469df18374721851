import contextlib
import math

import pytest
import torch

from scanmt.config import DecodeConfig, ModelConfig
from scanmt.errors import ConfigError
from scanmt.data.vocab import BOS_ID, EOS_ID, PAD_ID
from scanmt.decoding.penalties import length_penalty
from scanmt.decoding.search import SearchSettings, search
from scanmt.model.lstm.model import LSTMModel


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(3)
    m = LSTMModel(ModelConfig(emb_size=16, hidden_size=16, dropout=0.0), 12).eval()
    return m


def _src():
    return torch.tensor([[5, 6, 7, 8, 9], [9, 10, PAD_ID, PAD_ID, PAD_ID], [7, 7, 7, PAD_ID, PAD_ID]]), torch.tensor([5, 2, 3])


def _argmax_decode(model, src, n, max_len):
    """An independent greedy decoder: one sentence at a time, full teacher-forced recompute of the
    prefix at every step (no state, no beam bookkeeping), the most likely word until ``</s>``."""
    out = []
    for b in range(src.size(0)):
        x, L = src[b : b + 1, : int(n[b])], n[b : b + 1]
        prefix, log_prob = [BOS_ID], 0.0
        while True:
            logits = model(x, L, torch.tensor([prefix])).logits[0, -1]
            if len(prefix) == max_len(int(n[b])):  # the last position: only </s>
                word = EOS_ID
            else:
                word = int(logits.argmax())
            log_prob += float(torch.log_softmax(logits.float(), -1)[word])
            if word == EOS_ID:
                break
            prefix.append(word)
        out.append((prefix[1:], log_prob))
    return out


def test_beam_of_one_is_greedy_search(model):
    src, n = _src()
    with torch.no_grad():
        want = _argmax_decode(model, src, n, lambda length: int(length * 2.0 + 10))
    for h, (tokens, log_prob) in zip(search(model, src, n, settings=SearchSettings(beam=1)), want):
        assert h.tokens == tokens
        assert math.isclose(h.log_prob, log_prob, rel_tol=1e-5, abs_tol=1e-5)


def test_beam_finds_at_least_greedy_score(model):
    src, n = _src()
    g = search(model, src, n, settings=SearchSettings(beam=1))
    b = search(model, src, n, settings=SearchSettings(beam=5))
    for x, y in zip(g, b):
        assert y.log_prob >= x.log_prob - 1e-5


def test_hypotheses_respect_max_length_and_shapes(model):
    src, n = _src()
    for h, length in zip(search(model, src, n, settings=SearchSettings(beam=4, max_len_a=0.0, max_len_b=3)), n.tolist()):
        assert len(h.tokens) + 1 <= 3
        assert EOS_ID not in h.tokens
        assert h.attention.shape == (len(h.tokens) + 1, length)
        torch.testing.assert_close(h.attention.sum(1), torch.ones(len(h.tokens) + 1))


def test_finished_hypotheses_are_kept(model):
    """A hypothesis that ends early must survive even if longer ones keep the beam busy."""
    src, n = _src()
    # bias the generator towards </s> at the first step only through a huge bias; the beam
    # must return a finished (empty) hypothesis whose score equals log P(</s>)
    with eos_bias(model, 8.0):
        hyps = search(model, src, n, settings=SearchSettings(beam=3, min_len=0))
        g = search(model, src, n, settings=SearchSettings(beam=1, min_len=0))
    for h, gh in zip(hyps, g):
        assert h.tokens == [] and gh.tokens == []
        assert math.isclose(h.log_prob, gh.log_prob, rel_tol=1e-5)


@contextlib.contextmanager
def eos_bias(model, bias: float):
    """``</s>`` made the most likely word at every step (by ``bias`` on the generator), for the block."""
    with torch.no_grad():
        model.generator.bias[EOS_ID] += bias
    try:
        yield
    finally:
        with torch.no_grad():
            model.generator.bias[EOS_ID] -= bias


@pytest.mark.parametrize("beam", [1, 3])
@pytest.mark.parametrize("min_len", [1, 2, 4])
def test_no_end_of_sentence_before_min_len(model, beam, min_len):
    """A model that wants to stop at once (an empty translation) gets exactly ``min_len`` words, the
    highest-scoring ones under that rule: log P adds up along the output and beats every other length."""
    src, n = _src()
    with eos_bias(model, 8.0):
        hyps = search(model, src, n, settings=SearchSettings(beam=beam, min_len=min_len))
        longer = search(model, src, n, settings=SearchSettings(beam=beam, min_len=min_len + 1))
    for h, h2 in zip(hyps, longer):
        assert len(h.tokens) == min_len and EOS_ID not in h.tokens
        assert h.attention.shape[0] == min_len + 1
        assert h.log_prob > h2.log_prob  # one more word costs probability: the rule, not the model, sets the length


def test_max_len_wins_over_min_len(model):
    src, n = _src()
    with eos_bias(model, 8.0):
        for h in search(model, src, n, settings=SearchSettings(beam=3, min_len=5, max_len_a=0.0, max_len_b=3)):
            assert len(h.tokens) == 2  # the maximum of 3 positions includes </s>


@pytest.mark.parametrize("length, alpha, expected", [(1, 0.0, 1.0), (1, 1.0, 1.0), (7, 1.0, 2.0), (13, 0.5, math.sqrt(3.0)), (3, 0.6, (8 / 6) ** 0.6)])
def test_length_penalty_formula(length, alpha, expected):
    assert math.isclose(float(length_penalty(length, alpha)), expected)
    assert math.isclose(float(length_penalty(torch.tensor([length]), alpha)[0]), expected, rel_tol=1e-6)


def test_search_settings_are_checked_when_built():
    with pytest.raises(ConfigError, match="decode.beam"):
        SearchSettings(beam=0)
    with pytest.raises(ConfigError, match="decode.length_alpha"):
        SearchSettings(length_alpha=-1.0)
    with pytest.raises(ConfigError, match="decode.min_len"):
        SearchSettings(min_len=-1)


def test_greedy_settings_of_a_decode_config_have_no_penalties():
    d = DecodeConfig(beam=5, length_alpha=0.6, coverage_beta=0.4, penalty_mode="step")
    assert SearchSettings.of(d).length_alpha == 0.6 and SearchSettings.of(d).beam == 5
    greedy = SearchSettings.of(d, beam=1)
    assert (greedy.beam, greedy.length_alpha, greedy.coverage_beta) == (1, 0.0, 0.0)


def test_length_penalty_changes_ranking_towards_longer(model):
    src, n = _src()
    short = search(model, src, n, settings=SearchSettings(beam=5, length_alpha=0.0))
    long = search(model, src, n, settings=SearchSettings(beam=5, length_alpha=2.0))
    assert sum(len(h.tokens) for h in long) >= sum(len(h.tokens) for h in short)
    for h in long:
        assert math.isclose(h.score, h.log_prob / float(length_penalty(len(h.tokens) + 1, 2.0)), rel_tol=1e-6)
