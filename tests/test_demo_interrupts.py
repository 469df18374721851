"""A demo stopped while it trains says that it was interrupted and how to continue (issue 52, item 13).

Before, each trainer printed its traceback (``scanmt.processes.Interrupted``) and the demo then said
"training softmax, csparsemax failed", although both had saved ``last.pt``; a terminal's Ctrl-C reached
the trainers as well as the demo, whose SIGTERM then made them quit at once, losing their last updates.
"""

from __future__ import annotations

import os
import signal
import subprocess

from tests.process_helpers import DEMO_SYSTEMS, TERMINAL_JOB, alive, start_demo_trainers, stop, wait_for

CONTINUE = "run the same scanmt demo command again to continue (each system resumes from its last.pt)"


def _interrupted_line(stderr: str, out) -> str:
    """The demo's one line about its interrupted training; every system named with the update it saved."""
    assert "Traceback" not in stderr and "failed" not in stderr, stderr
    line = next((ln for ln in stderr.splitlines() if ln.startswith("training interrupted (")), None)
    assert line is not None, stderr
    for name in DEMO_SYSTEMS:
        assert f"{name}: saved {out / name / 'last.pt'} at update " in line, line
    assert line.endswith(CONTINUE), line
    return line


def _no_update_lost(out) -> None:
    for name in DEMO_SYSTEMS:
        log = (out / name / "train.log").read_text(encoding="utf-8")
        assert "no update lost" in log and "are lost" not in log, log[-2000:]


def _stop_training(data, out, signal_it, **popen) -> tuple[int, str]:
    """The demo's exit status and stderr after ``signal_it(demo, trainers)`` while they train."""
    demo, trainers = start_demo_trainers(data, out, stderr=subprocess.PIPE, text=True, **popen)
    try:
        signal_it(demo, trainers)
        _, stderr = demo.communicate(timeout=60)
    finally:
        stop(demo)
    return demo.returncode, stderr


def test_ctrl_c_in_a_terminal_stops_the_trainers_once_and_says_how_to_continue(small_data_dir, tmp_path):
    """Ctrl-C goes to the terminal's whole process group."""
    out = tmp_path / "demo"
    code, stderr = _stop_training(small_data_dir, out, lambda demo, _: os.killpg(demo.pid, signal.SIGINT),
                                  **TERMINAL_JOB)
    assert code == 130
    _interrupted_line(stderr, out)
    _no_update_lost(out)


def test_trainers_stopped_by_sigterm_are_interrupted_not_failed(small_data_dir, tmp_path):
    """The trainers get SIGTERM from elsewhere (a process-group kill, a user's ``kill``), the demo none."""
    out = tmp_path / "demo"
    code, stderr = _stop_training(small_data_dir, out,
                                  lambda _, trainers: [os.kill(pid, signal.SIGTERM) for pid in trainers])
    assert code == 143
    _interrupted_line(stderr, out)
    _no_update_lost(out)


def test_trainers_of_a_killed_demo_say_where_they_saved(small_data_dir, tmp_path):
    """``kill -9`` of the demo: its trainers stop and save; each says so in one line instead of a traceback."""
    out = tmp_path / "demo"
    demo, trainers = start_demo_trainers(small_data_dir, out, stderr=subprocess.PIPE, text=True)
    try:
        demo.kill()
        _, stderr = demo.communicate(timeout=60)  # the trainers hold the pipe until they end
        wait_for(lambda: not any(alive(pid) for pid in trainers), 60, "the trainers to stop with the demo")
    finally:
        stop(demo)
        for pid in trainers:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
    assert "Traceback" not in stderr, stderr
    for name in DEMO_SYSTEMS:
        assert (f"scanmt demo: {name}: interrupted by the demo's end: saved {out / name / 'last.pt'} at update "
                in stderr), stderr
    assert stderr.count(CONTINUE) == 2, stderr
    _no_update_lost(out)
