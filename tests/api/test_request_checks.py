"""Issue 27: requests and API arguments check their types and ranges when built, with the CLI's messages.

Items 11 (negative limits), 12 (decode values of translate / tune-penalties / the penalties file)
and 19 (the Python API).  None of these needs a trained model: every value is refused before one
is loaded (the fertility rows aside, which use the tiny model of ``test_api.py``'s kind).
"""

from __future__ import annotations

import dataclasses
import math

import pytest

from scanmt import api
from scanmt.api.decode import DecodeOverrides, load_penalties
from scanmt.api.evaluate import EvaluateRequest
from scanmt.api.prepare import PrepareRequest
from scanmt.api.translate import TranslateRequest
from scanmt.api.tune_penalties import TunePenaltiesRequest
from scanmt.cli.main import main
from scanmt.config import Config
from scanmt.errors import ConfigError, DataError

NAN, INF = float("nan"), float("inf")


def _one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert "\n" not in text and "Traceback" not in text
    return text


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"length_alpha": NAN},
         r"--length-alpha \(decode.length_alpha\) must be in \[0, 100\] \(0 disables the length penalty\), got nan$"),
        ({"length_alpha": INF}, r"--length-alpha \(decode.length_alpha\) must be .*, got inf$"),
        ({"coverage_beta": NAN}, r"--coverage-beta \(decode.coverage_beta\) must be in \[0, 100\] .*, got nan$"),
        ({"coverage_eps": 0.0}, r"--coverage-eps \(decode.coverage_eps\) must be in \(0, 1\]"),
        ({"beam": 0}, r"--beam \(decode.beam\) must be in \[1, 1000\] \(1 = greedy\), got 0$"),
        ({"beam": -1}, r"--beam \(decode.beam\) must be in \[1, 1000\] \(1 = greedy\), got -1$"),
        ({"beam": "5"}, r"--beam: expected a whole number, got '5'$"),
        ({"beam": 2.5}, r"--beam: expected a whole number, got 2.5$"),
        ({"batch_size": 0}, r"--batch-size \(decode.batch_size\) must be in \[1, 1000000\], got 0$"),
        ({"min_output_len": -1},
         r"--min-output-len \(decode.min_len\) must be >= 0 \(0 allows an empty translation\), got -1$"),
        ({"max_len": 0}, r"--max-len must be in \[1, 10000\], got 0$"),
    ],
)
def test_translate_request_checks_its_values(fields, message):
    """Items 12 and 19: these used to be accepted (nan, beam 0) or to fail deep inside with a raw exception."""
    with pytest.raises(ConfigError, match=message) as exc:
        TranslateRequest("m.pt", "in.de", "out.en", **fields)
    _one_line(exc)


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"grid": "nan"}, r"--grid 'nan': decode.length_alpha must be in \[0, 100\] .*, got nan$"),
        ({"grid": "0,inf"}, r"--grid '0,inf': decode.length_alpha must be .*, got inf$"),
        ({"betas": "0,-1"}, r"--betas '0,-1': decode.coverage_beta must be in \[0, 100\] .*, got -1"),
        ({"limit": -1}, r"--limit must be >= 0 \(0 = all\), got -1$"),
        ({"beam": 1}, r"--beam must be in \[2, 1000\] \(penalties act in beam search only\), got 1$"),
        ({"coverage_eps": NAN}, r"--coverage-eps \(decode.coverage_eps\) must be in \(0, 1\] .*, got nan$"),
    ],
)
def test_tune_penalties_request_checks_its_values(fields, message):
    """Items 11, 12: ``--grid nan`` wrote a penalties file translate refused; ``--limit -1`` dropped the last line."""
    with pytest.raises(ConfigError, match=message) as exc:
        TunePenaltiesRequest("m.pt", "data", **fields)
    _one_line(exc)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["translate", "--length-alpha", "nan"], "--length-alpha (decode.length_alpha) must be in [0, 100]"),
        (["translate", "--coverage-beta", "nan"], "--coverage-beta (decode.coverage_beta) must be in [0, 100]"),
        (["translate", "--length-alpha", "inf"], "--length-alpha (decode.length_alpha) must be in [0, 100]"),
        (["tune-penalties", "--data", "d", "--grid", "nan"], "--grid 'nan': decode.length_alpha must be"),
        (["tune-penalties", "--data", "d", "--limit", "-1"], "--limit must be >= 0 (0 = all), got -1"),
    ],
)
def test_cli_gives_the_requests_message(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    extra = ["--input", "x", "--output", "y"] if argv[0] == "translate" else []
    assert main([argv[0], "--model", "m.pt", *extra, *argv[1:]]) == 2
    err = capsys.readouterr().err
    assert f"scanmt {argv[0]}: error: {message}" in err and err.count("\n") == 1


def test_penalties_file_and_overrides_use_the_same_ranges(tmp_path):
    """Item 12: the penalties file loader and DecodeOverrides check the decode ranges too."""
    bad = tmp_path / "p.yaml"
    bad.write_text("length_alpha: 200\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"p.yaml: decode.length_alpha must be in \[0, 100\]"):
        load_penalties(bad)
    with pytest.raises(ConfigError, match=r"decode.coverage_beta must be .*, got nan$"):
        from scanmt.config import check_decode_config

        check_decode_config(DecodeOverrides(coverage_beta=NAN).apply(Config().decode))


@pytest.mark.parametrize(
    "lines, kwargs, message",
    [
        (None, {}, r"lines: expected a sequence of sentences \(strings\), got None"),
        ("Ein Hund.", {}, r"lines: expected a sequence of sentences"),
        ([None], {}, r"lines\[0\]: expected a sentence \(a string\), got None"),
        (["a"], {"beam": "5"}, r"beam must be a whole number in \[1, 1000\] \(1 = greedy\), got '5'"),
        (["a"], {"beam": 2.5}, r"beam must be a whole number in \[1, 1000\] \(1 = greedy\), got 2.5"),
        (["a"], {"beam": 0}, r"beam must be in \[1, 1000\] \(1 = greedy\), got 0"),
        (["a"], {"max_len": -1}, r"max_len must be in \[1, 10000\], got -1"),
    ],
)
def test_translate_function_checks_its_arguments_before_loading(lines, kwargs, message, tmp_path):
    """Item 19: ``translate(None, M)``, ``[None]``, ``beam="5"`` and ``beam=2.5`` raised raw Python exceptions."""
    with pytest.raises(ConfigError, match=message) as exc:
        api.translate(lines, tmp_path / "missing.pt", **kwargs)  # refused before the checkpoint is read
    _one_line(exc)


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: EvaluateRequest(metrics="bleu"), r"--metrics: expected a sequence of values \(a tuple or list\), "
                                                  r"got 'bleu'"),
        (lambda: EvaluateRequest(drop_samples="3"), r"--drop-samples: expected a whole number, got '3'"),
        (lambda: PrepareRequest("de-en", "out", train=("a.de",)), r"--train: expected 2 values, got 1"),
        (lambda: PrepareRequest("de-en", "out", vocab_size=math.nan), r"--vocab-size: expected a whole number"),
        (lambda: TranslateRequest("m.pt", "in.de", "out.en", device=None), r"--device: expected a string, got None"),
    ],
)
def test_requests_check_field_types(build, message):
    """Item 19: ``EvaluateRequest(metrics="bleu")`` gave ``KeyError 'b'``; ``PrepareRequest(train=("a.de",))``
    an IndexError."""
    with pytest.raises(ConfigError, match=message) as exc:
        build()
    _one_line(exc)


def test_good_requests_still_build():
    r = TranslateRequest("m.pt", "in.de", "out.en", beam=1, length_alpha=0, coverage_eps=1, min_output_len=0)
    assert r.beam == 1 and dataclasses.replace(r, beam=5).beam == 5
    assert TunePenaltiesRequest("m.pt", "d", grid="0,0.5", limit=0).grids() == ([0.0, 0.5], [0.0, 0.5])
    assert EvaluateRequest(metrics=["bleu"]).metrics == ("bleu",)


def test_too_few_fertility_rows_is_one_line(small_data_dir, tmp_path):
    """Item 19: too few fertility rows gave an IndexError."""
    from tests.conftest import tiny_config

    run = api.train(tiny_config(small_data_dir, train__max_steps=1, train__checkpoint_every=1,
                                model__attention__transform="csparsemax",
                                model__attention__fertility__strategy="constant"), tmp_path / "run")
    with pytest.raises(DataError, match=r"fertility: 1 row\(s\) for 2 sentence\(s\)") as exc:
        api.translate(["Ein Hund.", "Eine Frau."], run.best_checkpoint, fertility=[[1.0, 1.0]])
    _one_line(exc)
    with pytest.raises(DataError, match=r"fertility row 1: 1 number\(s\) for \d+ source subword\(s\)"):
        api.translate(["Ein Hund."], run.best_checkpoint, fertility=[[1.0]])
