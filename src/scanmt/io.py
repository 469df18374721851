"""Small file helpers used by every layer: atomic writes and checked text reading.

``read_lines`` turns every way a text file can be wrong (missing, not UTF-8,
empty line, trailing blank line) into a :class:`~scanmt.errors.DataError`
naming the file and the 1-based line number.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import tempfile
from pathlib import Path
from typing import IO, Iterator

from scanmt.errors import DataError


@contextlib.contextmanager
def atomic_open(path: str | Path, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO]:
    """Open a temporary file next to ``path``; rename it over ``path`` on success.

    On any exception the temporary file is removed and ``path`` is untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp creates 0600; give the file normal permissions
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
    """Read a UTF-8 (optionally ``.gz``) text file as a list of lines without newlines.

    Args:
        path: the file.
        allow_empty: when False, an empty (or whitespace-only) line is an error.
        what: a word for the error messages ("source file", "hypothesis file", ...).

    Raises:
        DataError: missing file, invalid UTF-8 (with the line number), an empty
            line, or a trailing blank line (an extra newline at the end).
    """
    path = Path(path)
    raw = _open_text_bytes(path)
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
