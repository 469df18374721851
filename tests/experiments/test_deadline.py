"""``scanmt experiment run --deadline``: parsing the deadline, estimating a run's time from the finished ones,
and the pool starting only the runs expected to end before it (the rest deferred)."""

from __future__ import annotations

import json
from datetime import datetime
from types import SimpleNamespace

import pytest
import torch

from scanmt.errors import ConfigError
from scanmt.experiments import pool as grid_pool, progress, worker
from scanmt.experiments.deadline import Estimate, StepTimes, defer_reason, expected_seconds, parse_deadline

NOW = datetime(2026, 3, 1, 10, 30).timestamp()  # local time


# ---------------------------------------------------------------------------------------------- parsing
@pytest.mark.parametrize("text, seconds", [
    ("+2h30m", 9000), ("+90m", 5400), ("+1.5h", 5400), ("+45s", 45), ("+1h0m30s", 3630), (" +2h 30m ", 9000),
])
def test_a_span_counts_from_now(text, seconds):
    assert parse_deadline(text, now=NOW) == pytest.approx(NOW + seconds)


def test_a_time_of_day_is_its_next_occurrence():
    assert parse_deadline("13:10", now=NOW) == datetime(2026, 3, 1, 13, 10).timestamp()
    assert parse_deadline("09:05", now=NOW) == datetime(2026, 3, 2, 9, 5).timestamp()  # past today: tomorrow


def test_a_date_and_time():
    assert parse_deadline("2026-03-02 08:00", now=NOW) == datetime(2026, 3, 2, 8, 0).timestamp()
    assert parse_deadline("2026-03-02T08:00:30", now=NOW) == datetime(2026, 3, 2, 8, 0, 30).timestamp()


@pytest.mark.parametrize("text, says", [
    ("+0m", "a span of zero"), ("+2h2h", "a unit given twice"), ("25:00", "no such time of day"),
    ("tomorrow", "expected +DURATION"), ("+", "expected +DURATION"), ("+2d", "expected +DURATION"),
    ("2026-02-28 23:00", "has passed already"),
])
def test_bad_deadlines_are_named(text, says):
    with pytest.raises(ConfigError) as err:
        parse_deadline(text, now=NOW)
    assert f"--deadline {text!r}" in str(err.value) and says in str(err.value)


# ---------------------------------------------------------------------------------------------- estimates
# two finished runs of the system: 2 s per update, 500 and 600 updates, translate 10 s and 20 s
OWN = [StepTimes({"train": 1000.0, "translate": 10.0}, 500), StepTimes({"train": 1200.0, "translate": 20.0}, 600)]


def test_a_new_run_takes_the_median_of_each_step():
    est = expected_seconds(["train", "translate"], 0, OWN, OWN)
    assert est == Estimate(2.0 * 550 + 15.0, "system")  # median rate x median updates + median translate


def test_a_resumed_training_counts_only_its_remaining_updates():
    assert expected_seconds(["train", "translate"], 300, OWN, OWN).seconds == pytest.approx(2.0 * 250 + 15.0)
    assert expected_seconds(["train"], 900, OWN, OWN).seconds == 0.0  # past the median: nothing left to count


def test_a_resumed_runs_rate_uses_the_updates_of_its_last_attempt():
    # 100 s for the last 50 updates of a 600-update training: 2 s per update, not 100 / 600
    resumed = StepTimes({"train": 100.0}, 600, attempt_updates=50)
    assert resumed.seconds_per_update() == pytest.approx(2.0)
    assert expected_seconds(["train"], 0, [resumed], []).seconds == pytest.approx(1200.0)


def test_a_step_its_system_never_finished_comes_from_the_grid():
    grid = OWN + [StepTimes({"train": 300.0, "stress": 40.0}, 100)]
    est = expected_seconds(["translate", "stress"], 0, OWN, grid)
    assert est == Estimate(15.0 + 40.0, "grid")  # the grid's medians: translate (10, 20), stress (40)
    assert expected_seconds(["tune"], 0, OWN, grid) is None  # nobody tuned: no estimate
    assert expected_seconds(["translate"], 0, [], []) is None


def test_cpu_timed_runs_outweigh_wall_clock_ones():
    """A run timed by the wall clock before CPU time was recorded (here 4 s per update: it shared the machine)
    counts only while no run of the grid is CPU-timed; after that its system takes the CPU-timed runs' times."""
    waited = [StepTimes({"train": 2000.0, "translate": 30.0}, 500)]
    timed = [StepTimes({"train": 500.0, "translate": 10.0}, 500, cpu_timed=True)]
    assert expected_seconds(["train", "translate"], 0, waited, waited) == Estimate(2030.0, "system")
    assert expected_seconds(["train", "translate"], 0, waited, waited + timed) == Estimate(510.0, "grid")
    assert expected_seconds(["train"], 0, waited + timed, waited + timed) == Estimate(500.0, "system")


def test_a_system_trained_on_several_threads_is_estimated_from_its_own_runs():
    """The KFTT folder: one-thread LSTM runs (CPU-timed) beside a Transformer trained on two threads, whose marker
    records its CPU time but which is timed by the wall clock.  Its seeds come from its own finished run, not
    from the LSTMs' times; a marker from before CPU time was recorded still gives way to CPU-timed runs."""
    lstm = [StepTimes({"train": 18000.0, "translate": 60.0}, 18000, cpu_timed=True, cpu_recorded=True)]
    transformer = [StepTimes({"train": 6400.0, "translate": 30.0}, 16000, cpu_recorded=True)]
    est = expected_seconds(["train", "translate"], 0, transformer, lstm + transformer, bound=16000)
    assert est == Estimate(6400.0 + 30.0, "system")
    legacy = [StepTimes({"train": 6400.0, "translate": 30.0}, 16000)]
    assert expected_seconds(["train", "translate"], 0, legacy, lstm + legacy, bound=16000) == Estimate(
        16000 * 1.0 + 60.0, "grid")


def test_a_trainings_own_pace_outweighs_its_systems_finished_runs():
    """A run restored from an archive trained on another processor (0.4 s per update in bf16); this machine's
    training of the same system goes at 1.5 s per update: its time left is at that pace, its later steps from the
    finished run."""
    restored = [StepTimes({"train": 6400.0, "translate": 30.0}, 16000, cpu_recorded=True)]
    est = expected_seconds(["train", "translate"], 4000, restored, restored, planned=16000, pace=1.5)
    assert est == Estimate(1.5 * 12000 + 30.0, "system")
    assert expected_seconds(["train", "translate"], 4000, restored, restored, planned=16000) == Estimate(
        0.4 * 12000 + 30.0, "system")  # no pace logged yet: the finished run's speed


def test_a_system_without_a_training_here_takes_the_machines_speed_from_those_with_one():
    """The KFTT folder on a slower machine: both Transformer systems' seeds 1 were restored (0.45 s per update in
    bf16 on the other processor); softmax's seed 2 trains here at 1.5 s per update, 3.3x slower, so a csparsemax
    seed expects 3.3x its finished run's speed, not the other processor's."""
    times = progress.RunTimes()
    times.by_system = {"softmax": [StepTimes({"train": 4500.0}, 10000, cpu_recorded=True)],
                       "csparsemax": [StepTimes({"train": 4800.0}, 10000, cpu_recorded=True)]}
    assert times.pace("csparsemax") is None  # no training here yet: the finished runs' speed stands
    times.paces = {"softmax": [1.5]}
    assert times.pace("softmax") == 1.5
    assert times.pace("csparsemax") == pytest.approx(0.48 * 1.5 / 0.45)
    assert times.pace("tf") is None  # no finished run to scale
    est = times.estimate_steps("csparsemax", ["train"], planned=10000)
    assert est == Estimate(pytest.approx(10000 * 0.48 * 1.5 / 0.45), "system")


def test_defer_reason():
    deadline = NOW + 3600
    assert defer_reason(deadline, NOW, Estimate(3000.0, "system")) is None
    assert defer_reason(deadline, NOW, None) is None  # no estimate: it starts
    late = defer_reason(deadline, NOW, Estimate(4200.0, "grid"))
    assert late is not None and "expected to take 70 min (from the grid's finished runs), 60 min left" in late
    passed = defer_reason(deadline, deadline + 1, None)
    assert passed is not None and "has passed" in passed


# ---------------------------------------------------------------------------------------------- the pool
def _spec(tmp_path, system: str, seed: int, model_from=None):
    run = tmp_path / "runs" / system / f"seed{seed}"
    (run / ".stages").mkdir(parents=True)
    steps = [("train", None if model_from else object()), ("translate", object()), ("evaluate", object())]
    return SimpleNamespace(dir=run, run_dir=str(run), key=f"{system}/seed{seed}", system=system, extra_splits=(),
                           model_from=model_from, train=None if model_from else object(), steps=lambda: steps,
                           config={})


def _finish(spec, train_s: float, updates: int, translate_s: float, evaluate_s: float) -> None:
    marks = {"train": {"seconds": train_s, "steps": updates}, "translate": {"seconds": translate_s},
             "evaluate": {"seconds": evaluate_s}}
    for stage, info in marks.items():
        (spec.dir / ".stages" / f"{stage}.done").write_text(json.dumps(info), encoding="utf-8")
    (spec.dir / "metrics.json").write_text(json.dumps({"bleu": 30.0, "meteor": 50.0, "rep": 1.0, "drop": 2.0}))
    (spec.dir / "DONE").write_text("2026-03-01 10:00:00\n", encoding="utf-8")


def _pool(specs, deadline, workers=2):
    said: list[str] = []
    pool = grid_pool._Pool(specs, workers=workers, gpus=(), threads={}, say=said.append, deadline=deadline)
    launched: list[tuple[str, str]] = []
    pool.launch = lambda slot, spec, note="": launched.append((spec.key, note))  # no worker processes
    return pool, launched, said


def test_the_pool_starts_what_fits_and_defers_the_rest(tmp_path, monkeypatch):
    done = _spec(tmp_path, "softmax", 1)
    _finish(done, train_s=3000.0, updates=1000, translate_s=100.0, evaluate_s=200.0)  # 3300 s = 55 min
    fresh = _spec(tmp_path, "softmax", 2)
    resumed = _spec(tmp_path, "softmax", 3)
    (resumed.dir / "last.pt").write_bytes(b"")
    (resumed.dir / "metrics.csv").write_text("step,name,value\n50,train/loss,3.0\n900,train/loss,2.0\n")
    monkeypatch.setattr(worker.time, "time", lambda: NOW)
    pool, launched, said = _pool([done, fresh, resumed], deadline=NOW + 20 * 60)
    assert pool.results[done.key].status == "skipped" and len(pool.history.by_system["softmax"]) == 1
    pool.launch_ready()
    # the new run needs 55 min: deferred; the resumed one 100 updates x 3 s + 300 s = 10 min: started
    assert launched == [(resumed.key, ", expected to take 10 min")]
    assert pool.results[fresh.key].status == "deferred" and not pool.pending
    assert any("defer softmax/seed2: expected to take 55 min (from its system's finished runs), 20 min left"
               in line and "rerun the command to continue it" in line for line in said)


def test_without_history_a_run_starts_and_after_the_deadline_none_does(tmp_path, monkeypatch):
    first, second = _spec(tmp_path, "softmax", 1), _spec(tmp_path, "csparsemax", 1)
    monkeypatch.setattr(worker.time, "time", lambda: NOW)
    pool, launched, _ = _pool([first], deadline=NOW + 60)
    pool.launch_ready()
    assert launched == [(first.key, ", no finished run to estimate its time from")]
    pool, launched, said = _pool([second], deadline=NOW - 1)
    pool.launch_ready()
    assert not launched and pool.results[second.key].status == "deferred" and "has passed" in said[-1]


def test_the_runs_a_systems_selection_leaves_out_still_estimate(tmp_path, monkeypatch):
    """`--systems softmax` in a folder where only sparsemax finished: softmax's new run is estimated from the
    folder's sparsemax runs (a CPU-timed one outweighs the wall-clock one), not started blind nor deferred."""
    wall = _spec(tmp_path, "sparsemax", 1)
    _finish(wall, train_s=7000.0, updates=1000, translate_s=100.0, evaluate_s=200.0)  # waited behind other jobs
    cpu = _spec(tmp_path, "sparsemax", 2)
    _finish(cpu, train_s=3000.0, updates=1000, translate_s=100.0, evaluate_s=200.0)
    info = json.loads((cpu.dir / ".stages" / "train.done").read_text())
    (cpu.dir / ".stages" / "train.done").write_text(json.dumps({**info, "cpu_seconds": 1500.0, "threads": 1}))
    (tmp_path / "runs" / "softmax" / "seed9").mkdir(parents=True)  # an unfinished run adds nothing
    fresh = _spec(tmp_path, "softmax", 1)
    monkeypatch.setattr(worker.time, "time", lambda: NOW)
    pool, launched, _ = _pool([fresh], deadline=NOW + 40 * 60)
    assert set(pool.history.by_system) == {"sparsemax"} and len(pool.history.by_system["sparsemax"]) == 2
    pool.launch_ready()
    assert launched == [(fresh.key, ", expected to take 30 min")]  # 1500 s of training + 300 s, from the grid
    pool, launched, said = _pool([fresh], deadline=NOW + 20 * 60)
    pool.launch_ready()
    assert not launched and "expected to take 30 min (from the grid's finished runs)" in said[-1]


def test_a_run_decoding_a_deferred_model_is_deferred_too(tmp_path, monkeypatch):
    done = _spec(tmp_path, "softmax", 1)
    _finish(done, train_s=3000.0, updates=1000, translate_s=100.0, evaluate_s=200.0)
    trains = _spec(tmp_path, "softmax", 2)
    decodes = _spec(tmp_path, "softmax-beam1", 2, model_from=trains.run_dir)
    monkeypatch.setattr(worker.time, "time", lambda: NOW)
    pool, launched, said = _pool([done, decodes, trains], deadline=NOW + 600)
    pool.launch_ready()
    assert not launched and not pool.pending
    assert pool.results[decodes.key].status == "deferred"  # not "failed": its model may still come
    assert "the run that trains its model was deferred" in pool.results[decodes.key].message


def test_without_a_deadline_nothing_is_estimated(tmp_path):
    done = _spec(tmp_path, "softmax", 1)
    _finish(done, train_s=3000.0, updates=1000, translate_s=100.0, evaluate_s=200.0)
    fresh = _spec(tmp_path, "softmax", 2)
    pool, launched, _ = _pool([done, fresh], deadline=None)
    pool.launch_ready()
    assert launched == [(fresh.key, "")] and pool.history.by_system == {}


def test_run_times_estimate_what_a_run_still_has_to_do(tmp_path):
    done = _spec(tmp_path, "softmax", 1)
    _finish(done, train_s=3000.0, updates=1000, translate_s=100.0, evaluate_s=200.0)
    trained = _spec(tmp_path, "softmax", 2)  # its training finished before a kill: translate and evaluate left
    (trained.dir / ".stages" / "train.done").write_text(json.dumps({"seconds": 2900.0, "steps": 1000}))
    times = progress.RunTimes([done, trained])
    assert list(times.by_system) == ["softmax"] and len(times.by_system["softmax"]) == 1  # the finished run only
    assert times.estimate(trained) == Estimate(300.0, "system")
    assert times.estimate(_spec(tmp_path, "csparsemax", 1)) == Estimate(3300.0, "grid")


def test_step_times_reads_the_markers_and_updates_done_the_log(tmp_path):
    spec = _spec(tmp_path, "softmax", 1)
    assert progress.step_times(spec.dir) is None  # not finished
    _finish(spec, train_s=3000.0, updates=1000, translate_s=100.0, evaluate_s=200.0)
    marker = spec.dir / ".stages" / "train.done"
    marker.write_text(json.dumps({"seconds": 600.0, "steps": 1000, "attempt_steps": 200}))
    times = progress.step_times(spec.dir)
    assert times == StepTimes({"train": 600.0, "translate": 100.0, "evaluate": 200.0}, 1000, 200)
    # one thread with its CPU time recorded: the CPU time when less, and the run counts as CPU-timed
    marker.write_text(json.dumps({"seconds": 900.0, "cpu_seconds": 700.0, "threads": 1, "steps": 1000}))
    assert progress.step_times(spec.dir) == StepTimes({"train": 700.0, "translate": 100.0, "evaluate": 200.0}, 1000,
                                                    cpu_timed=True, cpu_recorded=True)
    marker.write_text(json.dumps({"seconds": 900.0, "cpu_seconds": 1700.0, "threads": 2, "steps": 1000}))
    two_threads = progress.step_times(spec.dir)
    assert not two_threads.cpu_timed and two_threads.cpu_recorded  # two threads: the wall time, CPU recorded
    assert two_threads.seconds["train"] == 900.0
    other = _spec(tmp_path, "softmax", 2)
    assert progress.updates_done(other.dir) == 0  # no checkpoint
    (other.dir / "last.pt").write_bytes(b"")
    (other.dir / "metrics.csv").write_text("step,name,value\n400,train/loss,2.0\n450,valid/ppl,9.1\n")
    assert progress.updates_done(other.dir) == 450


# ---------------------------------------------------------------------------------------------- the command
def test_the_command_names_a_bad_deadline_before_any_work(tmp_path, capsys):
    from scanmt.cli.main import main
    from tests.conftest import REPO

    out = tmp_path / "exp"
    argv = ["experiment", "run", str(REPO / "experiments" / "tiny.yaml"), "--out", str(out), "--dry-run"]
    assert main([*argv, "--deadline", "tomorrow"]) == 2
    assert "--deadline 'tomorrow': expected +DURATION" in capsys.readouterr().err and not out.exists()
    assert main([*argv, "--deadline", "+2h"]) == 0
    assert "  deadline " in capsys.readouterr().out  # the header says when


@pytest.mark.parametrize("wall, cpu, threads, expected", [
    (600.0, 300.0, 1, 300.0),     # one thread that waited behind other jobs half the time: the half it ran
    (600.0, 700.0, 1, 600.0),     # more CPU than wall time (eflomal's children in parallel): the wall time
    (600.0, 900.0, 2, 600.0),     # two threads: their CPU time says little of the wait; the wall time
    (600.0, None, None, 600.0),   # a GPU step, or a marker from before CPU time was recorded
])
def test_a_one_thread_steps_time_is_its_cpu_time_when_less_than_its_wall_time(tmp_path, wall, cpu, threads,
                                                                                     expected):
    spec = _spec(tmp_path, "softmax", 1)
    _finish(spec, train_s=3000.0, updates=1000, translate_s=100.0, evaluate_s=200.0)
    info = {"seconds": wall} | ({"cpu_seconds": cpu, "threads": threads} if cpu is not None else {})
    (spec.dir / ".stages" / "translate.done").write_text(json.dumps(info), encoding="utf-8")
    assert progress.step_times(spec.dir).seconds["translate"] == pytest.approx(expected)


def test_a_step_records_its_wall_and_cpu_time(monkeypatch):
    class Request:
        def command_line(self):
            return "scanmt busy"

    class Result:
        def summary(self, request):
            return "busy done"

    def busy(request):
        t0 = worker.time.process_time()
        while worker.time.process_time() - t0 < 0.2:
            pass
        return Result()

    monkeypatch.setitem(worker.STEP_FUNCTIONS, Request, busy)
    timing, result = worker._step(Request(), "busy")
    assert isinstance(result, Result) and timing["seconds"] >= 0.2 - 0.05
    if torch.cuda.is_available():  # a GPU step's CPU time says nothing of its wait: none recorded
        assert set(timing) == {"seconds"}
    else:
        assert timing["threads"] == torch.get_num_threads() and timing["cpu_seconds"] >= 0.2 - 0.05
