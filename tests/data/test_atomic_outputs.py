"""``scanmt.io``: several outputs as one unit, output checks, line endings (issue 27, items 3, 4, 20, 21, 22)."""

from __future__ import annotations

import os

import pytest

from scanmt import io as sio
from scanmt.errors import DataError
from scanmt.io import INCOMPLETE, atomic_open, atomic_outputs, check_outputs, read_lines, write_lines


def _files(tmp_path, *names: str) -> list[str]:
    paths = []
    for name in names:
        (tmp_path / name).write_text(f"old {name}\n")
        paths.append(str(tmp_path / name))
    return paths


def test_all_outputs_are_replaced_together(tmp_path):
    a, b = _files(tmp_path, "a", "b")
    c = str(tmp_path / "new" / "c")
    with atomic_outputs([a, b, c]) as temp:
        write_lines(temp[a], ["A"])
        with atomic_open(temp[b], "wb") as fh:
            fh.write(b"B\n")
        write_lines(temp[c], ["C"])
        assert open(a).read() == "old a\n"  # nothing replaced before the end
    assert [open(p).read() for p in (a, b, c)] == ["A\n", "B\n", "C\n"]
    assert sorted(os.listdir(tmp_path)) == ["a", "b", "new"] and os.listdir(tmp_path / "new") == ["c"]


def test_a_failed_write_changes_no_output_and_leaves_no_temporary_file(tmp_path):
    a, b = _files(tmp_path, "a", "b")
    with pytest.raises(OSError):
        with atomic_outputs([a, b]) as temp:
            write_lines(temp[a], ["A"])
            raise OSError(28, "No space left on device")
    assert [open(p).read() for p in (a, b)] == ["old a\n", "old b\n"]
    assert sorted(os.listdir(tmp_path)) == ["a", "b"]


def test_a_failed_rename_leaves_the_incomplete_marker(tmp_path, monkeypatch):
    """A kill between two renames: the marker beside the last target lists the set."""
    a, b = _files(tmp_path, "a", "b")
    real = os.replace

    def dies_on_the_second(src, dst):
        if str(dst) == b:  # a is renamed already
            raise KeyboardInterrupt  # stands for the kill
        real(src, dst)

    monkeypatch.setattr(sio.os, "replace", dies_on_the_second)
    with pytest.raises(KeyboardInterrupt):
        with atomic_outputs([a, b]) as temp:
            write_lines(temp[a], ["A"])
            write_lines(temp[b], ["B"])
    marker = tmp_path / ("b" + INCOMPLETE)
    assert open(a).read() == "A\n" and open(b).read() == "old b\n"
    assert marker.is_file() and a in marker.read_text() and b in marker.read_text()
    monkeypatch.setattr(sio.os, "replace", real)
    with atomic_outputs([a, b]) as temp:  # the next run replaces the set and removes the marker
        write_lines(temp[a], ["A2"])
        write_lines(temp[b], ["B2"])
    assert not marker.exists() and open(b).read() == "B2\n"


def test_standard_output_is_written_after_the_files(tmp_path, capsys):
    (a,) = _files(tmp_path, "a")
    with atomic_outputs([a, "-"]) as temp:
        write_lines(temp["-"], ["to stdout"])
        write_lines(temp[a], ["A"])
    assert capsys.readouterr().out == "to stdout\n" and open(a).read() == "A\n"


def test_the_same_output_twice_is_refused(tmp_path):
    with pytest.raises(DataError, match="named twice"):
        with atomic_outputs([str(tmp_path / "x"), str(tmp_path / "x")]):
            pass


def test_check_outputs(tmp_path):
    (inp,) = _files(tmp_path, "in")
    (tmp_path / "file").write_text("x")
    check_outputs({"--out": str(tmp_path / "new" / "deeper" / "o"), "--other": "-"}, {"--in": inp})
    cases = [
        ({"--out": inp}, "--out .* is the --in file"),
        ({"--out": str(tmp_path / "." / "in")}, "is the --in file"),
        ({"--out": str(tmp_path / "o"), "--also": str(tmp_path / "o")}, "name the same file"),
        ({"--out": str(tmp_path)}, "is a folder"),
        ({"--out": str(tmp_path / "file" / "o")}, "is a file, not a folder"),
    ]
    for outputs, message in cases:
        with pytest.raises(DataError, match=message):
            check_outputs(outputs, {"--in": inp})
    check_outputs({"--out": "/dev/null", "--also": "/dev/null"}, {})  # a device may take two outputs


@pytest.mark.parametrize("data, message", [
    (b"one\rtwo\rthree\r", "f.txt: text has carriage-return-only line endings"),
    (b"one\r\ntwo\rthree\r\n", "f.txt:2: text has a carriage return"),
    ("one\n\u200b\u200b\n".encode(), "f.txt:2: text has a line with no visible character"),
    (b"one\n\x01\x02\n", "f.txt:2: text has a line with no visible character"),
])
def test_read_lines_refuses_lone_carriage_returns_and_invisible_lines(tmp_path, data, message):
    """Items 20 and 21: a CR-only file was one sentence; a line of control characters passed prepare."""
    (tmp_path / "f.txt").write_bytes(data)
    with pytest.raises(DataError, match=message):
        read_lines(tmp_path / "f.txt", what="text")


def test_windows_line_endings_are_fine(tmp_path):
    (tmp_path / "f.txt").write_bytes(b"one\r\ntwo\r\n")
    assert read_lines(tmp_path / "f.txt") == ["one", "two"]
