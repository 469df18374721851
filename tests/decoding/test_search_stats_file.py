"""``scanmt translate --search-stats FILE`` (issue 29, item 5): what the searches did, as JSON, for the grid report.

The file's numbers are checked against :class:`SearchStats` of the translations and, independently, against
the hypotheses' own ``support``, ``exact`` and ``forced``; a tiny model with an entmax15 output makes the
support smaller than the vocabulary, so a file that reported softmax's numbers would fail.
"""

from __future__ import annotations

import json

import pytest

from scanmt.api import TranslateRequest, translate_file
from scanmt.cli.main import main
from scanmt.decoding.translator import SearchStats
from scanmt.training.trainer import Trainer
from tests.conftest import assert_one_line_error, tiny_config
from tests.decoding.test_translate_outputs import SENTENCES, _input, _no_decoding


@pytest.fixture(scope="module")
def sparse_model(small_data_dir, tmp_path_factory):
    """A tiny LSTM with an entmax15 output, trained for 3 updates: its ``best.pt``."""
    out = tmp_path_factory.mktemp("run-entmax15")
    Trainer(tiny_config(small_data_dir, train__max_steps=3, model__output="entmax15"), out).train()
    return out / "best.pt"


def test_the_file_holds_the_search_stats_of_the_translations(sparse_model, tmp_path):
    inp = _input(tmp_path, [SENTENCES[0], "", *SENTENCES[1:]])  # the empty line is not searched
    path = tmp_path / "test.search.json"
    request = TranslateRequest(model=str(sparse_model), input=inp, output=str(tmp_path / "out.en"), beam=3,
                               search_stats=str(path))
    result = translate_file(request)
    doc = json.loads(path.read_text(encoding="utf-8"))
    stats = SearchStats.of(result.translations)
    assert doc == {"output": "entmax15", "beam": 3, "sentences": stats.sentences, "mean_support": stats.mean_support,
                   "exact": stats.exact, "forced": stats.forced, "exact_share": stats.exact_share}
    # the same numbers from the hypotheses themselves
    hyps = [t.hypothesis for t in result.translations if t.src_pieces]
    assert len(hyps) == doc["sentences"] == len(SENTENCES)
    supports = [k for h in hyps for k in h.support]
    assert doc["mean_support"] == pytest.approx(sum(supports) / len(supports))
    assert 1 <= doc["mean_support"] < vocab_size(sparse_model)  # sparse: not the whole vocabulary
    assert doc["exact"] == sum(bool(h.exact) for h in hyps) and doc["forced"] == sum(h.forced for h in hyps)
    assert doc["exact_share"] == pytest.approx(doc["exact"] / len(SENTENCES))
    assert f"  search statistics: {path}" in result.summary(request)


def vocab_size(model) -> int:
    from scanmt.model.checkpoint import Checkpoint

    return len(Checkpoint.load(model).text_pipeline().vocab)


def test_the_command_writes_the_same_file(sparse_model, tmp_path, capsys):
    inp = _input(tmp_path, SENTENCES)
    api_file, cli_file = tmp_path / "api.json", tmp_path / "cli.json"
    translate_file(TranslateRequest(model=str(sparse_model), input=inp, output=str(tmp_path / "a.en"), beam=2,
                                    search_stats=str(api_file)))
    assert main(["translate", "--model", str(sparse_model), "--input", inp, "--output", str(tmp_path / "b.en"),
                 "--beam", "2", "--search-stats", str(cli_file)]) == 0
    assert f"search statistics: {cli_file}" in capsys.readouterr().out
    assert json.loads(cli_file.read_text(encoding="utf-8")) == json.loads(api_file.read_text(encoding="utf-8"))


def test_softmax_reports_the_whole_vocabulary(model, tmp_path):
    path = tmp_path / "s.json"
    translate_file(TranslateRequest(model=str(model), input=_input(tmp_path, SENTENCES), output=str(tmp_path / "o"),
                                    search_stats=str(path)))
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert doc["output"] == "softmax" and doc["forced"] == 0
    assert doc["mean_support"] == vocab_size(model)


def test_with_force_target_or_on_another_output_it_is_refused(model, tmp_path, capsys, monkeypatch):
    _no_decoding(monkeypatch)
    inp, stats = _input(tmp_path, SENTENCES), tmp_path / "s.json"
    base = ["translate", "--model", str(model), "--input", inp, "--output", str(tmp_path / "o.en")]
    assert_one_line_error(capsys, [*base, "--force-target", inp, "--search-stats", str(stats)],
                          "--search-stats describes the beam searches", "drop --search-stats")
    assert_one_line_error(capsys, [*base, "--search-stats", str(tmp_path / "o.en")], "name the same file")
    assert_one_line_error(capsys, [*base[:-1], "-", "--search-stats", "-"], "--output and --search-stats are all -")
    assert not stats.exists()
