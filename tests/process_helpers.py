"""Helpers of the tests that start, signal and kill scanmt processes (issue 27: locks, children, SIGTERM)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterator


def _like_a_terminal() -> None:
    """In the child before it execs: Ctrl-C's default action, as a terminal's job has it.  A test suite started
    in the background of a non-interactive shell (``cmd &``) ignores SIGINT, and an ignored signal stays
    ignored through exec: the child would never see the test's Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


#: :class:`subprocess.Popen` arguments of a process started as a terminal's foreground job: a process group of
#: its own (the group a Ctrl-C goes to), and SIGINT not ignored whatever the test suite inherited
TERMINAL_JOB = {"start_new_session": True, "preexec_fn": _like_a_terminal}


def wait_for(condition: Callable[[], object], timeout: float, what: str) -> None:
    """Poll ``condition`` every 0.1 s until it is true; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.time() + timeout
    while not condition():
        if time.time() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.1)


def children(pid: int, marker: str) -> list[int]:
    """The live child processes of ``pid`` whose command line contains ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # after "PID (name) ": state, ppid, ...
        if int(fields[1]) == pid and fields[0] != "Z" and marker in cmdline:
            found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def stop(proc: subprocess.Popen) -> None:
    """SIGKILL ``proc`` if it still runs, and reap it."""
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=30)


@contextlib.contextmanager
def lock_held_elsewhere(folder: Path) -> Iterator[subprocess.Popen]:
    """Another process holding ``folder``'s lock (:func:`scanmt.processes.lock_folder`) while the block runs."""
    code = ("import sys, time; from scanmt.processes import lock_folder; "
            "lock = lock_folder(sys.argv[1], command='a test holding the lock'); print('locked', flush=True); "
            "time.sleep(300)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(folder)], stdout=subprocess.PIPE, text=True,
                            env={**os.environ})
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        yield proc
    finally:
        stop(proc)


#: a demo's training step alone (``scanmt.cli.demo._train_all``), endless, two tiny systems; it exits as
#: ``scanmt demo`` does when interrupted (128 + the signal)
DEMO_TRAINERS = """
import sys
from pathlib import Path
from scanmt.cli.demo import _train_all
from scanmt.processes import exit_status, sigterm_interrupts
from tests.conftest import tiny_config

data, out = Path(sys.argv[1]), Path(sys.argv[2])
endless = dict(train__max_steps=100000, train__epochs=1000, train__log_every=1, train__checkpoint_every=100000,
               train__valid_every=100000, train__logger="csv")
try:
    with sigterm_interrupts():
        _train_all({name: tiny_config(data, **endless) for name in ("softmax", "sparsemax")}, out, 100000)
except KeyboardInterrupt as exc:
    sys.exit(exit_status(exc))
"""

#: the systems :data:`DEMO_TRAINERS` trains
DEMO_SYSTEMS = ("softmax", "sparsemax")


def _logged_updates(metrics: Path) -> bool:
    """Whether a trainer's ``metrics.csv`` holds a logged update (a line after the header)."""
    try:
        return len(metrics.read_text(encoding="utf-8").splitlines()) > 1
    except OSError:
        return False


def start_demo_trainers(data: Path, out: Path, **popen) -> tuple[subprocess.Popen, list[int]]:
    """:data:`DEMO_TRAINERS` on ``data`` into ``out`` (``popen``: more :class:`subprocess.Popen` arguments),
    once both trainers have logged an update; the process and its two trainers' PIDs."""
    from tests.conftest import REPO

    parent = subprocess.Popen([sys.executable, "-c", DEMO_TRAINERS, str(data), str(out)], cwd=REPO,
                              stdout=subprocess.DEVNULL, **popen)
    try:
        # a logged update (log_every=1), not just the header: a trainer killed before its first update has
        # nothing to save, and one still setting up has not installed its SIGTERM handler yet
        wait_for(lambda: all(_logged_updates(out / n / "metrics.csv") for n in DEMO_SYSTEMS), 180,
                 "both trainers to train")
        trainers = children(parent.pid, "spawn_main")
        assert len(trainers) == 2, trainers
    except BaseException:
        stop(parent)
        raise
    return parent, trainers
