"""The demo's progress bar and summary (issue 52, items 17 and 18).

Its trainers log their step every ``train.log_every`` (50) updates, which the bar polls every 2 s: the bar
counted each jump of 50 as made in 2 s, so the ETA read 1 min 19 s when 37 minutes remained.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from scanmt.cli import demo


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class _Trainer:
    """A trainer process that runs until the clock reaches ``end``."""

    def __init__(self, clock: _Clock, end: float) -> None:
        self.clock, self.end = clock, end

    def is_alive(self) -> bool:
        return self.clock.now < self.end


def test_the_eta_counts_the_time_between_logged_steps(monkeypatch, capsys, tmp_path):
    clock = _Clock()
    start, startup, per_update, log_every, updates = clock.now, 30.0, 1.0, 50, 300
    monkeypatch.setattr("tqdm.std.time", clock)
    monkeypatch.setattr(demo.time, "time", clock)
    monkeypatch.setattr(demo.time, "sleep", clock.sleep)
    monkeypatch.setattr(demo, "_finished", lambda run_dir, n: False)
    logged = lambda: min(updates, int((clock.now - start - startup) / per_update) // log_every * log_every)  # noqa: E731
    monkeypatch.setattr(demo, "_logged_step", lambda run_dir: max(0, logged()))
    end = start + startup + updates * per_update + 1
    procs = {name: _Trainer(clock, end) for name in ("softmax", "csparsemax")}
    demo._watch(procs, dict.fromkeys(procs), tmp_path, updates)
    frames = re.findall(r"\| \d+/600 \[(\d+):(\d\d)<(\d+):(\d\d), ([\d.]+)upd/s\]", capsys.readouterr().err)
    assert len(frames) > 100
    for m, s, eta_m, eta_s, rate in frames:  # two systems at 1 update/s each: 2 updates/s, done at 330 s
        assert float(rate) == pytest.approx(2.0, abs=0.01), frames
        left = max(0, startup + updates * per_update - 60 * int(m) - int(s))
        assert 60 * int(eta_m) + int(eta_s) == pytest.approx(left, abs=1), frames


def test_the_summary_says_how_to_reuse_the_prepared_data(tmp_path, capsys):
    result = demo.SystemResult("softmax", 20, 0.5, "", 30.0, 1.0, 2.0, 3.0, tmp_path / "softmax" / "test.hyp.en")
    demo._print_summary([result], tmp_path, None, 20, 60.0, [], comparable=False, preset=Path("cpu-small.yaml"))
    assert f"--config cpu-small.yaml --set data.dir={tmp_path / 'data'} --out DIR" in capsys.readouterr().out
