"""An archive's tarballs read and unpacked so that nothing is written outside the folder they are unpacked into.

A tarball of ``scanmt experiment archive`` holds regular files under relative names, and ``shared.tar.gz`` the
symbolic links of a mirrored data folder too (``data/NAME -> DIR/NAME``, DIR the prepared data its manifest
records).  :func:`check_members` refuses anything else before a byte is extracted: an absolute name, a ``..``,
``.`` or empty part of a name, a name written twice (a link then a file of its name: extracting the file writes
through the link), a member below a link (extracting it writes into the link's target), a link other than the
allowed ones, a folder, a hard link, a device.  :func:`unpack` then extracts with tarfile's ``tar`` filter, which
refuses a member whose path leads out of the folder as well.
"""

from __future__ import annotations

import hashlib
import shutil
import tarfile
from pathlib import Path

from scanmt.errors import DataError


def _name_problem(name: str) -> str | None:
    """Why the member name ``name`` is not a plain relative path (None: it is one)."""
    if name.startswith("/"):
        return "an absolute path"
    if any(part in ("", ".", "..") for part in name.split("/")):
        return "a path with an empty, '.' or '..' part"
    return None


def check_members(tar_path: Path, members: list[tarfile.TarInfo], links: dict[str, str]) -> None:
    """Raise :class:`DataError` (naming ``tar_path`` and the member) unless every member is a regular file with a
    plain relative name or one of the symbolic links ``links`` (member name -> its only allowed target), no name
    comes twice and none lies below a link."""
    seen: dict[str, tarfile.TarInfo] = {}
    for m in members:
        problem = _name_problem(m.name)
        if problem is None and m.name in seen:
            problem = "a second member of that name (written over the first, or through it if it is a link)"
        if problem is None and m.issym() and links.get(m.name) != m.linkname:
            problem = f"a symbolic link to {m.linkname!r}, not a mirrored data file of the archived experiment"
        if problem is None and not (m.isfile() or m.issym()):
            problem = "neither a file nor a mirrored data link"
        if problem is None:
            parents = ["/".join(m.name.split("/")[:i]) for i in range(1, m.name.count("/") + 1)]
            if any(p in seen and seen[p].issym() for p in parents):
                problem = "a member below a symbolic link (it would be written into the link's target)"
        if problem is not None:
            raise DataError(f"{tar_path}: unexpected member {m.name!r}: {problem}; not an archive of scanmt's")
        seen[m.name] = m


def _open(tar_path: Path) -> tarfile.TarFile:
    if not tar_path.is_file():
        raise DataError(f"{tar_path}: missing, though manifest.json lists it (an incomplete copy of the archive?)")
    return tarfile.open(tar_path, "r:gz")


def _unreadable(tar_path: Path, exc: BaseException) -> DataError:
    return DataError(f"{tar_path}: cannot be unpacked ({type(exc).__name__}: {exc})")


def check_tarball(tar_path: Path, links: dict[str, str], digest_of: str | None = None) -> str | None:
    """Read ``tar_path`` through (:func:`check_members`), writing nothing; returns the SHA-256 (hex) of its member
    ``digest_of`` (None when it has no such member, or none is asked for).

    Raises:
        DataError: missing, unreadable, or an unexpected member.
    """
    try:
        with _open(tar_path) as tar:
            members = tar.getmembers()
            check_members(tar_path, members, links)
            member = next((m for m in members if m.name == digest_of), None)
            if member is None:
                return None
            h = hashlib.sha256()
            with tar.extractfile(member) as fh:  # type: ignore[union-attr]  # a regular file
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
            return h.hexdigest()
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise _unreadable(tar_path, exc) from None


def unpack(tar_path: Path, into: Path, links: dict[str, str]) -> None:
    """Extract ``tar_path`` into the new folder ``into`` after :func:`check_members`; on any failure ``into`` is
    removed.

    Raises:
        DataError: missing, unreadable, or an unexpected member.
    """
    into.mkdir(parents=True)
    try:
        with _open(tar_path) as tar:
            check_members(tar_path, tar.getmembers(), links)
            tar.extractall(into, filter="tar")
    except (tarfile.TarError, EOFError, OSError) as exc:
        shutil.rmtree(into, ignore_errors=True)
        raise _unreadable(tar_path, exc) from None
    except BaseException:
        shutil.rmtree(into, ignore_errors=True)
        raise
