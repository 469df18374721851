"""P(</s>) after the first sentence of a joined input (scanmt.decoding.boundary), against the search's own
incremental path (encode, init_state, step), and where the boundary is."""

from __future__ import annotations

import pytest
import torch

from scanmt.cli.main import main
from scanmt.data.vocab import BOS_ID, EOS_ID, SPECIALS, Vocab
from scanmt.decoding.boundary import (
    CLOSING,
    STOP_PROBABILITY,
    BoundaryEos,
    boundary_eos,
    closing_word,
    first_sentence_steps,
    share_at_least,
)
from scanmt.decoding.translator import Translator
from scanmt.io import read_lines
from scanmt.metrics.stress import join_groups
from tests.conftest import tiny_config


def test_first_sentence_steps():
    joined = [["a", "b", "c"], ["a", "b"], ["x", "b", "c"], ["a"], []]
    first = [["a", "b"], ["a", "b"], ["a", "b"], ["a"], []]
    # exact prefix and more after it; nothing after it; another beginning; nothing after; an empty first sentence
    assert first_sentence_steps(joined, first) == [2, None, None, None, None]
    with pytest.raises(ValueError, match="2 joined targets but 1 first"):
        first_sentence_steps(joined[:2], first[:1])


def test_the_summary_counts_only_the_measured_inputs():
    b = BoundaryEos([0.995, None, 0.2, 0.49, 0.5], [True, None, False, True, False], [0.9, None, 0.8, 0.7, 0.6],
                    [0.1, None, None, 0.3, 0.7], [False, None, None, False, True])
    assert b.left_out == 1 and b.measured == [0.995, 0.2, 0.49, 0.5]
    assert b.median == pytest.approx(0.495) and b.median_at_end == pytest.approx(0.75)
    assert b.stop_share == pytest.approx(50.0) and STOP_PROBABILITY == 0.5  # 0.5 itself counts
    assert share_at_least(b.p_eos, 0.99) == pytest.approx(25.0) and share_at_least([None], 0.5) is None
    assert b.argmax_share == pytest.approx(50.0)
    assert b.median_close == pytest.approx(0.3) and b.close_argmax_share == pytest.approx(100 / 3)
    empty = BoundaryEos([None], [None], [None], [None], [None])
    assert empty.median is None and empty.stop_share is None and empty.argmax_share is None
    assert empty.median_close is None and empty.close_argmax_share is None


def test_closing_word():
    v = Vocab(list(SPECIALS) + ["\u2581.", "!", "\u2581a", "\u2581?"])
    assert [closing_word(p, v) for p in ("\u2581.", "!", "\u2581?", "\u2581a", ".", "\u2581!")] == [5, 6, 8, None, None, None]


def _step_oracle(tr: Translator, src_pieces: list[str], tgt_pieces: list[str], at: int,
                 word: int = EOS_ID) -> tuple[float, bool]:
    """P(``word``) after ``at`` target pieces, one word at a time through the search's interface (no padding, no
    teacher-forced forward), and whether ``word`` is the most probable word there."""
    v, model = tr.pipeline.vocab, tr.model
    src = torch.tensor([v.encode(src_pieces)])
    fert = torch.tensor(tr.source_bounds([src_pieces])) if model.constrained else None
    with torch.no_grad():
        enc = model.encode(src, torch.tensor([len(src_pieces)]), fert)
        state = model.init_state(enc)
        for y in [BOS_ID] + v.encode(tgt_pieces)[:at]:
            step = model.step(torch.tensor([y]), state, enc)
            state = step.state
    log_p = step.log_probs[0].float()
    return float(log_p[word].exp()), int(log_p.argmax()) == word


@pytest.mark.parametrize("arch, transform", [("lstm", "softmax"), ("lstm", "csparsemax"),
                                             ("transformer", "csoftmax")])
def test_boundary_eos_agrees_with_step_by_step_decoding(small_data_dir, tmp_path, arch, transform):
    """A constrained model reads its bounds from its checkpoint's provider (constant 2 here), as translate does;
    inputs are batched and padded, and each agrees with the same input read alone, one step at a time."""
    config, run = tmp_path / "c.yaml", tmp_path / "run"
    extra = {} if transform == "softmax" else {"model__attention__fertility__strategy": "constant",
                                               "model__attention__fertility__value": 2.0}
    if arch == "transformer":
        extra.update(model__arch="transformer", model__transformer__heads=2, model__transformer__ff_size=32,
                     model__transformer__encoder_layers=1, model__transformer__decoder_layers=2)
    tiny_config(small_data_dir, train__max_steps=5, train__checkpoint_every=5, model__attention__transform=transform,
                decode__batch_size=7, **extra).save_yaml(config)
    assert main(["train", "--config", str(config), "--out", str(run)]) == 0
    tr = Translator.from_checkpoint(run / "best.pt")
    assert tr.model.constrained == (transform != "softmax")
    src, ref = read_lines(small_data_dir / "test.raw.de"), read_lines(small_data_dir / "test.raw.en")
    k = 2
    joined_src, joined_ref = join_groups(src, k), join_groups(ref, k)
    b = boundary_eos(tr, joined_src, joined_ref, [ref[g * k] for g in range(len(joined_ref))])
    assert len(b.p_eos) == 50 and b.left_out <= 5
    checked = closed = 0
    for g, (p, best, end) in enumerate(zip(b.p_eos, b.eos_most_probable, b.p_eos_at_end)):
        if p is None:
            assert b.p_close[g] is None
            continue
        tgt = tr.pipeline.target_pieces_all([joined_ref[g]])[0]
        at = len(tr.pipeline.target_pieces_all([ref[g * k]])[0])
        assert tgt[:at] == tr.pipeline.target_pieces_all([ref[g * k]])[0] and len(tgt) > at
        # P(close) exactly where the first sentence's last subword is closing punctuation
        assert (b.p_close[g] is not None) == (tgt[at - 1].lstrip("\u2581") in CLOSING)
        if g % 10 == 0:  # (every tenth: the oracle decodes one word at a time)
            src_pieces = tr.pipeline.source_pieces_all([joined_src[g]])[0]
            want_p, want_best = _step_oracle(tr, src_pieces, tgt, at)
            assert p == pytest.approx(want_p, abs=1e-5) and best == want_best
            assert end == pytest.approx(_step_oracle(tr, src_pieces, tgt, len(tgt))[0], abs=1e-5)
            if b.p_close[g] is not None:
                want_close = _step_oracle(tr, src_pieces, tgt, at - 1, tr.pipeline.vocab.stoi[tgt[at - 1]])
                assert b.p_close[g] == pytest.approx(want_close[0], abs=1e-5)
                assert b.close_most_probable[g] == want_close[1]
                closed += 1
            checked += 1
    assert checked >= 4 and closed >= 3


def test_forced_word_probs_refuses_a_step_past_the_target_or_a_word_past_the_vocabulary(small_data_dir, tmp_path):
    run = tmp_path / "run"
    config = tmp_path / "c.yaml"
    tiny_config(small_data_dir, train__max_steps=2, train__checkpoint_every=2).save_yaml(config)
    assert main(["train", "--config", str(config), "--out", str(run)]) == 0
    tr = Translator.from_checkpoint(run / "best.pt")
    with pytest.raises(ValueError, match="sentence 0: step 3 outside 0..2"):
        tr.forced_word_probs([["a"]], [["x", "y"]], [[(3, EOS_ID)]])
    n = len(tr.pipeline.vocab)
    with pytest.raises(ValueError, match=f"sentence 1: word id {n} outside the vocabulary's 0..{n - 1}"):
        tr.forced_word_probs([["a"], ["a"]], [["x"], ["x"]], [[(0, EOS_ID)], [(1, n)]])
    with pytest.raises(ValueError, match="2 sources, 2 targets and 1 query lists"):
        tr.forced_word_probs([["a"], ["a"]], [["x"], ["x"]], [[(0, EOS_ID)]])
    # several queries of one sentence come back in their order, each as the same query asked alone
    both = tr.forced_word_probs([["a"]], [["x", "y"]], [[(2, EOS_ID), (0, 5), (2, 5)]])[0]
    alone = [tr.forced_word_probs([["a"]], [["x", "y"]], [[q]])[0][0] for q in [(2, EOS_ID), (0, 5), (2, 5)]]
    assert [p for p, _ in both] == pytest.approx([p for p, _ in alone]) and [b for _, b in both] == [b for _, b in alone]
