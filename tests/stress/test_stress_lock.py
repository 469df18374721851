"""Two ``scanmt stress`` runs into one ``--out`` both exited 0: ``stress.json`` kept one, and the other's files were
orphaned (issue 52, item 8).  The folder is locked (:func:`scanmt.processes.lock_folder`) as ``train``'s is: the
second fails naming the first."""

from __future__ import annotations

import json

from scanmt.cli.main import main
from tests.process_helpers import lock_held_elsewhere


def _argv(tmp, ckpt, out) -> list[str]:
    return ["stress", "--model", str(ckpt), "--src", str(tmp / "test.raw.de"), "--ref", str(tmp / "test.raw.en"),
            "--k", "1", "2", "--beam", "1", "--out", str(out)]


def _holder_named(capsys, out, holder) -> None:
    err = capsys.readouterr().err
    assert f"--out {out}: process {holder.pid} (a test holding the lock) is writing into this folder" in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


def test_a_second_stress_into_a_folder_being_written_fails_naming_the_first(stress_setup, tmp_path, capsys):
    tmp, ckpt = stress_setup
    out = tmp_path / "o"
    with lock_held_elsewhere(out) as holder:
        assert main(_argv(tmp, ckpt, out)) == 2
    _holder_named(capsys, out, holder)
    assert sorted(p.name for p in out.iterdir()) == [".lock"]


def test_boundary_only_into_a_folder_being_written_fails_naming_the_writer(stress_setup, tmp_path, capsys):
    tmp, ckpt = stress_setup
    out = tmp_path / "o"
    assert main(_argv(tmp, ckpt, out)) == 0
    before = (out / "stress.json").read_bytes()
    capsys.readouterr()
    with lock_held_elsewhere(out) as holder:
        assert main(["stress", "--boundary-only", "--out", str(out)]) == 2
    _holder_named(capsys, out, holder)
    assert (out / "stress.json").read_bytes() == before
    json.loads(before)
    # without a folder there is nothing to lock: the usual error, and no folder made
    assert main(["stress", "--boundary-only", "--out", str(tmp_path / "none")]) == 2
    assert "no such file" in capsys.readouterr().err and not (tmp_path / "none").exists()
