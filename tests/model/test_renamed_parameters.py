"""State dicts written before issue 54 name the CovVector's parameters ``decoder.coverage.*`` (the decoder's
attribute is ``covvector`` now): they load, by every path, into the same model.
"""

from __future__ import annotations

import pytest
import torch

from scanmt.config import Config
from scanmt.model.averaging import average_checkpoints
from scanmt.model.build import build_model
from scanmt.model.checkpoint import Checkpoint

CFG = Config.from_dict({"model": {"emb_size": 8, "hidden_size": 8, "coverage": {"type": "nn_gru", "dim": 2}}})


def _old_style(weights: dict) -> dict:
    return {k.replace("decoder.covvector.", "decoder.coverage."): v.clone() for k, v in weights.items()}


@pytest.fixture
def new() -> dict:
    torch.manual_seed(0)
    return build_model(CFG, 20).state_dict()


def _same(a: dict, b: dict) -> bool:
    return list(a) == list(b) and all(torch.equal(a[k], b[k]) for k in a)


def test_the_parameters_have_the_new_names(new):
    assert any(k.startswith("decoder.covvector.") for k in new)
    assert not any(k.startswith("decoder.coverage.") for k in new)


def test_an_old_state_dict_builds_the_same_model(new):
    old = _old_style(new)
    assert any(k.startswith("decoder.coverage.") for k in old)
    assert _same(build_model(CFG, 20, old).state_dict(), new)


def test_load_state_dict_renames_too(new):
    """Resuming a run (``model.load_state_dict(ckpt.weights)``, strict) from an old last.pt."""
    model = build_model(CFG, 20)
    result = model.load_state_dict(_old_style(new))
    assert not result.missing_keys and not result.unexpected_keys
    assert _same(model.state_dict(), new)


def test_old_and_new_checkpoints_average_together(new):
    """A run resumed across the rename keeps step checkpoints of both kinds."""
    config = CFG.to_dict()
    twice = {k: v * 2 if v.is_floating_point() else v for k, v in new.items()}
    ckpts = [Checkpoint(config=config, weights=_old_style(new), pipeline={"p": 1}, progress={"step": 1}),
             Checkpoint(config=config, weights=twice, pipeline={"p": 1}, progress={"step": 2})]
    mean = average_checkpoints(ckpts).weights
    assert list(mean) == list(new)
    for k, v in new.items():
        expected = v * 1.5 if v.is_floating_point() else v
        torch.testing.assert_close(mean[k], expected)
