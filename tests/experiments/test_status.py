"""``scanmt experiment status``: each run's state read from the experiment folder (done, training, decoding,
stopped, not started), the time left from the finished runs, and the lock test it relies on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scanmt.api.evaluate import EvaluateRequest
from scanmt.api.stress import StressRequest
from scanmt.api.train import TrainRequest
from scanmt.api.translate import TranslateRequest
from scanmt.cli.main import main
from scanmt.experiments import progress
from scanmt.experiments import status
from scanmt.experiments.spec import RunSpec
from scanmt.experiments.layout import run_dir
from scanmt.experiments.common import write_json
from scanmt.processes import lock_folder, lock_held
from tests.process_helpers import lock_held_elsewhere

SYSTEMS = ("softmax", "csparsemax")


def _record(out: Path, name: str = "tiny", seeds=(1, 2), command: str = "scanmt experiment run g.yaml --workers 2",
            systems=SYSTEMS) -> None:
    rec = {"name": name, "seeds": list(seeds), "systems": [{"name": s, "label": s} for s in systems],
           "requested": list(systems), "extra_splits": [], "stress_k": [2], "command": command}
    (out / "grids").mkdir(parents=True, exist_ok=True)
    (out / "grids" / f"{name}.json").write_text(json.dumps(rec), encoding="utf-8")


def _spec(out: Path, system: str, seed: int) -> RunSpec:
    run = run_dir(out, system, seed)
    (run / ".stages").mkdir(parents=True)
    spec = RunSpec(
        grid="tiny", system=system, label=system, seed=seed, run_dir=str(run), preset="p.yaml", overrides=[],
        config={}, split="test", src_lang="de", tgt_lang="en", tune_penalties=False, model_from=None,
        train=TrainRequest(config="p.yaml", out=str(run)), tune=None,
        translate=TranslateRequest(model=str(run / "best.pt"), input="test.de", output=str(run / "test.hyp.en")),
        evaluate=EvaluateRequest(hyp=run / "test.hyp.en", ref=Path("test.en")), command="scanmt ...", commit="abc",
        stress=StressRequest(model=(str(run / "best.pt"),), src=Path("test.de"), ref=Path("test.en"),
                             out=run / "stress", k=(2,)))
    write_json(run / "spec.json", spec.to_dict())
    return spec


def _mark(spec: RunSpec, stage: str, **info) -> None:
    (spec.dir / ".stages" / f"{stage}.done").write_text(json.dumps(info), encoding="utf-8")


def _finish(spec: RunSpec, train_s: float = 1000.0, updates: int = 500, bleu: float = 30.0) -> None:
    _mark(spec, "train", seconds=train_s, steps=updates)
    _mark(spec, "translate", seconds=60.0)
    _mark(spec, "evaluate", seconds=30.0)
    _mark(spec, "stress", seconds=120.0, k=[2])
    (spec.dir / "metrics.json").write_text(json.dumps({"bleu": bleu, "meteor": 50.0, "rep": 1.5, "drop": 4.0}))
    (spec.dir / "DONE").write_text("2026-11-26 20:00:00\n", encoding="utf-8")


def _by_key(statuses):
    return {r.key: r for g in statuses for r in g.runs}


def test_each_state_and_its_time_left(tmp_path):
    out = tmp_path / "exp"
    _record(out)
    _finish(_spec(out, "softmax", 1), train_s=1000.0, updates=500, bleu=31.25)  # 2 s per update
    _finish(_spec(out, "csparsemax", 1), train_s=1500.0, updates=500)          # 3 s per update
    training = _spec(out, "softmax", 2)
    (training.dir / "metrics.csv").write_text("step,name,value\n100,train/loss,3.0\n100,valid/bleu,12.5\n"
                                              "200,valid/bleu,18.0\n200,valid/bleu,x\n250,train/loss,2.0\n")
    decoding = _spec(out, "csparsemax", 2)
    _mark(decoding, "train", seconds=1400.0, steps=480)
    _mark(decoding, "translate", seconds=50.0)
    with lock_held_elsewhere(training.dir), lock_held_elsewhere(decoding.dir):
        runs = _by_key(status.folder_status(out))
        text = status.render(out, status.folder_status(out))
    assert runs["softmax/seed1"].state == "done" and "BLEU 31.25" in runs["softmax/seed1"].detail
    assert runs["softmax/seed1"].left is None
    r = runs["softmax/seed2"]
    assert r.state == "training"
    assert r.detail == "update 250 of ~500; valid BLEU 18.00 at update 200 (best 18.00)"
    # 250 updates left at its system's 2 s, then translate, evaluate and stress as its system's finished run took
    assert r.left.seconds == pytest.approx(250 * 2.0 + 60 + 30 + 120) and r.left.source == "system"
    r = runs["csparsemax/seed2"]
    assert r.state == "decoding" and r.detail == "evaluate (2 of 4 steps done)"
    assert r.left.seconds == pytest.approx(30 + 120)
    assert "no grid is running" in text.splitlines()[0]
    assert "tiny: 4 runs, 2 done, 1 training, 1 decoding" in text
    # 710 + 150 s of run time left, halved by the recorded command's 2 workers
    assert "left: 2 run(s), about 14 min of run time, 7 min with the grid command's 2 workers" in text


def test_a_fixed_epoch_run_expects_its_epochs_not_the_folders_median(tmp_path):
    """No early stopping and a validation at each epoch's end: the first epoch's updates times the epochs
    (the finished runs stopped early, after 500 updates; this one runs 6 epochs of 120)."""
    out = tmp_path / "exp"
    _record(out)
    _finish(_spec(out, "softmax", 1), train_s=1000.0, updates=500)  # 2 s per update
    fixed = _spec(out, "softmax", 2)
    fixed.config = {"train": {"epochs": 6, "patience": 0, "valid_every": 0, "max_steps": 0}}
    write_json(fixed.dir / "spec.json", fixed.to_dict())
    (fixed.dir / "last.pt").write_bytes(b"")
    (fixed.dir / "metrics.csv").write_text("step,name,value\n100,train/loss,3.0\n120,valid/bleu,12.5\n"
                                           "240,valid/bleu,18.0\n250,train/loss,2.0\n")
    assert progress.planned_updates(fixed) == 720
    with lock_held_elsewhere(fixed.dir):
        r = _by_key(status.folder_status(out))["softmax/seed2"]
    assert r.detail == "update 250 of ~720; valid BLEU 18.00 at update 240 (best 18.00)"
    assert r.left.seconds == pytest.approx((720 - 250) * 2.0 + 60 + 30 + 120)
    # train.max_steps caps it; early stopping, a validation every N updates, or no epoch logged yet: unknown
    for train, csv, want in [({"max_steps": 600}, None, 600), ({"patience": 2}, None, None),
                             ({"valid_every": 100}, None, None), ({}, "step,name,value\n100,train/loss,3.0\n", None)]:
        fixed.config = {"train": {"epochs": 6, "patience": 0, "valid_every": 0, "max_steps": 0, **train}}
        if csv is not None:
            (fixed.dir / "metrics.csv").write_text(csv)
        assert progress.planned_updates(fixed) == want, train
    (fixed.dir / "metrics.csv").unlink()
    assert progress.planned_updates(fixed) is None


def test_a_system_without_finished_runs_takes_its_own_update_budget_not_the_folders(tmp_path):
    """Another grid in the folder (a Transformer's 500 updates) tells the pace; the LSTM's own ``train.max_steps``
    (900) tells how many updates, for its training run and for its seed that has not started."""
    out = tmp_path / "exp"
    _record(out, name="tf", seeds=(1,), systems=("transformer",))
    _finish(_spec(out, "transformer", 1), train_s=1000.0, updates=500)  # 2 s per update
    _record(out, name="lstm", seeds=(1, 2), systems=("lstm",))
    training = _spec(out, "lstm", 1)
    training.config = {"train": {"max_steps": 900, "patience": 4}}
    write_json(training.dir / "spec.json", training.to_dict())
    (training.dir / "metrics.csv").write_text("step,name,value\n300,train/loss,3.0\n")
    with lock_held_elsewhere(training.dir):
        runs = _by_key(status.folder_status(out, ["lstm"]))
    r = runs["lstm/seed1"]
    assert r.detail == "update 300 of at most 900"
    # 600 updates left at the folder's 2 s, then the other system's translate, evaluate and stress
    assert r.left.seconds == pytest.approx(600 * 2.0 + 60 + 30 + 120) and r.left.source == "grid"
    assert runs["lstm/seed2"].state == "not started"
    assert runs["lstm/seed2"].left.seconds == pytest.approx(900 * 2.0 + 60 + 30 + 120)


#: a worker's log from before trainings logged ``train/elapsed_s``: three stretches, the clock past midnight in the
#: second, whose resume (100) and validations (200, 300) are 600 s apart; the third has one point (its resume)
OLD_LOG = """
##### 2026-11-28 22:00:00 start (cpu, 1 threads)
=== lstm/seed1 (lstm) in RUN: device cpu, 1 thread(s), commit abc
22:00:07 INFO data/train.bpe.ja: dropped 7 of 339140 pairs longer than 80 subwords
22:30:00 INFO step 100, epoch 1: valid ppl 50.00, greedy BLEU 3.00 (best)
22:40:00 WARNING interrupted (SIGTERM) at step 100: saved RUN/last.pt, no update lost; continue with --resume

##### 2026-11-28 23:50:00 start (cpu, 1 threads)
=== train: resuming from last.pt
23:50:00 INFO resumed from step 100 (epoch 1, batch 100)
epoch 1:  40%|####  | 150/375\repoch 1:  50%|#####  | 190/375\r23:59:50 INFO validation: greedy decoding of 8 sentences
00:00:00 INFO step 200, epoch 1: valid ppl 40.00, greedy BLEU 5.00 (best)
00:10:00 INFO step 300, epoch 1: valid ppl 30.00, greedy BLEU 6.00 (best)

##### 2026-11-29 00:20:00 start (cpu, 1 threads)
00:20:05 INFO resumed from step 300 (epoch 1, batch 300)
"""


def test_a_system_without_finished_runs_trains_at_its_own_runs_pace(tmp_path):
    """The folder's only finished run is a Transformer's (2 s per update); the LSTM's runs log no
    ``train/elapsed_s`` but their log says 6 s per update (:data:`OLD_LOG`): its training run's 600 updates left,
    and its seed that has not started, go at that pace, with the Transformer's later steps (210 s)."""
    out = tmp_path / "exp"
    _record(out, name="tf", seeds=(1,), systems=("transformer",))
    _finish(_spec(out, "transformer", 1), train_s=1000.0, updates=500)
    _record(out, name="lstm", seeds=(1, 2), systems=("lstm",))
    training = _spec(out, "lstm", 1)
    training.config = {"train": {"max_steps": 900, "patience": 4}}
    write_json(training.dir / "spec.json", training.to_dict())
    (training.dir / "last.pt").write_bytes(b"")
    (training.dir / "metrics.csv").write_text("step,name,value\n300,train/loss,3.0\n300,valid/bleu,6.0\n")
    (training.dir / "log.txt").write_text(OLD_LOG, encoding="utf-8")
    points = progress.log_points(training.dir)
    assert list(points) == [100, 200, 300] and points[300] - points[100] == 1200.0
    assert progress.own_pace(training.dir) == pytest.approx(6.0)
    with lock_held_elsewhere(training.dir):
        runs = _by_key(status.folder_status(out, ["lstm"]))
        text = status.render(out, status.folder_status(out, ["lstm"]))
    r = runs["lstm/seed1"]
    assert r.detail == "update 300 of at most 900 (6.00 s per update); valid BLEU 6.00 at update 300 (best 6.00)"
    assert r.left.seconds == pytest.approx(600 * 6.0 + 210) and r.left.source == "grid"
    assert runs["lstm/seed2"].left.seconds == pytest.approx(900 * 6.0 + 210)
    assert "its training at its own runs' pace where they have logged one" in text
    # a log with one point per stretch, or none, gives no pace: the Transformer's 2 s per update stand
    (training.dir / "log.txt").write_text(OLD_LOG.split("##### 2026-11-28 23:50")[0], encoding="utf-8")
    assert progress.log_points(training.dir) == {} and progress.own_pace(training.dir) is None
    with lock_held_elsewhere(training.dir):
        assert _by_key(status.folder_status(out, ["lstm"]))["lstm/seed1"].left.seconds == pytest.approx(1410)


def test_a_run_nobody_holds_is_stopped_and_says_what_a_rerun_picks_up(tmp_path):
    out = tmp_path / "exp"
    _record(out, seeds=(1,))
    _finish(_spec(out, "softmax", 1))
    killed = _spec(out, "csparsemax", 1)
    (killed.dir / "last.pt").write_bytes(b"")
    (killed.dir / "metrics.csv").write_text("step,name,value\n300,train/loss,2.0\n")
    (killed.dir / "log.txt").write_text("=== csparsemax/seed1\nepoch 1:  40%|####  | 300/750\rdied: out of memory\n")
    r = _by_key(status.folder_status(out))["csparsemax/seed1"]
    assert r.state == "stopped"
    assert r.detail == "rerun: resuming training from last.pt (update 300 logged); log: died: out of memory"
    assert r.left.seconds == pytest.approx(200 * 2.0 + 210) and r.left.source == "grid"  # softmax's times
    assert "* this system has no finished run yet: estimated from the folder's other systems' runs" in \
        status.render(out, status.folder_status(out))


@pytest.mark.parametrize("text, says", [("{cut short", "not a JSON object"), ('{"grid": "tiny"}', "missing"),
                                         ("[1, 2]", "not a JSON object")])
def test_a_spec_file_that_is_no_run_spec_is_named(tmp_path, text, says):
    out = tmp_path / "exp"
    _record(out, seeds=(1,))
    spec = _spec(out, "softmax", 1)
    (spec.dir / "spec.json").write_text(text, encoding="utf-8")
    r = _by_key(status.folder_status(out))["softmax/seed1"]
    assert r.state == "stopped" and r.detail.startswith(f"{spec.dir / 'spec.json'}: not a run spec (")
    assert says in r.detail and r.detail.endswith("the next `experiment run` writes it again")


def test_runs_not_started_are_estimated_from_the_steps_their_grid_plans(tmp_path):
    out = tmp_path / "exp"
    _record(out, seeds=(1, 2, 3))
    _finish(_spec(out, "softmax", 1))
    runs = _by_key(status.folder_status(out))
    assert [k for k, r in runs.items() if r.state == "not started"] == [
        "csparsemax/seed1", "softmax/seed2", "csparsemax/seed2", "softmax/seed3", "csparsemax/seed3"]  # run order
    assert runs["softmax/seed2"].left.seconds == pytest.approx(1000 + 60 + 30 + 120)
    assert runs["softmax/seed2"].left.source == "system" and runs["csparsemax/seed1"].left.source == "grid"


def test_a_run_of_two_grids_counts_once_and_grids_can_be_chosen(tmp_path, capsys):
    out = tmp_path / "exp"
    _record(out, name="table1", seeds=(1,))
    _record(out, name="ablation", seeds=(1,), systems=("softmax", "softmax-ls0"))
    _finish(_spec(out, "softmax", 1))
    text = status.render(out, status.folder_status(out))
    assert "ablation: 2 runs, 1 done, 1 not started" in text and "table1: 2 runs, 1 done, 1 not started" in text
    assert "left: 2 run(s)" in text  # csparsemax/seed1 and softmax-ls0/seed1; softmax/seed1 is done in both
    assert main(["experiment", "status", str(out), "--grid", "table1", "--brief"]) == 0
    shown = capsys.readouterr().out
    assert "ablation" not in shown and "softmax/seed1" not in shown and "csparsemax/seed1  not started" in shown
    assert main(["experiment", "status", str(out), "--grid", "table2"]) == 2
    assert "no grid named table2 recorded here (recorded: ablation, table1)" in capsys.readouterr().err


def test_each_grids_runs_left_take_its_own_commands_workers(tmp_path):
    """The KFTT folder: the LSTM grid (2 workers) is done, the Transformer grid (1 worker) has runs left; the
    summary said "with the grid command's 2 workers", halving a time that one worker spends."""
    out = tmp_path / "exp"
    _record(out, name="lstm", seeds=(1,), systems=("softmax",))
    _record(out, name="transformer", seeds=(1, 2), systems=("tf",), command="scanmt experiment run t.yaml")
    _finish(_spec(out, "softmax", 1))
    _finish(_spec(out, "tf", 1))  # 1000 + 60 + 30 + 120 s: tf/seed2 has 1,210 s left
    text = status.render(out, status.folder_status(out))
    assert "left: 1 run(s), about 20 min of run time" in text and "workers" not in text
    _record(out, name="lstm", seeds=(1, 2), systems=("softmax",))  # a second seed: 1,210 s over 2 workers
    text = status.render(out, status.folder_status(out))
    assert ("left: 2 run(s), about 40 min of run time, 30 min with each grid command's workers (1, 2)"
            in text), text


def test_the_holder_of_the_grid_lock_is_named(tmp_path):
    out = tmp_path / "exp"
    _record(out, seeds=(1,))
    with lock_held_elsewhere(out) as holder:
        first = status.render(out, status.folder_status(out)).splitlines()[0]
    assert first == f"{out}: a grid is running, process {holder.pid} (a test holding the lock)"


def test_lock_held_sees_other_processes_and_this_one_without_taking_the_lock(tmp_path):
    folder = tmp_path / "f"
    folder.mkdir()
    assert not lock_held(folder / ".lock")  # no file
    (folder / ".lock").write_text("12345\nleft behind by a killed run\n")
    assert not lock_held(folder / ".lock")  # a file nobody holds
    with lock_held_elsewhere(folder):
        assert lock_held(folder / ".lock")
    assert not lock_held(folder / ".lock")
    with lock_folder(folder):
        assert lock_held(folder / ".lock")


def test_workers_of_a_recorded_command():
    assert status.workers_of("scanmt experiment run g.yaml --workers 3 --out o") == 3
    assert status.workers_of("scanmt experiment run g.yaml --out o") == 1
    assert status.workers_of("scanmt experiment run 'unbalanced") == 1


def test_a_run_without_a_spec_plans_the_stages_of_run_spec_steps():
    """``status`` names the steps of a run that has no spec.json yet with the worker's own stage order
    (:func:`scanmt.experiments.spec.stage_names`), leaving out what its system skips."""
    from scanmt.experiments.spec import stage_names
    from scanmt.experiments.status import planned_steps

    rec = {"extra_splits": ["test2017"], "stress_k": [1, 2]}
    assert planned_steps(rec, {"reuse_model": "softmax", "tune_penalties": True}) == [
        "tune", "translate", "evaluate", "translate.test2017", "evaluate.test2017", "stress"]
    assert planned_steps({}, {}) == ["train", "translate", "evaluate"]
    assert stage_names(["test2017"], True) == ["train", "tune", "translate", "evaluate", "translate.test2017",
                                               "evaluate.test2017", "stress"]


def test_a_training_run_shows_its_baselines_validation_at_the_same_update(tmp_path):
    """csparsemax/seed2 validated at update 200; softmax/seed2 (its baseline, the same seed) logged 17.25 there,
    and seed 1's softmax, another seed, is not used.  Where the baseline has no validation at that update, or
    the record's baseline is no system of it, the row goes without the comparison."""
    out = tmp_path / "exp"
    _record(out)
    (_spec(out, "softmax", 1).dir / "metrics.csv").write_text("step,name,value\n200,valid/bleu,99.0\n")
    (_spec(out, "softmax", 2).dir / "metrics.csv").write_text("step,name,value\n100,valid/bleu,9.5\n"
                                                              "200,valid/bleu,17.0\n200,valid/bleu,17.25\n")
    training = _spec(out, "csparsemax", 2)
    (training.dir / "metrics.csv").write_text("step,name,value\n200,valid/bleu,18.0\n250,train/loss,2.0\n")
    with lock_held_elsewhere(training.dir):
        detail = _by_key(status.folder_status(out))["csparsemax/seed2"].detail
        assert detail.endswith("valid BLEU 18.00 at update 200 (best 18.00); softmax 17.25 there")
        (training.dir / "metrics.csv").write_text("step,name,value\n150,valid/bleu,18.0\n250,train/loss,2.0\n")
        detail = _by_key(status.folder_status(out))["csparsemax/seed2"].detail
        assert detail.endswith("valid BLEU 18.00 at update 150 (best 18.00)")
        rec = json.loads((out / "grids" / "tiny.json").read_text(encoding="utf-8"))
        (out / "grids" / "tiny.json").write_text(json.dumps({**rec, "baseline": "gone"}), encoding="utf-8")
        (training.dir / "metrics.csv").write_text("step,name,value\n200,valid/bleu,18.0\n250,train/loss,2.0\n")
        detail = _by_key(status.folder_status(out))["csparsemax/seed2"].detail
        assert detail.endswith("valid BLEU 18.00 at update 200 (best 18.00)")


def test_a_system_without_finished_runs_is_estimated_from_its_own_pace(tmp_path):
    """No run has finished: a training run's time left is its training's alone, at the pace its ``train/elapsed_s``
    rows give over the last 2,000 updates (here 1,000 -> 3,000: 2,400 s, 1.2 s per update; the slower first
    1,000 updates fall outside the window), up to ``train.max_steps`` (4,000 at most: early stopping may end it
    sooner).  A run from before the rows were logged, or with one row, still has no estimate."""
    out = tmp_path / "exp"
    _record(out, seeds=(1,), systems=("softmax",))
    run = _spec(out, "softmax", 1)
    run.config = {"train": {"max_steps": 4000, "patience": 4, "valid_every": 1000}}
    write_json(run.dir / "spec.json", run.to_dict())
    (run.dir / "last.pt").write_bytes(b"")
    rows = [(500, 1500.0), (1000, 3000.0), (2000, 4100.0), (2500, 4800.0), (3000, 5400.0)]
    (run.dir / "metrics.csv").write_text("step,name,value\n" + "".join(
        f"{s},train/loss,2.0\n{s},train/elapsed_s,{e}\n" for s, e in rows) + "3000,valid/bleu,20.0\n")
    assert progress.own_pace(run.dir) == pytest.approx(2400 / 2000)
    assert progress.max_updates(run) == (4000, False)
    with lock_held_elsewhere(run.dir):
        r = _by_key(status.folder_status(out))["softmax/seed1"]
        text = status.render(out, status.folder_status(out))
    assert r.detail == "update 3,000 of at most 4,000 (1.20 s per update); valid BLEU 20.00 at update 3,000 (best 20.00)"
    assert r.left.seconds == pytest.approx(1000 * 1.2) and r.left.source == "own"
    assert status._left_cell(r) == "20 min +"
    assert "left: 1 run(s), at least 20 min of run time, 10 min with the grid command's 2 workers" in text
    assert text.endswith("+ its training alone, at its own pace: no finished run tells how long the steps after it take")
    # rows further apart than the window: the last two; one row, or none: no pace, and no estimate
    (run.dir / "metrics.csv").write_text("step,name,value\n100,train/elapsed_s,50\n3000,train/elapsed_s,3530\n")
    assert progress.own_pace(run.dir) == pytest.approx(1.2)
    for csv in ("step,name,value\n3000,train/elapsed_s,3530\n", "step,name,value\n3000,train/loss,2.0\n"):
        (run.dir / "metrics.csv").write_text(csv)
        assert progress.own_pace(run.dir) is None
        with lock_held_elsewhere(run.dir):
            assert _by_key(status.folder_status(out))["softmax/seed1"].left is None


def test_status_names_a_restored_run_and_reads_a_damaged_record_without_failing(tmp_path):
    """``experiment status`` only reads: a run's record of the shared work it trained on is shown, and one that
    cannot be read is said, not raised."""
    from scanmt.experiments.status import _restored

    run = tmp_path / "run"
    run.mkdir()
    assert _restored(run) == ""
    (run / "shared-origin.json").write_text('{"alignments": "0123456789abcdef", "predictor": null, "archive": "A"}')
    assert _restored(run) == "; restored from A, trained on alignments 0123456789ab"
    (run / "shared-origin.json").write_text('{"predictor": null}')
    assert _restored(run).startswith("; restored, its record of the shared work it trained on unreadable: ")
