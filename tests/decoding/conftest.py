"""Fixtures of the decoding tests."""

import pytest

from scanmt.training.trainer import Trainer
from tests.conftest import tiny_config


@pytest.fixture(scope="module")
def model(small_data_dir, tmp_path_factory):
    """A tiny LSTM trained for 3 updates on the small Multi30k subset: its ``best.pt``."""
    out = tmp_path_factory.mktemp("run")
    Trainer(tiny_config(small_data_dir, train__max_steps=3), out).train()
    return out / "best.pt"
