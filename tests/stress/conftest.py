"""A tiny model trained for 3 steps, a small word aligner and a 9-line test set, shared by the stress tests."""

from __future__ import annotations

import pytest

from scanmt import api
from tests.conftest import tiny_config

N_LINES = 9  # K 2: 4 joined inputs, the 9th line left out


@pytest.fixture(scope="session")
def stress_setup(small_data_dir, tmp_path_factory):
    """``(DIR, checkpoint)``: a model trained for 3 steps, a small word aligner (DIR/align) and a 9-line test set
    (DIR/test.raw.{de,en}, so that DIR serves as a prepared data folder)."""
    from scanmt.data.align import Aligner, AlignerSettings
    from scanmt.data.tokenize import tokenize_all

    tmp = tmp_path_factory.mktemp("stress")
    run = api.train(tiny_config(small_data_dir, train__max_steps=3), tmp / "run")
    de = (small_data_dir / "train.raw.de").read_text(encoding="utf-8").splitlines()[:400]
    en = (small_data_dir / "train.raw.en").read_text(encoding="utf-8").splitlines()[:400]
    aligner = Aligner(AlignerSettings(n_samplers=1), info={"level": "word", "src_lang": "de", "tgt_lang": "en"})
    aligner.fit(tokenize_all(de, "de"), tokenize_all(en, "en"))
    aligner.save(tmp / "align" / "word")
    for lang in ("de", "en"):
        lines = (small_data_dir / f"test.raw.{lang}").read_text(encoding="utf-8").splitlines()[:N_LINES]
        (tmp / f"test.raw.{lang}").write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    return tmp, run.best_checkpoint
