"""Issue 27 item 24: a finished run whose ``metrics.json`` does not parse is scored again, not skipped.

Before, a rerun skipped it as "done before" and the summary said "2/2 finished" with 0 seeds shown.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from scanmt.experiments import pool as grid_pool, state as run_state_module


def _finished_run(tmp_path, metrics: str | None):
    run = tmp_path / "runs" / "softmax" / "seed1"
    (run / ".stages").mkdir(parents=True)
    for stage in ("train", "translate", "evaluate"):
        (run / ".stages" / f"{stage}.done").write_text("{}\n", encoding="utf-8")
    (run / "DONE").write_text("2025-01-01 00:00:00\n", encoding="utf-8")
    if metrics is not None:
        (run / "metrics.json").write_text(metrics, encoding="utf-8")
    return SimpleNamespace(dir=run, extra_splits=(), key="softmax/seed1", model_from=None)


@pytest.mark.parametrize("metrics", ['{"bleu": 3', "", "[1, 2]", None])
def test_a_finished_run_with_unreadable_metrics_is_scored_again(tmp_path, metrics):
    spec = _finished_run(tmp_path, metrics)
    assert run_state_module.metrics_unreadable(spec) and run_state_module.run_status(spec) == "resume"
    assert f"scoring it again: its {spec.dir / 'metrics.json'} does not parse" in run_state_module.resume_note(spec)
    pool = grid_pool._Pool([spec], workers=1, gpus=(), threads={}, say=lambda _: None)
    assert pool.pending == [spec] and not pool.results  # not skipped as "done before"


def test_a_finished_run_with_good_metrics_is_skipped(tmp_path):
    spec = _finished_run(tmp_path, json.dumps({"bleu": 30.0, "meteor": 50.0, "rep": 1.0, "drop": 2.0}))
    assert not run_state_module.metrics_unreadable(spec) and run_state_module.run_status(spec) == "done"
    said = []
    pool = grid_pool._Pool([spec], workers=1, gpus=(), threads={}, say=said.append)
    assert pool.results[spec.key].status == "skipped" and "BLEU 30.00" in said[0]
