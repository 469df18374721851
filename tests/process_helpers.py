"""Helpers of the tests that start, signal and kill scanmt processes (issue 27: locks, children, SIGTERM)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterator


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
