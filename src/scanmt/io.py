"""Small file helpers used by every layer: atomic writes, checked text reading, logging to stderr.

``read_lines`` turns every way a text file can be wrong (missing, not UTF-8,
empty line, trailing blank line) into a :class:`~scanmt.errors.DataError`
naming the file and the 1-based line number.  ``load_yaml`` reads the YAML of
configs and grid files, refusing a key written twice in one mapping.
"""

from __future__ import annotations

import contextlib
import errno
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
from typing import IO, Callable, Iterator, Mapping, Sequence

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


_DESCRIPTOR = re.compile(r"/(?:proc/(?:self|\d+)/fd|dev/fd)/(\d+)")


def _open_descriptor(path: str | Path) -> int | None:
    """N when ``path`` is, or links to, this process's ``/proc/self/fd/N`` or ``/dev/fd/N``
    (``/dev/stdout`` is such a link); reopening it would truncate a file the shell appends to."""
    current = os.path.abspath(path)
    for _ in range(40):  # the kernel's limit on nested links
        match = _DESCRIPTOR.fullmatch(current)
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


def _temp_beside(path: Path, old: os.stat_result | None) -> tuple[int, str]:
    """A new temporary file ``.NAME.PID.RANDOM.tmp`` beside the regular file ``path`` (``(fd, name)``), with
    ``path``'s permissions; first remove such files of ``path`` that writers killed before their rename left."""
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp")
    # mkstemp creates 0600: keep the replaced file's permissions, else give the usual ones
    os.chmod(tmp, stat.S_IMODE(old.st_mode) if old is not None else 0o666 & ~_umask())
    return fd, tmp


@contextlib.contextmanager
def _replacing(path: Path, mode: str, encoding: str | None, old: os.stat_result | None) -> Iterator[IO]:
    """Write a temporary file (:func:`_temp_beside`) and rename it over the regular file ``path``."""
    fd, tmp = _temp_beside(path, old)
    binary = "b" in mode
    try:
        with os.fdopen(fd, mode, encoding=None if binary else encoding) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.filename is None:  # a failed write() names no file: name it
            raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from None
        raise


#: the suffix of the marker :func:`atomic_outputs` keeps beside its last output while it renames the set into place
INCOMPLETE = ".incomplete"


def _regular_target(path: str | Path) -> Path | None:
    """The regular file (or new name) ``path`` names, a symbolic link followed; None for what cannot be renamed
    over (``-``, ``/dev/stdout`` and other descriptors, devices, pipes).  A directory is a :class:`DataError`."""
    if is_stdio(path) or _open_descriptor(path) is not None:
        return None
    p = Path(path)
    st = _stat(p)
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise DataError(f"{path}: is a directory, expected a file name")
    if st is not None and not stat.S_ISREG(st.st_mode):
        return None
    return Path(os.path.realpath(p)) if p.is_symlink() else p


@contextlib.contextmanager
def atomic_outputs(paths: Sequence[str | Path]) -> Iterator[dict[str, Path]]:
    """Write the several output files of one command as a unit: after it, all come from this run, or none does.

    Yields ``{str(path): temporary file}``; write each output to its temporary file, with any writer (``write_lines``,
    ``atomic_open``, ...).  When the block ends without an exception, every temporary file is fsynced and renamed over
    its target (a link's target, as :func:`atomic_open`), in the order of ``paths``; then the outputs that cannot be
    renamed over (``-``, a device, a pipe) are written from their temporary copies.  On an exception every temporary
    file is removed and no target is touched.

    Only a ``kill -9`` or a power cut between the first and the last rename (microseconds) can leave a mixed set;
    with two or more files to rename, a marker ``LAST.incomplete`` (:data:`INCOMPLETE`) beside the last of them,
    listing every target, is written before the first rename and removed after the last, so that such a set is
    recognisable (running the command again replaces the files and the marker).
    """
    keys = [str(p) for p in paths]
    if len(set(keys)) != len(keys):
        raise DataError(f"the same output file is named twice: {', '.join(keys)}")
    temps: dict[str, Path] = {}
    regular: list[tuple[Path, Path]] = []  # (temporary, target)
    special: list[tuple[Path, str]] = []
    try:
        for key in keys:
            target = _regular_target(key)
            if target is None:
                fd, tmp = tempfile.mkstemp(prefix="scanmt-output.", suffix=".tmp")
                special.append((Path(tmp), key))
            else:
                fd, tmp = _temp_beside(target, _stat(target))
                regular.append((Path(tmp), target))
            os.close(fd)
            temps[key] = Path(tmp)
        yield dict(temps)
        _rename_all(regular)
        for tmp, key in special:
            with open(tmp, "rb") as src, atomic_open(key, "wb") as dst:
                shutil.copyfileobj(src, dst)
    except OSError as exc:  # a full disk names the output, not its temporary file beside it
        raise at_destination(exc, dict(regular)) from None
    finally:
        for tmp in temps.values():
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()


def _rename_all(pairs: list[tuple[Path, Path]]) -> None:
    """fsync every temporary file, then rename each over its target in order, within an :data:`INCOMPLETE`
    marker beside the last target when there are several."""
    for tmp, _ in pairs:
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
    marker = pairs[-1][1].with_name(pairs[-1][1].name + INCOMPLETE) if len(pairs) > 1 else None
    if marker is not None:
        listed = "\n".join(str(target) for _, target in pairs)
        write_lines(marker, [f"scanmt was interrupted while it replaced these files: they may come from two runs "
                             f"(run the command again)", listed])
    for tmp, target in pairs:
        os.replace(tmp, target)
    if marker is not None:
        marker.unlink()


def os_error_line(exc: OSError) -> str:
    """An ``OSError`` as one line of a message: what went wrong and the file (``No space left on device: FILE``)."""
    return f"{exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else "")


def at_destination(exc: OSError, places: Mapping[Path, Path]) -> OSError:
    """``exc`` naming destinations instead of temporary files: a file name that is a temporary path of ``places``
    (temporary -> destination), or lies under one (a temporary folder), becomes the destination, or the same
    file under it; ``exc`` itself when it names none (a full disk then reads ``No space left on device: OUT/spm.model``,
    not ``OUT/../.data.tmp.123.x/spm.model``)."""

    def named(name: object) -> object:
        if not isinstance(name, str):
            return name
        for temp, dest in places.items():
            if Path(name).is_relative_to(temp):
                return str(dest / Path(name).relative_to(temp))
        return name

    filename, filename2 = named(exc.filename), named(exc.filename2)
    if (filename, filename2) == (exc.filename, exc.filename2):
        return exc
    return OSError(exc.errno, exc.strerror or str(exc), filename, None, filename2)


def write_error(path: str | Path, exc: BaseException, writer: str) -> OSError:
    """The one-line :class:`OSError` naming ``path`` for a ``writer`` (torch.save, sentencepiece) that failed
    with a library error instead of an ``OSError`` (its first line kept), e.g. on a full disk."""
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return OSError(errno.EIO, f"{writer} could not write the file ({first[:200]}); is the disk full?", str(path))


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


def _decode(raw: bytes, path: str | Path, what: str) -> str:
    """``raw`` as UTF-8 text (a byte-order mark dropped); invalid UTF-8 is a :class:`DataError` naming
    the file and line."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line_no = raw[: exc.start].count(b"\n") + 1
        raise DataError(
            f"{path}:{line_no}: {what} is not valid UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})"
        ) from None
    return text[1:] if text.startswith("\ufeff") else text


def read_text(path: str | Path, what: str = "file") -> str:
    """The whole UTF-8 text of ``path`` (a config, grid, penalties or JSON file); invalid UTF-8 is a
    :class:`DataError` naming the file and line (never a ``UnicodeDecodeError``)."""
    return _decode(Path(path).read_bytes(), path, what)


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
    text = _decode(raw, path, what)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the final newline
    lines = [ln[:-1] if ln.endswith("\r") else ln for ln in lines]
    _check_carriage_returns(lines, path, what, newlines="\n" in text)
    if not allow_empty:
        for i, ln in enumerate(lines):
            if not _VISIBLE.search(ln):
                if i == len(lines) - 1 and not ln.strip():
                    raise DataError(f"{path}:{i + 1}: {what} ends with a blank line (an extra trailing newline?)")
                if not ln.strip():
                    raise DataError(f"{path}:{i + 1}: {what} has an empty line")
                raise DataError(f"{path}:{i + 1}: {what} has a line with no visible character (only control "
                                f"characters or invisible spaces such as U+200B: {ln[:20]!r})")
    return lines


#: a character that shows: not white space, not a control character (C0, C1), not a zero-width or
#: direction mark (U+200B-U+200F, U+2028-U+202F, U+2060-U+206F), not a byte order mark
_VISIBLE = re.compile(r"[^\s\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202f\u2060-\u206f\ufeff]")


def _check_carriage_returns(lines: list[str], path: object, what: str, *, newlines: bool) -> None:
    """A :class:`DataError` for a carriage return (``\\r``) not followed by a newline: a file with old-Mac
    line endings (CR only) would be read as one long line, a lone CR inside a line hides text on a terminal.
    (``\\r\\n`` Windows line endings are fine.)"""
    for i, ln in enumerate(lines):
        if "\r" not in ln:
            continue
        if not newlines:
            raise DataError(f"{path}: {what} has carriage-return-only line endings (old Mac style: {ln.count(chr(13))} "
                            "\\r and no newline), which would make it one line; convert it, e.g. "
                            f"tr '\\r' '\\n' < {path}")
        raise DataError(f"{path}:{i + 1}: {what} has a carriage return (\\r) inside the line; lines end with \\n "
                        "(or \\r\\n): remove it or convert the line endings")


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
        obj = json.loads(read_text(path, "JSON file"))
    except json.JSONDecodeError as exc:
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


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether ``a`` and ``b`` name one file: :func:`os.path.samefile` where both exist (hard links, links), else
    the same path once links and ``..`` are resolved."""
    if is_stdio(a) or is_stdio(b):
        return is_stdio(a) and is_stdio(b)
    with contextlib.suppress(OSError):
        if os.path.exists(a) and os.path.exists(b):
            return os.path.samefile(a, b)
    return os.path.realpath(a) == os.path.realpath(b)


def check_output_file(path: str | Path, option: str) -> None:
    """Raise :class:`DataError` naming ``option``, before any work, when ``path`` cannot be written as an output
    file: a folder, a name below a file, or in a folder this user cannot write (a missing folder is made later,
    so its nearest existing one is checked).  ``-``, a device and a pipe are fine."""
    if is_stdio(path) or _open_descriptor(path) is not None:
        return
    p = Path(path)
    st = _stat(p)
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise DataError(f"{option} {path}: is a folder; give the name of a file to write")
    if st is not None and not stat.S_ISREG(st.st_mode):
        return
    folder = Path(os.path.realpath(p)).parent
    while not os.path.lexists(folder):
        folder = folder.parent
    if not folder.is_dir():
        raise DataError(f"{option} {path}: {folder} is a file, not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise DataError(f"{option} {path}: cannot write in the folder {folder} (permission denied)")


def check_outputs(outputs: dict[str, str | Path | None], inputs: dict[str, str | Path | None]) -> None:
    """Check a command's output files before any work (options as keys, None for one not given): each can be
    written (:func:`check_output_file`), and none is the same file as another output or as an input (writing it
    would replace the input, or mix two outputs).  ``-`` is not compared (standard input and output), nor are
    devices and pipes."""
    given = [(option, path) for option, path in outputs.items() if path is not None]
    for option, path in given:
        check_output_file(path, option)
    for i, (option, path) in enumerate(given):
        if _regular_target(path) is None:
            continue
        for other, other_path in given[:i]:
            if same_file(path, other_path):
                raise DataError(f"{other} {other_path} and {option} {path} name the same file: give each output "
                                "its own file")
        for other, other_path in inputs.items():
            if other_path is not None and same_file(path, other_path):
                raise DataError(f"{option} {path} is the {other} file: writing it would replace the input; give "
                                "another output file")


class ProgressBarSafeHandler(logging.StreamHandler):
    """Writes log records with ``tqdm.write``, so that a progress bar on the same terminal is cleared
    first and redrawn after, instead of having the record glued onto its line."""

    def emit(self, record: logging.LogRecord) -> None:
        from tqdm import tqdm

        try:
            tqdm.write(self.format(record), file=self.stream)
        except Exception:  # noqa: BLE001 - logging must not raise
            self.handleError(record)


def close_progress_bars() -> None:
    """Close every open progress bar (each clears its line, or leaves its last state on a line of its own), so
    that an error printed next starts its own line instead of following a bar that an exception left open."""
    from tqdm import tqdm

    for bar in list(getattr(tqdm, "_instances", ())):
        bar.close()


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
