"""Killed commands take their children along and leave no temporary folder behind (issue 27, item 5).

``align`` runs the eflomal program as a child; ``demo`` trains its systems in child processes.  Both
kinds of child get SIGTERM when their parent dies, even by ``kill -9`` (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from scanmt.data.align import TEMP_PREFIX, Aligner, AlignerSettings
from tests.conftest import REPO
from tests.process_helpers import alive, children, start_demo_trainers, stop, wait_for


def _start_align(data: Path, tmp_path: Path) -> tuple[subprocess.Popen, int, Path]:
    """`scanmt align` on the training split, long enough to be killed; its eflomal child; its temp folder root."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "scanmt", "align", "--data", str(data), "--out",
                             str(tmp_path / "align"), "--level", "subword", "--splits", "train", "--samplers", "1",
                             "--rel-iterations", "50"], cwd=REPO, env={**os.environ, "TMPDIR": str(tmp)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    found: list[int] = []
    wait_for(lambda: found.extend(children(proc.pid, "bin/eflomal")) or found, 120, "eflomal to start")
    return proc, found[0], tmp


def _reap(pid: int) -> None:
    """Kill ``pid`` (a child the test made run) if the code under test left it running."""
    if alive(pid):
        os.kill(pid, signal.SIGKILL)


def test_sigterm_during_align_stops_eflomal_and_removes_its_temporary_folder(small_data_dir, tmp_path):
    proc, eflomal, tmp = _start_align(small_data_dir, tmp_path)
    try:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 143
        wait_for(lambda: not alive(eflomal), 10, "eflomal to stop with align")
        assert list(tmp.iterdir()) == [], "temporary files left behind"
    finally:
        stop(proc)
        _reap(eflomal)


def test_kill_9_during_align_takes_eflomal_along_and_the_next_run_removes_its_folder(small_data_dir, tmp_path,
                                                                                   monkeypatch, caplog):
    proc, eflomal, tmp = _start_align(small_data_dir, tmp_path)
    try:
        proc.kill()
        proc.wait(timeout=30)
        wait_for(lambda: not alive(eflomal), 10, "eflomal to die with align")
    finally:
        stop(proc)
        _reap(eflomal)
    left = [d.name for d in tmp.iterdir()]
    assert len(left) == 1 and left[0].startswith(f"{TEMP_PREFIX}{proc.pid}.")
    monkeypatch.setattr("tempfile.tempdir", str(tmp))
    Aligner(AlignerSettings(n_samplers=1)).fit(["a b ."] * 20, ["x y ."] * 20)
    assert list(tmp.iterdir()) == []
    assert f"left behind by an interrupted alignment (eflomal) (process {proc.pid})" in caplog.text


def test_kill_9_of_the_demo_takes_its_trainers_along_and_they_save(small_data_dir, tmp_path):
    """Both trainers of a demo killed by SIGKILL kept running and writing into the output folder."""
    out = tmp_path / "demo"
    parent, trainers = start_demo_trainers(small_data_dir, out, stderr=subprocess.DEVNULL)
    try:
        parent.kill()
        parent.wait(timeout=30)
        wait_for(lambda: not any(alive(pid) for pid in trainers), 60, "the trainers to stop with the demo")
    finally:
        stop(parent)
        for pid in trainers:
            _reap(pid)
    for name in ("softmax", "sparsemax"):
        assert (out / name / "last.pt").exists(), f"{name} stopped without saving last.pt"


def test_repeated_sigterms_of_a_parents_death_do_not_quit_at_once():
    """A parent's death can send a child several SIGTERMs (one per parent thread it is handed to); after
    the first, the trainer must go on saving rather than quit, while a real second SIGTERM still quits."""
    from scanmt.processes import Interrupted, second_sigterm

    orphaned = second_sigterm(parent=os.getppid() + 1)  # the parent it started with is gone
    assert orphaned(signal.SIGTERM, None) is None
    with pytest.raises(Interrupted):
        second_sigterm(parent=os.getppid())(signal.SIGTERM, None)
