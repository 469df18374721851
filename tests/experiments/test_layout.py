"""The experiment tooling by concept (issue 54, step 1): the run layout spelled in one module, one answer to "where
does this run stand?", small modules, a thin command line, and the fertility-name questions in one place."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from scanmt.experiments import layout
from scanmt.experiments.fertility_hooks import caches_fertility, fertility_step_label, fertility_step_params
from scanmt.experiments.report.collection import stopped_where
from scanmt.experiments.state import run_state

SRC = Path(__file__).resolve().parents[2] / "src" / "scanmt"
EXPERIMENTS = sorted((SRC / "experiments").rglob("*.py"))
CLI = SRC / "cli" / "experiment.py"
#: a run-layout literal: a path joined with a literal, a file or folder name of a run, a seed folder's name
LAYOUT_LITERAL = re.compile(
    r'[A-Za-z0-9_)\]] / f?"[^"]*"|"(DONE|\.stages|\.lock|\.done|\.mirror-of|runs|grids|shared)"'
    r'|f?"[^" ]*\.(json|yaml|txt|pt|csv|npz|npy|tar\.gz|done)"|f?"(\*/)?seed(\{[^}]*\}|\*|[0-9])[^"]*"|"previous-decode')


#: literals of that shape that name no part of an experiment folder: the source checkout's git folder, the results
#: JSON's key of a report of several grids
NOT_LAYOUT = ('(root / ".git")', 'GRIDS_KEY = "grids"')


@pytest.mark.parametrize("path", [p for p in [*EXPERIMENTS, CLI] if p.name != "layout.py"],
                         ids=lambda p: str(p.relative_to(SRC)))
def test_run_layout_literals_live_in_layout_only(path):
    found = [f"{k}: {line.strip()}" for k, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if not line.lstrip().startswith("#") and LAYOUT_LITERAL.search(line)
             and not any(ok in line for ok in NOT_LAYOUT)]
    assert not found, f"spell these with scanmt.experiments.layout: {found}"


@pytest.mark.parametrize("path", EXPERIMENTS, ids=lambda p: str(p.relative_to(SRC)))
def test_experiments_modules_are_small(path):
    assert len(path.read_text(encoding="utf-8").splitlines()) <= 450


def test_the_experiment_command_is_argparse_and_one_call_per_sub_command():
    text = CLI.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    imported = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            imported |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module if node.module != "scanmt" else f"scanmt.{node.names[0].name}")
    # scanmt.cli: the argparse types every command shares (positive_int, ...)
    assert imported <= {"__future__", "argparse", "scanmt.api", "scanmt.cli", "scanmt.experiments"}, imported


def _run(tmp_path: Path, *, log: bool = False, last: bool = False, stages=(), done: bool = False,
         metrics: str | None = None) -> Path:
    run = layout.run_dir(tmp_path, "softmax", 2)
    run.mkdir(parents=True)
    if log:
        (run / layout.LOG).write_text("##### start\nsome step\nTraceback: boom\n", encoding="utf-8")
    if last:
        (run / layout.LAST_CHECKPOINT).write_bytes(b"")
    for stage in stages:
        layout.stage_marker(run, stage).parent.mkdir(exist_ok=True)
        layout.stage_marker(run, stage).write_text("{}", encoding="utf-8")
    if done:
        (run / layout.DONE).write_text("now\n", encoding="utf-8")
    if metrics is not None:
        (run / layout.METRICS).write_text(metrics, encoding="utf-8")
    return run


@pytest.mark.parametrize("files, status, where", [
    ({}, "new", "not started"),
    ({"log": True}, "new", "stopped before its first checkpoint; last log line: Traceback: boom"),
    ({"log": True, "last": True}, "resume", "stopped during training; last log line: Traceback: boom"),
    ({"last": True, "stages": ("train", "translate")}, "resume", "stopped after translate"),
    ({"stages": ("train", "tune")}, "resume", "stopped after tune"),
    ({"stages": ("train",), "done": True, "metrics": "{"}, "resume", "stopped after train"),
])
def test_one_run_state_for_the_runner_and_the_report(tmp_path, files, status, where):
    run = _run(tmp_path, **files)
    state = run_state(run)
    assert state.status == status and not state.finished
    assert stopped_where(run) == where  # the report's "unfinished" words, as before the one state function


def test_a_finished_run(tmp_path):
    run = _run(tmp_path, stages=("train", "translate", "evaluate"), done=True, metrics=json.dumps({"bleu": 1.0}))
    state = run_state(run)
    assert state.status == "done" and state.finished and state.metrics == {"bleu": 1.0}
    assert not state.metrics_unreadable and state.pending == ()


def test_the_fertility_step_names_of_a_folder_made_before_are_kept(tmp_path):
    """A shared fertility-cache step is skipped when its marker (named by its label) holds the same parameters."""
    assert fertility_step_label({"strategy": "constant", "value": 2.0}) == "fertility-constant-2"
    assert fertility_step_label({"strategy": "guided"}) == "fertility-guided"
    pred = {"strategy": "predicted", "add": 1.0, "predictor": str(tmp_path / "missing.pt")}
    assert fertility_step_label(pred) == "fertility-predicted-add1"
    assert fertility_step_params(pred, ["fertility"]) == {"argv": ["fertility"], "predictor_mtime": None}
    assert fertility_step_params({"strategy": "guided"}, ["x"]) == {"argv": ["x"]}
    none = {"model": {"attention": {"fertility": {"strategy": "none"}}}}
    assert caches_fertility(none) is None


def test_the_report_says_a_run_that_holds_its_lock_is_still_running(tmp_path):
    """A report written while the grid trains called its runs "stopped during training" (KFTT's report, session
    60); a run whose folder lock a process holds is running, as ``experiment status`` says."""
    from scanmt.processes import lock_folder

    run = _run(tmp_path, log=True, last=True)
    (run / layout.TRAIN_LOG).write_text("step,name,value\n3650,train/loss,5.1\n3700,train/loss,5.0\n",
                                        encoding="utf-8")
    with lock_folder(run):
        assert stopped_where(run) == "training when this report was written: update 3,700 logged"
        layout.stage_marker(run, "train").parent.mkdir(exist_ok=True)
        layout.stage_marker(run, "train").write_text("{}", encoding="utf-8")
        assert stopped_where(run) == "running when this report was written, after train"
    assert stopped_where(run) == "stopped after train; last log line: Traceback: boom"
