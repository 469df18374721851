"""The runner's steps are typed API requests: ``command.txt`` parses back into them, ``spec.json`` keeps them."""

from __future__ import annotations

import dataclasses
import json
import shlex
from pathlib import Path

import pytest

from scanmt.api import EvaluateRequest
from scanmt.cli.main import request_from_argv
from scanmt.errors import ConfigError
from scanmt.experiments import planning, spec as run_spec, worker
from scanmt.experiments.grid import load_grid
from scanmt.presets import preset_path

GRID = """
name: g
systems:
  - name: softmax
    set: [model.attention.transform=softmax, decode.batch_size=7]
  - name: cov
    set: [model.attention.transform=softmax, decode.coverage_eps=0.2]
    reuse_model: softmax
    tune_penalties: true
  - name: wide
    set: [model.attention.transform=softmax, decode.beam=3, decode.length_alpha=0.4]
    reuse_model: softmax
"""


def plan(tmp_path: Path) -> list[run_spec.RunSpec]:
    grid_file = tmp_path / "g.yaml"
    grid_file.write_text(GRID, encoding="utf-8")
    grid = load_grid(grid_file)
    out = tmp_path / "exp"
    ctx = run_spec.RunContext(
        out=out, preset=preset_path("cpu-small").resolve(), data_dir=out / "shared" / "data", src_lang="de",
        tgt_lang="en", cli_set=["train.threads=1"], split="test", command="scanmt experiment run g.yaml",
        commit="abc", align_model=out / "shared" / "data" / "align" / "word", extra_splits=("test2017",),
    )
    return planning.plan_runs(grid, grid.systems, [1, 2], ctx)


def parse(line: str):
    """A ``scanmt ...`` line of command.txt, parsed by the command line into its request."""
    argv = shlex.split(line)
    assert argv[0] == "scanmt"
    return request_from_argv(argv[1:])


def test_command_file_parses_back_into_the_step_requests(tmp_path):
    specs = plan(tmp_path)
    for device in ("cpu", "cuda"):
        for spec in specs:
            steps = worker.device_steps(spec, device)
            spec.dir.mkdir(parents=True, exist_ok=True)
            worker.write_command_file(spec, steps, device)
            lines = [ln for ln in (spec.dir / "command.txt").read_text(encoding="utf-8").splitlines()
                     if ln.startswith("scanmt ") and not ln.startswith("scanmt experiment")]
            requests = [r for _, r in steps if r is not None]
            assert len(lines) == len(requests) == 4 + bool(spec.train) + bool(spec.tune)
            assert [parse(ln) for ln in lines] == requests


def test_requests_carry_the_decode_settings(tmp_path):
    by_key = {s.key: s for s in plan(tmp_path)}
    soft, cov, wide = by_key["softmax/seed1"], by_key["cov/seed1"], by_key["wide/seed2"]
    assert soft.train.set[-1] == "train.threads=1" and "train.seed=1" in soft.train.set
    assert soft.translate.beam == 5 and soft.translate.batch_size is None  # the model's own batch size
    assert cov.train is None and cov.tune.coverage_eps == 0.2 and cov.tune.out == cov.dir / "penalties.yaml"
    assert cov.translate.penalties == str(cov.dir / "penalties.yaml") and cov.translate.coverage_eps is None
    assert cov.translate.model == str(Path(cov.model_from) / "best.pt")
    assert wide.translate.beam == 3 and wide.translate.length_alpha == 0.4 and wide.tune is None
    assert wide.extra_splits["test2017"]["evaluate"].json == wide.dir / "eval.test2017.json"
    # every split's translate writes its search statistics (the report's output layer table)
    assert soft.translate.search_stats == str(soft.dir / "test.search.json")
    assert wide.extra_splits["test2017"]["translate"].search_stats == str(wide.dir / "test2017.search.json")
    cuda = dict(worker.device_steps(cov, "cuda"))
    assert cuda["tune"].device == cuda["translate.test2017"].device == "cuda" and cov.translate.device == "cpu"


def test_spec_json_keeps_the_requests(tmp_path):
    for spec in plan(tmp_path):
        path = planning.write_spec(dataclasses.replace(spec, run_dir=str(tmp_path / spec.key)))
        back = run_spec.RunSpec.from_dict(json.loads(path.read_text(encoding="utf-8")))
        assert back.steps() == spec.steps() and back.history


def test_evaluate_steps_average_drop_over_the_grid_samples(tmp_path):
    """Every evaluate step of a grid run asks for DROP over ``RunContext.drop_samples`` alignments (default 3)."""
    for spec in plan(tmp_path):
        evals = [r for _, r in worker.device_steps(spec, "cpu") if isinstance(r, EvaluateRequest)]
        assert len(evals) == 2 and all(r.drop_samples == run_spec.DROP_SAMPLES == 3 for r in evals)
        assert all("--drop-samples 3" in r.command_line() for r in evals)


@pytest.mark.parametrize("bad", [0, -2, 1.5])
def test_bad_drop_samples_is_refused_before_any_run(tmp_path, bad):
    with pytest.raises(ConfigError, match=f"--drop-samples must be a positive integer, got {bad}"):
        run_spec.RunContext(out=tmp_path, preset=tmp_path / "p.yaml", data_dir=tmp_path, src_lang="de", tgt_lang="en",
                          cli_set=[], split="test", command="", commit="", align_model=tmp_path, drop_samples=bad)


def test_a_worker_refuses_to_decode_a_model_that_trained_elsewhere(tmp_path):
    """The worker's own check, behind the grid's (a checkpoint gone after planning): a system that decodes another
    run's model stops with one line when that run has not trained, or trained but has no checkpoint here."""
    from scanmt.errors import DataError

    cov = next(s for s in plan(tmp_path) if s.system == "cov" and s.seed == 1)
    softmax = Path(cov.model_from)
    with pytest.raises(DataError, match=r"cov/seed1: the model it decodes \(.*softmax/seed1\) is not trained yet"):
        worker._train(cov)
    (softmax / ".stages").mkdir(parents=True)
    (softmax / ".stages" / "train.done").touch()
    with pytest.raises(DataError, match=r"cov/seed1: its steps tune, translate, translate.test2017 need the model "
                                        r"of .*softmax/seed1 \(.*softmax/seed1/best.pt\), which is not here"):
        worker._train(cov)
    (softmax / "best.pt").touch()
    worker._train(cov)  # nothing to train, and the model is there
