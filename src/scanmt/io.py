"""Small file helpers used by every layer: atomic writes, checked text reading, logging to stderr.

``read_lines`` turns every way a text file can be wrong (missing, not UTF-8,
empty line, trailing blank line) into a :class:`~scanmt.errors.DataError`
naming the file and the 1-based line number.  ``load_yaml`` reads the YAML of
configs and grid files, refusing a key written twice in one mapping.
"""

from __future__ import annotations

import contextlib
import glob
import gzip
import logging
import os
import re
import shutil
import stat
import sys
import tempfile
from pathlib import Path
from typing import IO, Callable, Iterator

import yaml
import yaml.constructor

from scanmt.errors import DataError


#: the file name that means standard input (reading) or standard output (writing)
STDIO = "-"
#: the lock file a command writing into a folder holds there (:func:`scanmt.processes.lock_folder`)
LOCK_FILE = ".lock"


def is_stdio(path: str | Path) -> bool:
    """Whether ``path`` is ``-`` (standard input or output)."""
    return str(path) == STDIO


@contextlib.contextmanager
def atomic_open(path: str | Path, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO]:
    """Open ``path`` for writing so that it never holds a half-written file.

    A regular file (or a new name) is written to a temporary file next to it, which is
    renamed over it on success; on any exception the temporary file is removed and
    ``path`` is untouched.  A symbolic link is followed: its target is replaced and the
    link kept.  Anything else that exists (a device such as ``/dev/null``, a pipe, a
    terminal) is written to directly, never renamed over; ``-`` is standard output, and
    ``/dev/stdout`` or ``/dev/fd/N`` the open descriptor itself (a file the shell
    appends to stays appended to).
    A directory is a :class:`DataError`.
    """
    binary = "b" in mode
    if is_stdio(path):
        stream = sys.stdout.buffer if binary else sys.stdout
        yield stream
        stream.flush()
        return
    fd = _open_descriptor(path)
    if fd is not None:  # /dev/stdout, /dev/fd/N: write to the descriptor itself (keeping its append mode)
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        with os.fdopen(os.dup(fd), mode, encoding=None if binary else encoding) as fh:
            yield fh
        return
    path = Path(path)
    st = _stat(path)
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise DataError(f"{path}: is a directory, expected a file name")
    if st is not None and not stat.S_ISREG(st.st_mode):
        with open(path, mode, encoding=None if binary else encoding) as fh:
            yield fh
        return
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    with _replacing(path, mode, encoding, st) as fh:
        yield fh


_DESCRIPTOR = re.compile(r"^/(?:proc/(?:self|\d+)/fd|dev/fd)/(\d+)$")


def _open_descriptor(path: str | Path) -> int | None:
    """N when ``path`` is, or links to, this process's ``/proc/self/fd/N`` or ``/dev/fd/N``
    (``/dev/stdout`` is such a link); reopening it would truncate a file the shell appends to."""
    current = os.path.abspath(path)
    for _ in range(40):  # the kernel's limit on nested links
        match = _DESCRIPTOR.match(current)
        if match and (current.startswith(("/proc/self/", "/dev/fd/")) or current.split("/")[2] == str(os.getpid())):
            return int(match.group(1))
        if not os.path.islink(current):
            return None
        current = os.path.normpath(os.path.join(os.path.dirname(current), os.readlink(current)))
    return None


def _stat(path: Path) -> os.stat_result | None:
    """``os.stat`` (links followed), or None if nothing is there."""
    try:
        return os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None


@contextlib.contextmanager
def _replacing(path: Path, mode: str, encoding: str | None, old: os.stat_result | None) -> Iterator[IO]:
    """Write a temporary file ``.NAME.PID.RANDOM.tmp`` beside the regular file ``path`` and rename it over
    ``path``; first remove such files of ``path`` that writers killed before their rename left behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp")
    # mkstemp creates 0600: keep the replaced file's permissions, else give the usual ones
    os.chmod(tmp, stat.S_IMODE(old.st_mode) if old is not None else 0o666 & ~_umask())
    binary = "b" in mode
    try:
        with os.fdopen(fd, mode, encoding=None if binary else encoding) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def remove_stale_temps(path: Path) -> list[Path]:
    """Remove the temporary files of :func:`atomic_open` for ``path`` whose writing process is gone
    (killed before its rename, e.g. a ``last.pt`` write); returns them.  A file whose process still
    runs, or that is not named ``.NAME.PID.RANDOM.tmp``, is left alone."""
    prefix = f".{path.name}."
    removed = []
    for tmp in sorted(path.parent.glob(f"{glob.escape(prefix)}*.tmp")):
        parts = tmp.name[len(prefix):].split(".")  # PID, RANDOM (mkstemp: no dots), tmp
        if len(parts) != 3 or not parts[0].isdigit() or process_alive(int(parts[0])):
            continue
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
            removed.append(tmp)
            logging.getLogger(__name__).warning("removed %s, left behind by an interrupted write of %s (process %s)",
                                                tmp, path.name, parts[0])
    return removed


def remove_stale_temp_dirs(parent: Path, prefix: str, what: str) -> list[tuple[Path, str]]:
    """Remove the temporary folders ``PREFIX + PID + .RANDOM`` in ``parent`` whose process is gone (a run of
    ``what`` killed before it could clean up), each with a warning; returns the other folders whose name
    starts with ``prefix`` as ``(folder, PID)``, PID "" where the name holds none."""
    left = []
    for d in sorted(parent.glob(f"{glob.escape(prefix)}*")) if parent.is_dir() else []:
        if not d.is_dir() or d.is_symlink():
            continue
        pid = d.name[len(prefix):].split(".")[0]
        pid = pid if pid.isdigit() else ""
        if pid and not process_alive(int(pid)):
            shutil.rmtree(d, ignore_errors=True)
            if not d.exists():
                logging.getLogger(__name__).warning("removed %s, left behind by an interrupted %s (process %s)",
                                                    d, what, pid)
                continue
        left.append((d, pid))
    return left


def make_temp_dir(parent: Path, prefix: str, what: str) -> Path:
    """A new folder ``PREFIX + PID + .RANDOM`` in ``parent`` for this process (PID is ours), after removing
    those that killed runs of ``what`` left (:func:`remove_stale_temp_dirs`)."""
    remove_stale_temp_dirs(parent, prefix, what)
    parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(dir=parent, prefix=f"{prefix}{os.getpid()}."))


@contextlib.contextmanager
def temp_dir(prefix: str, what: str, parent: Path | None = None) -> Iterator[Path]:
    """:func:`make_temp_dir` in ``parent`` (default: the system's temporary folder), removed when the block
    ends, also by an exception (Ctrl-C, SIGTERM); one that ``kill -9`` left is removed by the next call."""
    d = make_temp_dir(parent or Path(tempfile.gettempdir()), prefix, what)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this machine (one of another user counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_lines(path: str | Path, lines: list[str] | tuple[str, ...]) -> None:
    """Atomically write one string per line (newline-terminated)."""
    with atomic_open(path) as fh:
        for line in lines:
            fh.write(line.rstrip("\n") + "\n")


def _open_text_bytes(path: Path) -> bytes:
    if is_stdio(path):
        return sys.stdin.buffer.read()
    if not path.exists():
        raise DataError(f"{path}: file not found")
    if path.is_dir():
        raise DataError(f"{path}: is a directory, expected a text file")
    raw = path.read_bytes()
    if path.suffix == ".gz":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise DataError(f"{path}: not a valid gzip file ({exc})") from None
    return raw


def read_lines(path: str | Path, *, allow_empty: bool = False, what: str = "file") -> list[str]:
    """Read a UTF-8 (optionally ``.gz``) text file as a list of lines without newlines (``-``: standard input).

    Args:
        path: the file.
        allow_empty: when False, an empty (or whitespace-only) line is an error.
        what: a word for the error messages ("source file", "hypothesis file", ...).

    Raises:
        DataError: missing file, invalid UTF-8 (with the line number), an empty
            line, or a trailing blank line (an extra newline at the end).
    """
    raw = _open_text_bytes(Path(path))
    path = "<stdin>" if is_stdio(path) else Path(path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line_no = raw[: exc.start].count(b"\n") + 1
        raise DataError(
            f"{path}:{line_no}: {what} is not valid UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})"
        ) from None
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the final newline
    lines = [ln[:-1] if ln.endswith("\r") else ln for ln in lines]
    if not allow_empty:
        for i, ln in enumerate(lines):
            if not ln.strip():
                if i == len(lines) - 1:
                    raise DataError(f"{path}:{i + 1}: {what} ends with a blank line (an extra trailing newline?)")
                raise DataError(f"{path}:{i + 1}: {what} has an empty line")
    return lines


class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key written twice in one mapping.

    PyYAML keeps the last of two equal keys without a word, so an edit that leaves an older
    ``scaling: none`` below a new ``scaling: cosine`` would silently train the old setting.
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base`: its keys may be overridden here
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node)
            except TypeError:  # an unhashable key: PyYAML's own error names it below
                continue
            if first is not key_node:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark,
                    f"found the key {key!r} a second time (first at line {first.start_mark.line + 1})",
                    key_node.start_mark)
        return super().construct_mapping(node, deep=deep)


def load_yaml(text: str, name: str = "<string>") -> object:
    """``yaml.safe_load(text)``, except that a key written twice in one mapping raises a
    ``yaml.YAMLError`` naming the key and both lines; ``name`` (the file) is what its marks name."""
    loader = _UniqueKeyLoader(text)
    loader.name = name  # PyYAML's marks read it when an error is raised
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def read_json(path: str | Path, *, missing: str) -> dict:
    """A JSON object from ``path``; ``missing`` is the error message when the file does not exist."""
    import json

    path = Path(path)
    if not path.exists():
        raise DataError(missing)
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise DataError(f"{path}: expected a JSON object")
    return obj


def check_parallel(src: list[str], tgt: list[str], src_path: str | Path, tgt_path: str | Path) -> None:
    """Raise :class:`DataError` unless the two sides have the same number of lines."""
    if len(src) != len(tgt):
        raise DataError(
            f"{src_path} has {len(src)} lines but {tgt_path} has {len(tgt)}: parallel files must match line by line"
        )


def check_output_dir(path: str | Path, *, ours: Callable[[Path], bool], holds: str, option: str = "--out") -> Path:
    """``path`` as a directory a command may write into, checked before any work is done.

    It may be absent, empty (a :data:`LOCK_FILE` left by a killed run does not count), or hold what
    ``ours(dir)`` recognises as the command's own earlier output (``holds`` says what, for the message).  A symbolic link to a
    directory is followed (the returned path is its target).  Raises :class:`DataError`
    naming ``option`` for a file, or for a non-empty folder of something else: a command
    never writes into, let alone deletes, a folder it did not make.
    """
    p = Path(path)
    try:
        if p.exists() and not p.is_dir():
            raise DataError(f"{option} {path}: is a file, not a folder")
        if p.is_symlink():
            p = Path(os.path.realpath(p))
        if p.is_dir() and any(f.name != LOCK_FILE for f in p.iterdir()) and not ours(p):
            raise DataError(
                f"{option} {path}: the folder is not empty and does not hold {holds}; refusing to write into it "
                "(give a new or empty folder)"
            )
    except OSError as exc:
        raise DataError(f"{option} {path}: {exc.strerror or exc}") from None
    return p


class ProgressBarSafeHandler(logging.StreamHandler):
    """Writes log records with ``tqdm.write``, so that a progress bar on the same terminal is cleared
    first and redrawn after, instead of having the record glued onto its line."""

    def emit(self, record: logging.LogRecord) -> None:
        from tqdm import tqdm

        try:
            tqdm.write(self.format(record), file=self.stream)
        except Exception:  # noqa: BLE001 - logging must not raise
            self.handleError(record)


def setup_logging(verbose: bool) -> None:
    """Log to stderr through :class:`ProgressBarSafeHandler` (unless the root logger has handlers already).

    Used by the ``scanmt`` command and by the experiment runner's worker processes.
    """
    root = logging.getLogger()
    if not root.handlers:
        handler = ProgressBarSafeHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s", datefmt="%H:%M:%S"))
        root.addHandler(handler)
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
