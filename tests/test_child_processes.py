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
from tests.process_helpers import alive, children, stop, wait_for


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


DEMO_TRAINERS = """
import sys
from pathlib import Path
from scanmt.cli.demo import _train_all
from tests.conftest import tiny_config

data, out = Path(sys.argv[1]), Path(sys.argv[2])
endless = dict(train__max_steps=100000, train__epochs=1000, train__log_every=1, train__checkpoint_every=100000,
               train__valid_every=100000, train__logger="csv")
_train_all({name: tiny_config(data, **endless) for name in ("softmax", "sparsemax")}, out, 100000)
"""


def _logged_updates(metrics: Path) -> bool:
    """Whether a trainer's ``metrics.csv`` holds a logged update (a line after the header)."""
    try:
        return len(metrics.read_text(encoding="utf-8").splitlines()) > 1
    except OSError:
        return False


def test_kill_9_of_the_demo_takes_its_trainers_along_and_they_save(small_data_dir, tmp_path):
    """Both trainers of a demo killed by SIGKILL kept running and writing into the output folder."""
    out = tmp_path / "demo"
    parent = subprocess.Popen([sys.executable, "-c", DEMO_TRAINERS, str(small_data_dir), str(out)], cwd=REPO,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    trainers: list[int] = []
    try:
        # a logged update (log_every=1), not just the header: a trainer killed before its first update has
        # nothing to save, and one still setting up has not installed its SIGTERM handler yet
        wait_for(lambda: all(_logged_updates(out / n / "metrics.csv") for n in ("softmax", "sparsemax")), 180,
                 "both trainers to train")
        trainers = children(parent.pid, "spawn_main")
        assert len(trainers) == 2, trainers
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
