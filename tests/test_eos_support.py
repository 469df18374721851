"""scripts/eos_support.py --joined: where the first sentence of a joined stress input ends, and P(</s>) there."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from scanmt.cli.main import main
from scanmt.data.pipeline import TextPipeline
from scanmt.data.vocab import BOS_ID
from scanmt.decoding.translator import Translator
from scanmt.io import read_lines
from tests.conftest import load_module, tiny_config

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "eos_support.py"


def _script():
    return load_module(SCRIPT)


def test_the_boundary_is_where_the_second_sentence_begins(small_data_dir):
    es = _script()
    pipeline = TextPipeline.from_data_dir(small_data_dir, "de", "en")
    src, ref = read_lines(small_data_dir / "test.raw.de"), read_lines(small_data_dir / "test.raw.en")
    inputs, left_out = es.boundary_inputs(pipeline, src, ref, 2)
    assert len(inputs) + left_out == 50 and len(inputs) >= 45
    for group, src_pieces, ref_pieces, at in inputs:
        first = pipeline.target_pieces_all([ref[2 * group]])[0]
        assert ref_pieces[:at] == first and len(ref_pieces) > at
        assert src_pieces == pipeline.source_pieces_all([f"{src[2 * group]} {src[2 * group + 1]}"])[0]
    # where the join leaves both sentences' pieces as they were, the rest is exactly the second sentence
    exact = [g for g, _, r, at in inputs if r[at:] == pipeline.target_pieces_all([ref[2 * g + 1]])[0]]
    assert len(exact) >= 0.9 * len(inputs)
    # three at a time: the boundary is still after the first sentence
    inputs3, left_out3 = es.boundary_inputs(pipeline, src, ref, 3)
    assert len(inputs3) + left_out3 == 33
    assert all(r[:at] == pipeline.target_pieces_all([ref[3 * g]])[0] for g, _, r, at in inputs3)


@pytest.mark.parametrize("transform", ["softmax", "csparsemax"])
def test_boundary_probabilities_of_a_trained_model(small_data_dir, tmp_path, transform):
    """A constrained model reads its bounds from its checkpoint's provider (constant 2 here), as translate does."""
    es = _script()
    config, run = tmp_path / "c.yaml", tmp_path / "run"
    extra = {} if transform == "softmax" else {"model__attention__fertility__strategy": "constant",
                                               "model__attention__fertility__value": 2.0}
    tiny_config(small_data_dir, train__max_steps=5, train__checkpoint_every=5, model__attention__transform=transform,
                **extra).save_yaml(config)
    assert main(["train", "--config", str(config), "--out", str(run)]) == 0
    cfg, rows, left_out = es.boundary_eos(run, small_data_dir, "test", 2, batch=7)
    assert len(rows) + left_out == 50 and cfg.model.attention.transform == transform
    for at, end, argmax in rows:
        assert 0.0 <= at <= 1.0 and 0.0 <= end <= 1.0 and isinstance(argmax, bool)
    # one joined input alone, unpadded, gives the same P(</s>) after its first sentence as the padded batch
    tr = Translator.from_checkpoint(run / "best.pt")
    (_, src, ref, at), = es.boundary_inputs(tr.pipeline, read_lines(small_data_dir / "test.raw.de")[:2],
                                            read_lines(small_data_dir / "test.raw.en")[:2], 2)[0]
    v = tr.pipeline.vocab
    src_ids, tgt_in = torch.tensor([v.encode(src)]), torch.tensor([[BOS_ID] + v.encode(ref)])
    assert tr.model.constrained == (transform == "csparsemax")
    fert = torch.tensor(tr.source_bounds([src])) if tr.model.constrained else None
    if fert is not None:
        assert fert.shape == (1, len(src)) and bool((fert == 2.0).all())
    with torch.no_grad():
        logits = tr.model(src_ids, torch.tensor([len(src)]), tgt_in, fert).logits.float()
    p = torch.softmax(logits[0, at], dim=-1)[es.EOS_ID]
    assert float(p) == pytest.approx(rows[0][0], abs=1e-5)
