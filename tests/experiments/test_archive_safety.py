"""``experiment archive|restore`` never lose a user's data (issue 52, items 1, 2 and 4): a crafted archive
writes nothing outside ``--out``, ``--to`` never replaces a folder it did not make, and a pack or a restore
that is interrupted (``kill -9``) or fails leaves the archive, and ``--out``, whole."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import tarfile
from pathlib import Path
from typing import Callable

import pytest

from scanmt import folder_swap
from scanmt.cli.main import main
from scanmt.errors import BusyError, ConfigError, DataError
from scanmt.experiments import archive
from scanmt.experiments.archive import manifest as archive_manifest
from scanmt.experiments.archive import packing

from .test_archive import WEIGHTS, FakeTrainer, make_experiment


def snapshot(root: Path, leave_out: Path | None = None) -> dict[str, tuple[str, bytes | str]]:
    """Every folder, file (its bytes) and symbolic link (its target) below ``root``, but ``leave_out``'s."""
    found: dict[str, tuple[str, bytes | str]] = {}
    for base, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(base) / name
            if leave_out is not None and (p == leave_out or leave_out in p.parents):
                continue
            rel = p.relative_to(root).as_posix()
            if p.is_symlink():
                found[rel] = ("link", os.readlink(p))
            elif p.is_dir():
                found[rel] = ("dir", "")
            else:
                found[rel] = ("file", p.read_bytes())
    return found


def craft(path: Path, members: list[tuple[str, str]]) -> None:
    """Write the tarball ``path`` of ``members``: ``(name, "-> TARGET")`` a symbolic link, else a file of that text."""
    with tarfile.open(path, "w:gz") as tar:
        for name, what in members:
            info = tarfile.TarInfo(name)
            if what.startswith("-> "):
                info.type, info.linkname = tarfile.SYMTYPE, what[3:]
                tar.addfile(info)
            else:
                info.size = len(what.encode())
                tar.addfile(info, io.BytesIO(what.encode()))


@pytest.fixture()
def packed(tmp_path: Path) -> tuple[Path, Path]:
    """``(out, dest)``: the made-up experiment packed into ``tmp_path/archive``, and a folder ``victim`` beside."""
    out = make_experiment(tmp_path)
    dest = tmp_path / "archive"
    archive.pack(out, dest)
    (tmp_path / "victim").mkdir()
    (tmp_path / "victim" / "file").write_text("precious\n")
    return out, dest


def _crafted_cases(tmp_path: Path) -> list[tuple[str, list[tuple[str, str]]]]:
    victim, data = tmp_path / "victim", tmp_path / "data"
    run = [("esc", f"-> {victim}"), ("esc/x", "planted")]  # a link to a folder, then a member below it
    same = [("zz", f"-> {victim / 'file'}"), ("zz", "overwritten")]  # a link, then a file of its name
    absolute, up = [(str(victim / "abs"), "planted")], [("../escape", "x"), ("a/../../escape", "x")]
    return [("runs/softmax/seed1.tar.gz", run), ("runs/softmax/seed1.tar.gz", same),
            ("runs/csparsemax/seed2.tar.gz", absolute), ("runs/csparsemax/seed2.tar.gz", up[:1]),
            ("runs/csparsemax/seed2.tar.gz", up[1:]),
            (archive.SHARED_TAR, run), (archive.SHARED_TAR, same), (archive.SHARED_TAR, absolute),
            (archive.SHARED_TAR, [("data/esc", f"-> {victim}"), ("data/esc/x", "planted")]),
            # the form of a mirrored data link, then a file of its name: it would overwrite the prepared data
            (archive.SHARED_TAR, [("data/meta.json", f"-> {data / 'meta.json'}"), ("data/meta.json", "{}")]),
            (archive.SHARED_TAR, [("data/passwd", "-> /etc/passwd")]),  # a link out of the prepared data
            (archive.SHARED_TAR, [("data/meta.json", f"-> {data / 'valid.bpe.de'}")]),  # to another of its files
            (archive.SHARED_TAR, up[:1])]


def test_a_crafted_archive_writes_nothing_outside_out(packed, tmp_path, capsys):
    out, dest = packed
    shutil.rmtree(out)
    for tar_name, members in _crafted_cases(tmp_path):
        original = (dest / tar_name).read_bytes()
        craft(dest / tar_name, members)
        before = snapshot(tmp_path, leave_out=out)
        with pytest.raises(DataError, match="unexpected member") as caught:
            archive.restore(dest, out, train_predictor=FakeTrainer(WEIGHTS))
        assert "\n" not in str(caught.value) and tar_name in str(caught.value), (tar_name, members)
        assert snapshot(tmp_path, leave_out=out) == before, (tar_name, members)
        assert not out.exists(), (tar_name, members)  # the whole archive is checked before anything is written
        (dest / tar_name).write_bytes(original)
    # the command line: one line, exit 2
    craft(dest / "runs" / "softmax" / "seed1.tar.gz", _crafted_cases(tmp_path)[0][1])
    assert main(["experiment", "restore", str(dest), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("scanmt experiment: error: ") and "\n" not in err and "unexpected member 'esc'" in err
    assert not (tmp_path / "victim" / "x").exists()


def test_the_mirrored_data_links_still_restore(packed, tmp_path):
    out, dest = packed
    shutil.rmtree(out)
    assert len(archive.restore(dest, out, train_predictor=FakeTrainer(WEIGHTS)).added) == 3
    assert os.readlink(out / "shared" / "data" / "meta.json") == str(tmp_path / "data" / "meta.json")


@pytest.mark.parametrize("key", ["softmax/seed1/extra", "../seed1", "softmax/..", "softmax/../../victim",
                                 "softmax", "softmax/seed1/../seed2", ".hidden/seed1", "softmax/seedx",
                                 "softmax\n/seed1", "softmax/seed1\n"])
def test_a_crafted_run_key_is_refused_before_anything_is_written(packed, key):
    out, dest = packed
    shutil.rmtree(out)
    manifest = json.loads((dest / archive.MANIFEST).read_text())
    manifest["runs"][key] = manifest["runs"]["softmax/seed1"]
    (dest / archive.MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(DataError, match=r"run .* is not SYSTEM/seedK .*nothing was restored"):
        archive.restore(dest, out, train_predictor=FakeTrainer(WEIGHTS))
    assert not out.exists()


def test_archive_to_a_folder_it_did_not_make_is_refused(tmp_path, capsys):
    out = make_experiment(tmp_path)
    home = tmp_path / "home"
    (home / "grids").mkdir(parents=True)
    (home / archive.SHARED_TAR).write_text("the user's own\n")
    (home / "grids" / "g.yaml").write_text("the user's own grid\n")
    before = snapshot(home)
    with pytest.raises(ConfigError, match=r"--to .*home: a folder with files but no manifest\.json"):
        archive.pack(out, home)
    assert main(["experiment", "archive", str(out), "--to", str(home)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("scanmt experiment: error: --to ") and "\n" not in err
    assert snapshot(home) == before
    (tmp_path / "a-file").write_text("x\n")
    with pytest.raises(ConfigError, match="not a folder"):
        archive.pack(out, tmp_path / "a-file")
    # a new or an empty folder becomes an archive; an archive holding a link is refused, as packing writes through it
    (tmp_path / "empty").mkdir()
    assert len(archive.pack(out, tmp_path / "empty").added) == 3
    assert len(archive.pack(out, tmp_path / "new" / "a").added) == 3
    (tmp_path / "empty" / "grids" / "g.yaml").unlink()
    (tmp_path / "empty" / "grids" / "g.yaml").symlink_to(home / "grids" / "g.yaml")
    with pytest.raises(DataError, match="a symbolic link in the archive"):
        archive.pack(out, tmp_path / "empty")
    assert snapshot(home) == before


def killed(action: Callable[[], object]) -> None:
    """Run ``action`` in a child process that it kills with SIGKILL (``kill -9``); fail if it does not."""
    pid = os.fork()
    if pid == 0:  # the child: whatever happens, it never returns into pytest
        try:
            action()
        finally:
            os._exit(3)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, status


def kill_me() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _change_two_runs(out: Path) -> None:
    for key in ("csparsemax/seed1", "softmax/seed1"):
        (out / "runs" / key / "metrics.json").write_text('{"bleu": 45.0}\n')


def _leftovers(dest: Path) -> list[str]:
    return sorted(p.name for p in dest.parent.iterdir() if p.name.startswith(f".{dest.name}."))


def test_a_pack_killed_after_one_run_leaves_the_archive_as_it_was(packed, tmp_path):
    out, dest = packed
    before = snapshot(dest)
    _change_two_runs(out)
    write = packing._deterministic_tar

    def pack_killed_after_one_run() -> None:
        packing._deterministic_tar = lambda *a: (write(*a), kill_me())  # type: ignore[assignment]
        archive.pack(out, dest)

    killed(pack_killed_after_one_run)
    assert snapshot(dest) == before  # not one run tarball newer than the manifest
    assert _leftovers(dest)  # the staging folder of the killed pack
    shutil.move(out, tmp_path / "old")
    assert len(archive.restore(dest, out, train_predictor=FakeTrainer(WEIGHTS)).added) == 3
    shutil.rmtree(out)
    shutil.move(tmp_path / "old", out)
    assert archive.pack(out, dest).updated == ["csparsemax/seed1", "softmax/seed1"]
    assert _leftovers(dest) == []
    # an unchanged run keeps its bytes through the copy and swap
    assert (dest / "runs" / "csparsemax" / "seed2.tar.gz").read_bytes() == \
        before["runs/csparsemax/seed2.tar.gz"][1]


def test_a_pack_killed_while_it_swaps_is_finished_by_the_next(packed, monkeypatch):
    """Without an atomic exchange the archive is renamed aside, then the new one into place; killed between the
    two renames, no archive is there until the next pack puts the complete new one in place."""
    out, dest = packed
    _change_two_runs(out)
    rename = os.rename

    def pack_killed_between_renames() -> None:
        folder_swap.exchange = lambda a, b: False  # type: ignore[assignment]
        os.rename = lambda a, b: (rename(a, b), Path(a) == dest and kill_me())  # type: ignore[assignment]
        archive.pack(out, dest)

    killed(pack_killed_between_renames)
    assert not dest.exists() and len(_leftovers(dest)) == 2  # the new archive, complete, and the old one
    s = archive.pack(out, dest)
    assert s.kept == ["csparsemax/seed1", "csparsemax/seed2", "softmax/seed1"] and not s.updated
    assert _leftovers(dest) == []

    # after the exchange, killed before it removed the old archive: the new one is in place
    (out / "runs" / "softmax" / "seed1" / "metrics.json").write_text('{"bleu": 46.0}\n')
    rmtree = shutil.rmtree

    def pack_killed_before_cleaning_up() -> None:
        shutil.rmtree = lambda p, *a, **k: kill_me() if Path(p).parent == dest.parent else rmtree(p, *a, **k)
        archive.pack(out, dest)

    killed(pack_killed_before_cleaning_up)
    manifest = json.loads((dest / archive.MANIFEST).read_text())
    assert manifest["runs"]["softmax/seed1"]["metrics"] == archive_manifest._metrics_digest(out / "runs" / "softmax" / "seed1")
    assert len(_leftovers(dest)) == 1
    assert archive.pack(out, dest).kept and _leftovers(dest) == []


def _done(out: Path) -> list[str]:
    return sorted(p.parent.relative_to(out).as_posix() for p in out.rglob("DONE"))


def test_a_run_tarball_newer_than_its_manifest_restores_nothing(packed, tmp_path):
    """The archive that a pack killed by the code before this fix left: one run tarball replaced, the old manifest."""
    out, dest = packed
    manifest = (dest / archive.MANIFEST).read_bytes()
    (out / "runs" / "softmax" / "seed1" / "metrics.json").write_text('{"bleu": 45.0}\n')
    archive.pack(out, dest)
    (dest / archive.MANIFEST).write_bytes(manifest)
    shutil.move(out, tmp_path / "old")
    for _ in range(2):  # and a second restore finds nothing "already there"
        with pytest.raises(DataError, match=r"softmax/seed1\.tar\.gz: its metrics\.json does not match manifest"):
            archive.restore(dest, out, train_predictor=FakeTrainer(WEIGHTS))
        assert not out.exists() or _done(out) == []


def test_a_restore_that_fails_midway_removes_what_it_unpacked(packed, tmp_path, monkeypatch):
    out, dest = packed
    shutil.rmtree(out)
    replace = os.replace

    def disk_full_at_the_last_run(src, dst):
        if Path(dst) == out / "runs" / "softmax" / "seed1":
            raise OSError(28, "No space left on device", str(dst))
        return replace(src, dst)

    monkeypatch.setattr(os, "replace", disk_full_at_the_last_run)
    with pytest.raises(OSError, match="No space left"):
        archive.restore(dest, out, train_predictor=FakeTrainer(WEIGHTS))
    monkeypatch.undo()
    assert _done(out) == [] and not (out / "shared").exists()  # two runs were in place before it failed
    assert not [p for p in out.rglob("*") if p.name.endswith(".restoring")]
    s = archive.restore(dest, out, train_predictor=FakeTrainer(WEIGHTS))
    assert s.added == ["csparsemax/seed1", "csparsemax/seed2", "softmax/seed1"] and not s.kept


def test_a_second_pack_beside_waits_for_the_first(packed):
    """Packs into the same parent folder take turns (a flock on it), so that each knows that the temporary
    folders beside the archive were left by a killed pack."""
    import fcntl

    out, dest = packed
    fd = os.open(dest.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(BusyError, match=r"--to .*archive: another process has been replacing a folder in"):
            with folder_swap.replacing_folder(dest, what="--to", wait_s=0.3):
                pass
    finally:
        os.close(fd)
    assert _leftovers(dest) == [] and archive.pack(out, dest).kept


def test_a_refused_pack_leaves_the_archive_and_nothing_beside_it(packed):
    out, dest = packed
    before = snapshot(dest)
    _change_two_runs(out)
    (out / "shared" / "data" / "align" / "train.word.align").write_text("0-1 1-0\n")  # aligned afresh
    with pytest.raises(DataError, match="differs from the shared work archived"):
        archive.pack(out, dest)
    assert snapshot(dest) == before and _leftovers(dest) == []
