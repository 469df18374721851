"""The Python API on a tiny model: train from a Config, translate lines, decode settings built once."""

from __future__ import annotations

import dataclasses

import pytest

from scanmt import api
from scanmt.errors import ConfigError
from tests.conftest import tiny_config


@pytest.fixture(scope="module")
def run(small_data_dir, tmp_path_factory) -> api.TrainResult:
    return api.train(tiny_config(small_data_dir, train__max_steps=3), tmp_path_factory.mktemp("run"))


def test_train_returns_the_run(run):
    assert run.step == 3 and run.is_main and run.world_size == 1 and run.parameters > 0
    assert run.best_checkpoint.exists() and run.last_valid_ppl is not None


def test_translate_lines(run):
    out = api.translate(["Ein Hund läuft.", "", "Eine Frau liest."], run.best_checkpoint, beam=2)
    assert len(out) == 3 and out[1].text == "" and out[1].pieces == []
    assert all(isinstance(t.text, str) for t in out)


def test_decode_settings_are_a_new_value_checked_once(run, tmp_path, monkeypatch):
    import scanmt.decoding.translator as translator_mod

    penalties = tmp_path / "p.yaml"
    penalties.write_text("length_alpha: 0.4\ncoverage_beta: 0.2\nbleu: 1.0\n")
    calls = []
    check = translator_mod.check_decode_config
    monkeypatch.setattr(translator_mod, "check_decode_config", lambda d: (calls.append(d), check(d)))
    tr = api.load_translator(run.best_checkpoint)
    base = tr.decode
    assert calls == []  # the checkpoint's settings were checked when its Config was built
    tr = api.load_translator(run.best_checkpoint, decode=api.DecodeOverrides(penalties, coverage_beta=0.6,
                                                                              batch_size=5))
    d = tr.decode
    assert (d.length_alpha, d.coverage_beta, d.batch_size) == (0.4, 0.6, 5) and calls == [d]
    assert dataclasses.replace(d, length_alpha=base.length_alpha, coverage_beta=base.coverage_beta,
                               batch_size=base.batch_size) == base
    assert tr.config.decode == base  # the checkpoint's config is not patched
    tr.translate_lines(["Ein Hund läuft."], beam=2)
    assert len(calls) == 1  # searching (beam search per batch) does not check again


def test_bad_decode_settings_name_the_key(run):
    with pytest.raises(ConfigError, match="decode.coverage_eps"):
        api.load_translator(run.best_checkpoint, decode=api.DecodeOverrides(coverage_eps=2.0))
    with pytest.raises(ConfigError, match=r"decode.min_len must be >= 0 \(0 allows an empty translation\), got -1"):
        api.load_translator(run.best_checkpoint, decode=api.DecodeOverrides(min_len=-1))


@pytest.mark.parametrize("beam", [1, 3])
def test_min_len_reaches_the_search(run, beam):
    """The checkpoint's decode.min_len is 1 (no empty translation of a non-empty line); an override
    reaches greedy and beam search alike."""
    assert api.load_translator(run.best_checkpoint).decode.min_len == 1
    tr = api.load_translator(run.best_checkpoint, decode=api.DecodeOverrides(min_len=7))
    out = tr.translate_lines(["Ein Hund läuft.", "", "Eine Frau liest."], beam=beam)
    assert [len(t.pieces) >= 7 for t in out] == [True, False, True]  # an empty line stays empty
