"""Search with zero-probability words (a sparse ``model.output``; issue 29, item 3): never a NaN or ``-inf``
hypothesis, ``</s>`` reachable at the length limit, a stop when no finite extension is left, the output support
and the exactness of each search (Peters et al.), on a stub model whose next-word distribution is a table."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
import torch

from scanmt.config import ModelConfig
from scanmt.data.vocab import EOS_ID, PAD_ID
from scanmt.decoding.search import SearchSettings, search
from scanmt.decoding.translator import SearchStats, Translation
from scanmt.model.interface import DecoderState, EncoderOutput, NMTModel, Step

V = 8
A, B_, C = 5, 6, 7  # three words


@dataclass
class _State(DecoderState):
    prefix: torch.Tensor  # [N, t] the words read so far (<s> first)


class TableModel(NMTModel):
    """``P(next | prefix)`` from ``table(prefix) -> {word: probability}`` (others 0), per sentence: the source's
    first token picks the table (``tables[src[0]]``); uniform attention.  Empty beam slots are stepped too
    (with any prefix), so a table answers every prefix."""

    def __init__(self, tables):
        super().__init__(ModelConfig(output="sparsemax"), V)
        self.tables = tables
        self.steps = 0

    def encode(self, src, src_len, fertility=None):
        mask = torch.arange(src.size(1)).unsqueeze(0) < src_len.unsqueeze(1)
        return EncoderOutput(memory=src.unsqueeze(2).float(), mask=mask, fertility=None)

    def init_state(self, enc):
        n = enc.mask.size(0)
        return _State(attention_sum=torch.zeros(enc.mask.shape), prefix=torch.empty(n, 0, dtype=torch.long))

    def step(self, y, state, enc):
        self.steps += 1
        prefix = torch.cat([state.prefix, y.unsqueeze(1)], dim=1)
        logp = torch.full((y.size(0), V), -torch.inf)
        for i, row in enumerate(prefix.tolist()):
            table = self.tables[int(enc.memory[i, 0, 0])]
            for word, p in table(tuple(row[1:])).items():
                logp[i, word] = math.log(p)
        att = enc.mask.float() / enc.mask.sum(1, keepdim=True)
        return Step(logp, att, _State(attention_sum=state.attention_sum + att, prefix=prefix))

    def forward(self, src, src_len, tgt_in, fertility=None):  # pragma: no cover - not used by search
        raise NotImplementedError

    def reset_parameters(self, init_range):  # pragma: no cover
        pass

    def probe_scores(self, on):  # pragma: no cover
        return []


def _run(tables, beam, firsts=(1,), **kw):
    model = TableModel(tables)
    src = torch.tensor([[f, 3, 3] for f in firsts])
    settings = SearchSettings(beam=beam, **{"max_len_a": 0.0, "max_len_b": 6, "min_len": 1, **kw})
    return search(model, src, torch.full((len(firsts),), 3), settings=settings), model


def _assert_sane(hyps):
    for h in hyps:
        assert math.isfinite(h.log_prob) and math.isfinite(h.score)
        assert torch.isfinite(h.attention).all() and torch.isfinite(h.attention_sum).all()
        assert h.attention.size(0) == len(h.tokens) + 1 == len(h.support)
        assert h.exact is not None


def tree_a(prefix):
    """A -> </s> (0.6); B -> A </s> (0.2), B -> </s> (0.2)."""
    return {(): {A: 0.6, B_: 0.4}, (A,): {EOS_ID: 1.0}, (B_,): {A: 0.5, EOS_ID: 0.5}, (B_, A): {EOS_ID: 1.0}}.get(prefix, {EOS_ID: 1.0})


def tree_b(prefix):
    """Greedy takes A (0.6) then A (0.33); B </s> (0.4) is better."""
    return {(): {A: 0.6, B_: 0.4}, (A,): {A: 0.55, B_: 0.45}, (B_,): {EOS_ID: 1.0}}.get(prefix, {EOS_ID: 1.0})


def test_a_beam_that_holds_every_nonzero_sequence_is_exact():
    (h,), _ = _run({1: tree_a}, beam=3)  # all three sequences fit
    _assert_sane([h])
    assert h.tokens == [A] and math.isclose(h.log_prob, math.log(0.6), rel_tol=1e-6)
    assert h.exact and not h.forced and h.support == [2, 1]


def test_greedy_is_exact_when_no_dropped_prefix_can_beat_its_result():
    (h,), _ = _run({1: tree_a}, beam=1)  # drops B (0.4 < 0.6 = the result)
    assert h.tokens == [A] and h.exact


def test_greedy_is_not_exact_when_a_dropped_prefix_could_beat_it():
    (g,), _ = _run({1: tree_b}, beam=1)
    assert g.tokens == [A, A] and math.isclose(g.log_prob, math.log(0.33), rel_tol=1e-6) and not g.exact
    (b,), _ = _run({1: tree_b}, beam=2)  # the beam holds everything: exact, and finds B </s>
    assert b.tokens == [B_] and b.exact


def test_with_a_length_penalty_only_an_exhaustive_search_is_exact():
    (g,), _ = _run({1: tree_a}, beam=1)
    assert g.exact  # by the log P bound
    # a beam of 2 with a length penalty (the bound does not hold): exact only because nothing finite was dropped
    (b,), _ = _run({1: tree_a}, beam=3, length_alpha=1.0)
    assert b.exact
    (c,), _ = _run({1: tree_b}, beam=1, length_alpha=1.0)
    assert not c.exact


def test_a_zero_probability_eos_is_forced_at_the_length_limit():
    """The output never gives </s> probability: the hypothesis finishes at the limit, log P of its words."""
    never_ends = lambda prefix: {A: 0.5, B_: 0.5} if not prefix else {A: 1.0}  # noqa: E731
    for beam in (1, 3):
        (h,), model = _run({1: never_ends}, beam=beam, max_len_b=4)
        _assert_sane([h])
        assert len(h.tokens) == 3 and h.forced
        assert math.isclose(h.log_prob, math.log(0.5), rel_tol=1e-6)
        assert model.steps == 4


def test_search_stops_when_no_finite_extension_is_left():
    """After A only </s> has probability: the beam of 3 cannot continue and stops at once (no step wasted up
    to the length limit), with the one finished hypothesis."""
    model_table = lambda prefix: {(): {A: 1.0}}.get(prefix, {EOS_ID: 1.0})  # noqa: E731
    (h,), model = _run({1: model_table}, beam=3, max_len_b=50)
    _assert_sane([h])
    assert h.tokens == [A] and h.log_prob == 0.0 and not h.forced and h.exact
    assert model.steps == 2


def test_a_sentence_with_nothing_finite_left_and_nothing_finished_gets_its_best_prefix():
    """The only word with probability after A is </s>, which min_len 3 forbids: the search stops and finishes A
    with a forced </s> (shorter than min_len) instead of an empty or NaN result."""
    table = lambda prefix: {(): {A: 0.7, B_: 0.3}}.get(prefix, {EOS_ID: 1.0})  # noqa: E731
    for beam in (1, 2):
        (h,), model = _run({1: table}, beam=beam, min_len=3, max_len_b=20)
        _assert_sane([h])
        assert h.tokens == [A] and h.forced and math.isclose(h.log_prob, math.log(0.7), rel_tol=1e-6)
        assert model.steps == 2


def test_sentences_of_one_batch_keep_their_own_rules():
    """A batch mixing a table that ends at once, one that never ends and one with full support."""
    full = lambda prefix: {w: 1 / (V - 3) for w in range(3, V)} if len(prefix) < 2 else {EOS_ID: 1.0}  # noqa: E731
    never = lambda prefix: {C: 1.0}  # noqa: E731
    short = lambda prefix: {(): {A: 1.0}}.get(prefix, {EOS_ID: 1.0})  # noqa: E731
    for beam in (1, 3):
        hyps, _ = _run({1: full, 2: never, 3: short}, beam=beam, firsts=(1, 2, 3), max_len_b=5)
        _assert_sane(hyps)
        assert hyps[1].tokens == [C] * 4 and hyps[1].forced and hyps[1].exact
        assert hyps[2].tokens == [A] and hyps[2].exact and not hyps[2].forced
        assert hyps[0].support[0] == V - 3 and not hyps[0].forced


def test_search_stats_of_translations():
    (h1,), _ = _run({1: tree_b}, beam=1)  # support [2, 2, 1], not exact
    (h2,), _ = _run({1: tree_a}, beam=3)  # support [2, 1], exact
    out = [Translation("", [], [], h) for h in (h1, h2)]
    empty = Translation("", [], [], type(h1)([], 0.0, 0.0, torch.ones(1, 1)))  # an empty line: not searched
    stats = SearchStats.of(out + [empty])
    assert stats.sentences == 2 and stats.exact == 1 and stats.exact_share == 0.5 and stats.forced == 0
    assert stats.mean_support == pytest.approx(8 / 5)
    assert "mean support 1.60 words per step; search exact for 1/2 sentences (50.0%)" in stats.describe("sparsemax")


def test_softmax_never_forces_and_reports_the_whole_vocabulary():
    from scanmt.model.lstm.model import LSTMModel

    torch.manual_seed(3)
    m = LSTMModel(ModelConfig(emb_size=16, hidden_size=16, dropout=0.0), 12).eval()
    src = torch.tensor([[5, 6, 7, 8, 9], [9, 10, PAD_ID, PAD_ID, PAD_ID]])
    for h in search(m, src, torch.tensor([5, 2]), settings=SearchSettings(beam=3)):
        assert not h.forced and set(h.support) == {12}
