"""The functions of ``scanmt.api`` check the types of their arguments first (issue 52, item 14).

``api.train(None, out)``, ``api.train({...}, out)``, ``translate_file(dict)``, ``stress(dict)``, ``average(None)``,
``prepare(None)``, ``translate(["x"], 5)`` and ``load_translator(None)`` raised a raw ``AttributeError`` or
``TypeError`` from deep inside; ``EvaluateRequest(metrics=("bleu", "nope"))`` was accepted and failed later with a
``KeyError``.  Now each is one line naming the function, the argument, the types it takes and what was given.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from scanmt import api
from scanmt.config import Config
from scanmt.errors import ConfigError

from .test_request_checks import _one_line


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda out: api.train(None, out), "api.train: config must be Config or TrainRequest, got None"),
        (lambda out: api.train({"train": {"max_steps": 1}}, out),
         "api.train: config must be Config or TrainRequest, got dict {'train': {'max_steps': 1}}"),
        (lambda out: api.train(Config(), None), "api.train: out (the run folder) must be str or Path, got None"),
        (lambda out: api.train(Config(), out, resume="yes"), "api.train: resume must be bool, got str 'yes'"),
        (lambda out: api.translate_file({"model": "m.pt"}),
         "api.translate_file: request must be TranslateRequest, got dict {'model': 'm.pt'}"),
        (lambda out: api.stress({}), "api.stress: request must be StressRequest, got dict {}"),
        (lambda out: api.average(None), "api.average: request must be AverageRequest, got None"),
        (lambda out: api.prepare(None), "api.prepare: request must be PrepareRequest, got None"),
        (lambda out: api.translate(["x"], 5), "api.translate: model must be str, Path or Translator, got int 5"),
        (lambda out: api.translate(["x"], out, decode={"beam": 2}),
         "api.translate: decode must be DecodeOverrides or None, got dict {'beam': 2}"),
        (lambda out: api.load_translator(None), "api.load_translator: model must be str or Path, got None"),
        (lambda out: api.load_translator(out, device=0), "api.load_translator: device must be str, got int 0"),
        (lambda out: api.evaluate(out), "api.evaluate: request must be EvaluateRequest, got PosixPath"),
        (lambda out: api.remeasure_boundary(out, batch_size=True),
         "api.remeasure_boundary: batch_size must be int or None, got bool True"),
        (lambda out: api.load_penalties(1.5), "api.load_penalties: path must be str or Path, got float 1.5"),
    ],
)
def test_a_wrong_argument_type_is_one_line_naming_it(call, message, tmp_path):
    with pytest.raises(ConfigError) as exc:
        call(tmp_path / "out")
    assert _one_line(exc).startswith(message)
    assert not (tmp_path / "out").exists()  # refused before any work


def _public_functions() -> list[str]:
    return [name for name in api.__all__ if inspect.isfunction(getattr(api, name))]


@pytest.mark.parametrize("name", _public_functions())
def test_every_public_function_checks_its_first_argument(name):
    """None for the main argument of each function of ``api.__all__``: a one-line ConfigError naming the argument
    (a test, so that a function added later cannot leave it out)."""
    function = getattr(api, name)
    first = next(iter(inspect.signature(function).parameters))
    with pytest.raises(ConfigError) as exc:
        function(None, *([Path("m.pt")] if name == "translate" else []))
    assert first in _one_line(exc)


def test_the_public_functions_are_the_ones_the_issue_names_and_more():
    assert {"train", "translate", "translate_file", "stress", "average", "prepare", "load_translator", "evaluate",
            "align", "fertility", "tune_penalties", "remeasure_boundary", "load_penalties"} <= set(_public_functions())


def test_evaluate_request_checks_the_metric_names():
    with pytest.raises(ConfigError) as exc:
        api.EvaluateRequest(metrics=("bleu", "nope"))
    assert _one_line(exc) == ("--metrics: unknown metric 'nope'; choose from bleu, tok-bleu, meteor, rep, drop, "
                              "attn-stats, aer, saer")
    assert api.EvaluateRequest(metrics=("bleu", "aer")).metrics == ("bleu", "aer")
