"""Replacing a folder as a whole: a reader finds the old folder or the new one, never a mix, even after ``kill -9``.

:func:`replacing_folder` yields a staging copy of a folder, made beside it of hard links to its files (nothing is
copied), in which the caller makes its changes by replacing files (``atomic_open``), never by writing into them:
a hard-linked file is shared with the old folder.  When the block ends without an exception the staging folder's
directories are fsynced and it takes the folder's place in one step, Linux's ``renameat2(RENAME_EXCHANGE)``, which
swaps two names atomically; then the old folder is removed.  Where the exchange is not supported (another system,
a filesystem without it) the folder is renamed aside and the staging folder into its place: a crash between these
two renames leaves no folder, and the next :func:`replacing_folder` of it finishes the swap.  An exception in the
block removes the staging folder and leaves the folder as it was.

The names beside ``FOLDER`` (in its parent), ``PID.RANDOM`` the writer's: ``.FOLDER.staging.PID.RANDOM`` while it
is written, ``.FOLDER.ready.PID.RANDOM`` once complete, and ``.FOLDER.old.PID.RANDOM`` the old folder, to remove
(after the exchange, or the fallback's first rename).  A writer holds an exclusive ``flock`` on the parent folder
(a second one waits for it), so that the next one knows that any such folder was left by a writer that was killed:
it removes them, after renaming a complete ``ready`` folder into place if the folder itself is missing.  A reader
takes no lock: it may read a file of the old folder and then one of the new.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import glob
import logging
import os
import secrets
import shutil
import stat
import sys
import time
from pathlib import Path
from typing import Callable, Iterator

from scanmt.errors import BusyError, DataError

log = logging.getLogger(__name__)

STAGING, READY, OLD = "staging", "ready", "old"
#: ``renameat2`` flag and the "current folder" descriptor (linux/fs.h, fcntl.h)
_RENAME_EXCHANGE, _AT_FDCWD = 2, -100


def _prefix(folder: Path, kind: str) -> str:
    return f".{folder.name}.{kind}."


def _beside(folder: Path, kind: str) -> list[Path]:
    """The folders of ``kind`` (STAGING, READY, OLD) beside ``folder``."""
    return sorted(folder.parent.glob(glob.escape(_prefix(folder, kind)) + "*"))


#: how long :func:`replacing_folder` waits for another writer in the same parent folder (a pack takes seconds)
WAIT_S = 600.0


@contextlib.contextmanager
def _parent_lock(folder: Path, what: str, wait_s: float) -> Iterator[None]:
    """An exclusive ``flock`` on ``folder``'s parent, waited for up to ``wait_s`` seconds (the kernel releases it
    when its process dies, also by ``kill -9``)."""
    import fcntl

    fd = os.open(folder.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise BusyError(f"{what} {folder}: another process has been replacing a folder in "
                                    f"{folder.parent} for {wait_s:.0f} s (it holds a lock on that folder); wait for "
                                    "it to end") from None
                time.sleep(0.2)
        yield
    finally:
        os.close(fd)


def recover(folder: Path) -> None:
    """Finish or undo what a writer killed while replacing ``folder`` left beside it (hold the parent's lock):
    a missing ``folder`` gets its complete ``ready`` replacement, and every other staging, ready or old folder
    is removed."""
    ready = _beside(folder, READY)
    if not os.path.lexists(folder) and ready:
        if len(ready) > 1:
            raise DataError(f"{folder}: missing, and several complete replacements of it lie beside it "
                            f"({', '.join(p.name for p in ready)}): rename the one to keep to {folder.name}")
        os.rename(ready[0], folder)
        log.warning("%s: put its new version in place, which a process killed while it swapped it in left", folder)
    for kind in (STAGING, READY, OLD):
        for left in _beside(folder, kind):
            shutil.rmtree(left)
            log.warning("removed %s, left behind by an interrupted replacement of %s", left, folder)


def _clone(src: Path, dst: Path) -> None:
    """Fill the empty folder ``dst`` with hard links to the files of ``src`` (a copy where a link cannot be
    made), its folders and symbolic links remade."""
    for root, dirs, files in os.walk(src):
        here, there = Path(root), dst / Path(root).relative_to(src)
        for name in dirs + files:
            p, q = here / name, there / name
            st = p.lstat()
            if stat.S_ISLNK(st.st_mode):
                os.symlink(os.readlink(p), q)
            elif stat.S_ISDIR(st.st_mode):
                q.mkdir()
                os.chmod(q, stat.S_IMODE(st.st_mode))
            else:
                try:
                    os.link(p, q)
                except OSError:
                    if not stat.S_ISREG(st.st_mode):
                        raise
                    shutil.copy2(p, q)


def _fsync_dir(d: Path) -> None:
    """fsync the folder ``d`` (its entries: the files are fsynced by their writers)."""
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_tree(root: Path) -> None:
    """:func:`_fsync_dir` of ``root`` and of every folder below it."""
    for d in [root, *(Path(r) / n for r, dirs, _ in os.walk(root) for n in dirs)]:
        if not d.is_symlink():
            _fsync_dir(d)


def exchange(a: Path, b: Path) -> bool:
    """Swap the names ``a`` and ``b`` in one atomic step (Linux ``renameat2(RENAME_EXCHANGE)``); False where the
    system or the filesystem cannot."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)  # glibc >= 2.28
    if renameat2 is None:
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _put_in_place(ready: Path, folder: Path) -> Path | None:
    """Make the complete folder ``ready`` the folder ``folder``; returns the old folder, renamed to an ``old``
    name for removal (None: there was none)."""
    if not os.path.lexists(folder):
        os.rename(ready, folder)
        return None
    old = ready.with_name(_prefix(folder, OLD) + ready.name[len(_prefix(folder, READY)):])
    if exchange(ready, folder):
        os.rename(ready, old)  # the old folder, which a next writer must never put back
        return old
    os.rename(folder, old)
    try:
        os.rename(ready, folder)
    except BaseException:
        os.rename(old, folder)
        raise
    return old


@contextlib.contextmanager
def replacing_folder(folder: Path, *, what: str = "folder", check: Callable[[Path], None] | None = None,
                     wait_s: float = WAIT_S) -> Iterator[Path]:
    """Yield a staging copy of ``folder`` (empty when it is missing; made if its parent is) to change by replacing
    files; on success it replaces ``folder`` as a whole (see the module's docstring).  ``check(folder)`` runs
    first, under the lock (refusing a folder not to replace); ``what`` names the folder in errors (an option).
    Another writer in the same parent folder is waited for, up to ``wait_s`` seconds.

    Raises:
        BusyError: another process has been replacing a folder beside it for ``wait_s`` seconds.
        DataError: ``folder`` is not a folder.
    """
    folder = Path(os.path.realpath(folder))  # a link to the folder stays, its target is replaced
    folder.parent.mkdir(parents=True, exist_ok=True)
    with _parent_lock(folder, what, wait_s):
        recover(folder)
        if check is not None:
            check(folder)
        if os.path.lexists(folder) and not folder.is_dir():
            raise DataError(f"{what} {folder}: not a folder")
        staging = folder.parent / f"{_prefix(folder, STAGING)}{os.getpid()}.{secrets.token_hex(4)}"
        staging.mkdir()  # the umask's permissions, or the folder's
        try:
            if folder.is_dir():
                os.chmod(staging, stat.S_IMODE(folder.stat().st_mode))
                _clone(folder, staging)
            yield staging
            _fsync_tree(staging)
            ready = staging.with_name(_prefix(folder, READY) + staging.name[len(_prefix(folder, STAGING)):])
            os.rename(staging, ready)
            staging = ready
            old = _put_in_place(ready, folder)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        _fsync_dir(folder.parent)
        if old is not None:
            shutil.rmtree(old)
