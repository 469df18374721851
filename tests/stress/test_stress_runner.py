"""The stress test as a grid run's step (``experiment run --stress-k``) and the report's table."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import pytest

from scanmt.api import StressRequest
from scanmt.cli.main import request_from_argv
from scanmt.errors import ConfigError
from scanmt.experiments import common, layout, planning, run_metrics, spec as run_spec, state as run_state_module, stress_refresh, worker
from scanmt.experiments.grid import load_grid
from scanmt.experiments.report.collection import SystemResults
from scanmt.experiments.report.stress import stress_section, stress_summary
from scanmt.presets import preset_path

GRID = """
name: g
systems:
  - name: softmax
    set: [model.attention.transform=softmax, decode.beam=2]
  - name: cov
    set: [model.attention.transform=softmax, decode.beam=2, decode.coverage_eps=0.2]
    reuse_model: softmax
"""


def plan(tmp_path: Path, data: Path, stress_k: tuple[int, ...] = (1, 2)) -> list[run_spec.RunSpec]:
    grid_file = tmp_path / "g.yaml"
    grid_file.write_text(GRID, encoding="utf-8")
    grid = load_grid(grid_file)
    out = tmp_path / "exp"
    ctx = run_spec.RunContext(
        out=out, preset=preset_path("cpu-small").resolve(), data_dir=data, src_lang="de", tgt_lang="en",
        cli_set=["train.threads=1"], split="test", command="scanmt experiment run g.yaml", commit="abc",
        align_model=data / "align", stress_k=stress_k,
    )
    return planning.plan_runs(grid, grid.systems, [1], ctx)


def test_the_stress_step_is_a_typed_request_in_spec_and_command_file(tmp_path):
    specs = plan(tmp_path, tmp_path / "data")
    soft, cov = specs
    assert soft.steps()[-1] == ("stress", soft.stress)
    s = cov.stress
    assert s.model == (str(Path(cov.model_from) / "best.pt"),) and s.names == ("cov",) and s.k == (1, 2)
    assert s.out == cov.dir / "stress" and s.src == tmp_path / "data" / "test.raw.de" and s.beam == 2
    assert run_spec.RunSpec.from_dict(soft.to_dict()).stress == soft.stress
    steps = worker.device_steps(soft, "cuda")
    assert dict(steps)["stress"].device == "cuda"
    soft.dir.mkdir(parents=True)
    worker.write_command_file(soft, steps, "cuda")
    last = (soft.dir / "command.txt").read_text(encoding="utf-8").splitlines()[-1]
    assert request_from_argv(shlex.split(last)[1:]) == dict(steps)["stress"]
    assert plan(tmp_path, tmp_path / "data", ())[0].stress is None
    assert run_spec.RunSpec.from_dict({**plan(tmp_path, tmp_path / "data", ())[0].to_dict()}).stress is None


def test_a_finished_run_gets_the_stress_step_alone(tmp_path):
    soft = plan(tmp_path, tmp_path / "data")[0]
    run = soft.dir
    (run / ".stages").mkdir(parents=True)
    for stage in ("train", "translate", "evaluate"):
        common.write_json(layout.stage_marker(run, stage), {"seconds": 1})
    common.write_json(run / "metrics.json", {"test_sets": {}})
    (run / "DONE").write_text("x\n")
    assert run_state_module.run_status(soft) == "resume" and "adding the stress test" in run_state_module.resume_note(soft)
    common.write_json(layout.stage_marker(run, "stress"), {"seconds": 1, "k": [1, 2]})
    assert run_state_module.run_status(soft) == "done"
    common.write_json(layout.stage_marker(run, "stress"), {"seconds": 1, "k": [1]})  # other K values asked now
    assert run_state_module.run_status(soft) == "resume"


@pytest.mark.parametrize("ks, message", [((0,), "--stress-k must be whole numbers >= 1, got 0"),
                                         ((2, 2), "--stress-k 2 2: give each K once")])
def test_bad_stress_k_is_refused_before_the_plan(tmp_path, ks, message):
    with pytest.raises(ConfigError, match=message):
        plan(tmp_path, tmp_path / "data", ks)


def test_the_step_runs_and_the_report_tables_it(tmp_path, stress_setup):
    data, ckpt = stress_setup
    soft = plan(tmp_path, data)[0]
    soft.dir.mkdir(parents=True)
    shutil.copy(ckpt, soft.dir / "best.pt")
    seconds, result = worker._step(soft.stress, "stress")
    assert isinstance(result.scores["softmax"][2]["bleu"], float)
    m = run_metrics.stress_metrics(soft)
    assert m["k"] == [1, 2] and set(m["scores"]) == {"1", "2"} and m["scores"]["2"]["drop"] is not None
    two = {**m, "scores": {k: {**v, "bleu": v["bleu"] + 2.0} for k, v in m["scores"].items()}}
    lines = stress_section([SystemResults("softmax", "Softmax", [{"seed": 1, "stress": m}, {"seed": 2, "stress": two}]),
                            SystemResults("cov", "Cov", [{"seed": 1}])])
    text = "\n".join(lines)
    assert "## Coverage stress test" in text and "| Softmax | 2 | 4 |" in text
    assert f"{m['scores']['1']['bleu'] + 1.0:.2f} ± 1.41" in text and "| Cov |" not in text
    assert stress_section([SystemResults("cov", "Cov", [{"seed": 1, "stress": None}])]) == []
    # the paired tests against the baseline: a system that repeats nothing, seed by seed and pooled
    assert set(m["per_input"]["2"]) == {"rep_sigma", "ref_words", "hyp_words", "dropped", "source_words",
                                        "boundary_eos", "boundary_close"}
    measured2 = [p for p in m["per_input"]["2"]["boundary_eos"] if p is not None]
    # the boundary columns: none at K = 1; at K = 2 over the seeds that measured it, named where fewer than all
    older = {**m, "scores": {k: {**v, "boundary_stop": None, "boundary_eos": None, "boundary_close": None}
                             for k, v in m["scores"].items()},
             "per_input": {k: {x: v[x] for x in v if not x.startswith("boundary_")} for k, v in m["per_input"].items()}}
    text = "\n".join(stress_section([SystemResults("softmax", "Softmax", [{"seed": 1, "stress": m},
                                                                          {"seed": 2, "stress": older}])]))
    row1 = next(line for line in text.splitlines() if line.startswith("| Softmax | 1 |"))
    row2 = next(line for line in text.splitlines() if line.startswith("| Softmax | 2 |"))
    assert row1.endswith("| – | – | – | 2 |")
    assert row2.endswith(f"| {m['scores']['2']['boundary_stop']:.2f} (1 of 2 seeds) | "
                         f"{m['scores']['2']['boundary_eos']:.2f} (1 of 2 seeds) | "
                         f"{m['scores']['2']['boundary_close']:.3f} (1 of 2 seeds) | 2 |")
    assert "inputs with P(`</s>`) ≥ 0.5 after sentence 1 %" in text
    # a run scored by older code at another threshold: the share is counted again from its per-input values
    stale = {**m, "scores": {**m["scores"], "2": {**m["scores"]["2"], "boundary_stop": 99.0}}}
    want = 100 * sum(p >= 0.5 for p in measured2) / len(measured2)
    assert stress_summary([{"seed": 1, "stress": stale}])[2]["boundary_stop"]["mean"] == pytest.approx(want)
    hyp = (soft.dir / "stress" / "softmax.k2.hyp.en").read_text(encoding="utf-8").splitlines()
    assert sum(m["per_input"]["2"]["hyp_words"]) / sum(m["per_input"]["2"]["ref_words"]) == \
        pytest.approx(m["scores"]["2"]["length_ratio"]) and len(hyp) == len(m["per_input"]["2"]["hyp_words"])
    calm = {**m, "per_input": {k: {**v, "rep_sigma": [0] * len(v["rep_sigma"])} for k, v in m["per_input"].items()}}
    # three seeds: 12 joined inputs pooled (a paired bootstrap over fewer than 10 gives no p-value)
    base = SystemResults("softmax", "Softmax", [{"seed": s, "stress": m} for s in (1, 2, 3)])
    calm_runs = SystemResults("calm", "Calm", [{"seed": s, "stress": calm} for s in (1, 2, 3)])
    text = "\n".join(stress_section([base, calm_runs], "softmax"))
    assert "### Stress test: REP and DROP against Softmax, paired" in text
    paired = text.split("### Stress test: REP and DROP against Softmax, paired")[1]
    row = next(line for line in paired.splitlines() if line.startswith("| Calm | 2 |"))
    rep = m["scores"]["2"]["rep"]
    assert f"1: {-rep:+.2f} (" in row and f"2: {-rep:+.2f} (" in row
    # the same output lengths as the baseline: its REP and DROP at them are its own; length explains none of Δ REP,
    # and Δ DROP is 0 (no share)
    counts = m["per_input"]["2"]
    drop = 100 * sum(counts["dropped"]) / sum(counts["source_words"])
    assert row.endswith(f"| 3 | {rep:.2f} (0 %) | {drop:.2f} |")
    # DROP: the same counts, never lower (pooled; each seed's 4 inputs alone are too few for the test)
    assert "1: +0.00 (n/a: fewer than 10 inputs)" in row and "| +0.00 (1.000) |" in row
    # a system whose outputs share no length group with the baseline's: REP at its lengths is undefined
    assert m["scores"]["2"]["length_ratio"] > 0.5  # (the baseline's outputs: none in the shortest group)
    empty = {**calm, "per_input": {k: {**v, "hyp_words": [0] * len(v["hyp_words"])}
                                   for k, v in calm["per_input"].items()}}
    text = "\n".join(stress_section([base, SystemResults("empty", "Empty", [{"seed": 1, "stress": empty}])], "softmax"))
    paired = text.split("### Stress test: REP and DROP against Softmax, paired")[1]
    row = next(line for line in paired.splitlines() if line.startswith("| Empty | 2 |"))
    assert row.endswith("| 1 | – (no length group in common) | – (no length group in common) |")
    assert "paired" not in "\n".join(stress_section([base], "softmax"))
    # P(full stop) closing the first sentence and P(</s>) after it, paired: a system that never closes or ends there
    # against the real model
    open_ = {**m, "per_input": {k: {**v, **{key: [0.0 if p is not None else None for p in v[key]]
                                            for key in ("boundary_eos", "boundary_close") if key in v}}
                                for k, v in m["per_input"].items()}}
    text = "\n".join(stress_section([base, SystemResults("open", "Open", [{"seed": 1, "stress": open_},
                                                                          {"seed": 2, "stress": open_}])], "softmax"))
    section = text.split("### Stress test: does the system stop after the first sentence? Against Softmax, paired")[1]
    for key, measure in (("boundary_eos", "P(`</s>`) after the first sentence"),
                         ("boundary_close", "P(full stop) closing the first sentence")):
        row = next(line for line in section.splitlines() if line.startswith(f"| Open | 2 | {measure} |"))
        measured = [p for p in m["per_input"]["2"][key] if p is not None]
        mean = 100 * sum(measured) / len(measured)
        assert row.startswith(f"| Open | 2 | {measure} | 0.0 | {mean:.1f} | 1: {-mean:+.2f} (") and row.endswith("| 2 |")
    assert "| Open | 1 |" not in section  # K = 1 has no boundary
    # runs whose stress test predates the measures: no section
    older = {**m, "per_input": {k: {x: v[x] for x in v if not x.startswith("boundary_")}
                                for k, v in m["per_input"].items()}}
    assert "stop after the first sentence?" not in "\n".join(stress_section(
        [SystemResults("softmax", "Softmax", [{"seed": 1, "stress": older}]),
         SystemResults("open", "Open", [{"seed": 1, "stress": open_}])], "softmax"))


def test_boundary_only_in_a_grid_run_updates_its_metrics(tmp_path, stress_setup, capsys):
    """``scanmt stress --boundary-only`` on a finished run's stress folder from before P(full stop): the run's
    metrics.json gets the new numbers too (the report reads it), and the rest of it stays as it was."""
    import json

    from scanmt.cli.main import main

    data, ckpt = stress_setup
    soft = plan(tmp_path, data)[0]
    soft.dir.mkdir(parents=True)
    shutil.copy(ckpt, soft.dir / "best.pt")
    worker._step(soft.stress, "stress")
    fresh = run_metrics.stress_metrics(soft)
    path = soft.stress.out / "stress.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    for by_k in (doc["scores"]["softmax"], doc["per_input"]["softmax"]):
        for values in by_k.values():
            values.pop("boundary_close", None)
            values.pop("boundary_close_argmax", None)
    path.write_text(json.dumps(doc), encoding="utf-8")
    (soft.dir / "spec.json").write_text(json.dumps(soft.to_dict()), encoding="utf-8")
    (soft.dir / "metrics.json").write_text(json.dumps({"bleu": 1.5, "stress": run_metrics.stress_metrics(soft)}),
                                           encoding="utf-8")
    assert "boundary_close" not in run_metrics.stress_metrics(soft)["scores"]["2"]
    (soft.dir / "DONE").write_text("", encoding="utf-8")
    capsys.readouterr()
    assert main(["stress", "--boundary-only", "--out", str(soft.stress.out)]) == 0
    assert f"and the grid run's {soft.dir / 'metrics.json'}" in capsys.readouterr().out
    metrics = json.loads((soft.dir / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["bleu"] == 1.5 and metrics["stress"] == fresh
    # a stress folder that is not a finished run's: no run is held or changed
    (soft.dir / "DONE").unlink()
    with stress_refresh.finished_run_of_stress(soft.stress.out) as held:
        assert held is None
