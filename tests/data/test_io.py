import pytest

from scanmt.errors import DataError
from scanmt.io import atomic_open, check_parallel, read_lines, write_lines


def test_read_lines_ok(tmp_path):
    p = tmp_path / "a.txt"
    p.write_bytes("eins\nzwei\r\ndrei\n".encode())
    assert read_lines(p) == ["eins", "zwei", "drei"]


@pytest.mark.parametrize(
    "content, message",
    [
        (b"a\n\nb\n", "a.txt:2: file has an empty line"),
        (b"a\nb\n\n", "a.txt:3: file ends with a blank line"),
        (b"ok\nbad \xff byte\n", "a.txt:2: file is not valid UTF-8"),
    ],
)
def test_read_lines_errors_name_file_and_line(tmp_path, content, message):
    p = tmp_path / "a.txt"
    p.write_bytes(content)
    with pytest.raises(DataError, match=message.replace(".", r"\.")):
        read_lines(p)


def test_missing_file(tmp_path):
    with pytest.raises(DataError, match="nope.txt: file not found"):
        read_lines(tmp_path / "nope.txt")


def test_parallel_mismatch():
    with pytest.raises(DataError, match="a has 2 lines but b has 1"):
        check_parallel(["x", "y"], ["z"], "a", "b")


def test_atomic_open_leaves_nothing_on_error(tmp_path):
    target = tmp_path / "out.txt"
    write_lines(target, ["old"])
    with pytest.raises(RuntimeError):
        with atomic_open(target) as fh:
            fh.write("half")
            raise RuntimeError("killed")
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_atomic_write_removes_the_temporary_file_of_a_killed_writer(tmp_path, caplog):
    """A write killed before its rename (SIGKILL during ``last.pt``) left ``.NAME.*.tmp`` behind for good."""
    import os
    import subprocess
    import sys

    from scanmt.io import atomic_open

    target = tmp_path / "last.pt"
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = int(child.stdout)  # a process that has exited
    stale = tmp_path / f".last.pt.{dead}.abc123_x.tmp"
    live = tmp_path / f".last.pt.{os.getpid()}.zzz999_y.tmp"  # a writer still running (this process)
    other = tmp_path / f".last.pt.1234.{dead}.abc.tmp"  # a temporary of a file named last.pt.1234
    for f in (stale, live, other):
        f.write_bytes(b"partial")
    with caplog.at_level("WARNING"):
        with atomic_open(target, "wb") as fh:
            fh.write(b"whole")
    assert target.read_bytes() == b"whole"
    assert not stale.exists() and live.exists() and other.exists()
    assert f"interrupted write of last.pt (process {dead})" in caplog.text
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == sorted([live.name, other.name])
