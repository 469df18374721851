"""Every request of :mod:`scanmt.api` turns into a command line (``to_argv``) that parses back into itself."""

from __future__ import annotations

import dataclasses
import importlib
import shlex
from pathlib import Path

import pytest

from scanmt import api
from scanmt.cli.main import COMMANDS, build_parser, request_from_argv

REQUESTS = [
    api.PrepareRequest(pair="de-en", out="runs/data", corpus="multi30k"),
    api.PrepareRequest(pair="de-en", out="o", mirror="m", train=("a.de", "a.en"), valid=("b.de", "b.en"),
                       test=("c.de", "c.en"), vocab_size=500, force=True),
    api.TrainRequest(config="configs/cpu-small.yaml", out="runs/x"),
    api.TrainRequest(config="c.yaml", out="o", set=("train.lr=0.5", "model.attention.transform=csparsemax"),
                     resume=True),
    api.TranslateRequest(model="m.pt", input="-", output="-"),
    api.TranslateRequest(model="m.pt", input="in.de", output="out.en", beam=1, max_len=80, length_alpha=0.2,
                         coverage_beta=0.4, coverage_eps=0.05, penalty_mode="step", penalties="p.yaml", batch_size=7,
                         attention_out="a.npz", tokenized_out="t.en", fertility="f.fert", force_target="ref.en",
                         device="cuda:0"),
    api.TranslateRequest(model="m.pt", input="in.de", output="out.en", search_stats="out.search.json"),
    api.EvaluateRequest(hyp=Path("h"), ref=Path("r")),
    api.EvaluateRequest(hyp=Path("h"), ref=Path("r"), src=Path("s"), hyp2=Path("h2"), tokenized=True, src_lang="en",
                        tgt_lang="de", align_model=Path("al"), bootstrap_samples=10, no_synonyms=True,
                        attention=Path("a.npz"), gold_align=Path("g.talp"), gold_one_indexed=True,
                        unattended_threshold=0.25, metrics=("bleu", "aer"), json=Path("m.json")),
    api.AlignRequest(data=Path("d")),
    api.AlignRequest(data=Path("d"), level="word", out=Path("o"), splits=("train", "valid"), force=True,
                     symmetrization="intersect", eflomal_model=2, samplers=1, rel_iterations=0.5, null_prior=0.3),
    api.AlignRequest(model=Path("al"), src=Path("s"), tgt=Path("t"), out=Path("l")),
    api.AlignRequest(eval_gold=Path("gold"), data=Path("d"), level="subword"),
    api.FertilityRequest(data=Path("d"), strategy="constant", value=2.0),
    api.FertilityRequest(data=Path("d"), strategy="predicted", predictor=Path("p.pt"), add=0.5,
                         splits=("valid",), align_dir=Path("al"), force=True),
    api.FertilityRequest(data=Path("d"), train_predictor=Path("o"), set=("level=word", "train.epochs=2"), resume=True),
    api.FertilityRequest(data=Path("d"), eval_predictor=Path("p.pt"), json=Path("e.json")),
    api.TunePenaltiesRequest(model="m.pt", data=Path("d")),
    api.TunePenaltiesRequest(model="m.pt", data=Path("d"), split="test", grid="0,1", alphas="0,0.5", betas="1",
                             beam=3, penalty_mode="step", coverage_eps=0.2, redecode=True, limit=5, batch_size=4,
                             out=Path("p.yaml"), device="cpu"),
    api.StressRequest(model=("m.pt",), src=Path("s.de"), ref=Path("r.en"), out=Path("o")),
    api.StressRequest(out=Path("o"), boundary_only=True, batch_size=8),
    api.StressRequest(model=("a/best.pt", "b/best.pt"), src=Path("s.de"), ref=Path("r.en"), out=Path("o"), k=(1, 3, 8),
                      names=("soft", "csparse"), beam=2, batch_size=4, align_model=Path("al"), max_source_len=500,
                      device="cuda:0"),
    api.AverageRequest(models=("a.pt", "b.pt"), out=Path("avg.pt")),
    api.AverageRequest(run=Path("runs/t"), last=5, out=Path("runs/t/average5.pt")),
]


def _cli_module(request):
    return importlib.import_module(f"scanmt.cli.{request.COMMAND.replace('-', '_')}")


@pytest.mark.parametrize("request_", REQUESTS, ids=[shlex.join(r.to_argv())[:60] for r in REQUESTS])
def test_to_argv_parses_back_into_the_same_request(request_):
    argv = request_.to_argv()
    assert argv[0] == request_.COMMAND
    args = build_parser().parse_args(argv)
    assert _cli_module(request_).request_from_args(args) == request_
    assert request_.command_line() == "scanmt " + shlex.join(argv)
    assert request_from_argv(shlex.split(request_.command_line())[1:]) == request_


#: every command whose module parses its options into a request (``request_from_args``)
REQUEST_COMMANDS = sorted(
    name.replace("_", "-") for name in COMMANDS
    if hasattr(importlib.import_module(f"scanmt.cli.{name}"), "request_from_args"))


def test_every_command_with_a_request_is_covered():
    assert {"prepare", "train", "translate", "evaluate", "align", "fertility", "tune-penalties", "stress",
            "average"} <= set(REQUEST_COMMANDS)
    assert {r.COMMAND for r in REQUESTS} == set(REQUEST_COMMANDS)


@pytest.mark.parametrize("command", REQUEST_COMMANDS)
def test_request_fields_are_the_command_options(command):
    """Each option of the command is a field of its request, with the same default (and nothing else)."""
    import argparse

    from scanmt.api.requests import option_dest

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    options = {a.dest: a.default for a in sub._actions if a.dest != "help"}
    request_cls = type(next(r for r in REQUESTS if r.COMMAND == command))
    fields = {option_dest(f): f.default for f in dataclasses.fields(request_cls)}
    assert fields.keys() == options.keys()
    for dest, default in fields.items():
        want = options[dest]
        want = tuple(want) if isinstance(want, list) else want
        if default is not dataclasses.MISSING:
            assert default == want, f"{command} --{dest}: request default {default!r}, option default {want!r}"


def test_paths_and_lists_are_kept_in_the_declared_form():
    r = api.TranslateRequest(model=Path("m.pt"), input="in", output=Path("out"))
    assert r.model == "m.pt" and r.output == "out"
    e = api.EvaluateRequest(hyp="h", ref="r", metrics=["bleu"])
    assert e.hyp == Path("h") and e.metrics == ("bleu",)
    assert api.TrainRequest(config=Path("c.yaml"), out="o", set=["a=1"]).set == ("a=1",)
