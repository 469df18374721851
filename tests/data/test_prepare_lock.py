"""Two ``scanmt prepare`` runs into one new ``--out`` both exited 0, one preparation silently replacing the other
(issue 52, item 5).  The folder is locked (:func:`scanmt.processes.lock_folder`) as ``train``'s is: a second
prepare, or one that would reuse a preparation being written, fails naming the first."""

from __future__ import annotations

import json

from scanmt.cli.main import main
from tests.data.test_prepare_safety import _cli, raw  # noqa: F401 - raw: the fixture
from tests.process_helpers import lock_held_elsewhere


def _holder_named(capsys, out, holder) -> None:
    err = capsys.readouterr().err
    assert f"--out {out}: process {holder.pid} (a test holding the lock) is writing into this folder" in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


def test_a_second_prepare_into_a_new_folder_fails_naming_the_first(raw, tmp_path, capsys):  # noqa: F811
    out = tmp_path / "data"
    with lock_held_elsewhere(out) as holder:
        assert main(_cli(raw, out)) == 2
    _holder_named(capsys, out, holder)
    assert sorted(p.name for p in out.iterdir()) == [".lock"] and not list(tmp_path.glob(".data.tmp.*"))
    assert main(_cli(raw, out)) == 0  # the holder gone, its lock file alone does not make the folder foreign
    meta = json.loads((out / "meta.json").read_text(encoding="utf-8"))
    assert sorted(p.name for p in out.iterdir()) == sorted(meta["files"] + [".lock"])


def test_a_preparation_being_written_is_not_reused(raw, tmp_path, capsys):  # noqa: F811
    """Reusing it would hand a training data that a ``--force`` is replacing file by file."""
    out = tmp_path / "data"
    assert main(_cli(raw, out)) == 0
    capsys.readouterr()
    for extra in ((), ("--force",)):
        with lock_held_elsewhere(out) as holder:
            assert main(_cli(raw, out, *extra)) == 2
        _holder_named(capsys, out, holder)


def test_an_experiments_mirror_of_a_preparation_leaves_its_lock_out(raw, tmp_path):  # noqa: F811
    """The lock file records a PID: linked into OUT/shared/data, the archive would record its digest as data."""
    from scanmt.experiments.shared import mirror_prepared

    data, mirror = tmp_path / "data", tmp_path / "exp" / "shared" / "data"
    assert main(_cli(raw, data)) == 0
    assert (data / ".lock").is_file()
    mirror_prepared(data, mirror)
    assert (mirror / "meta.json").is_symlink() and not (mirror / ".lock").is_symlink()
