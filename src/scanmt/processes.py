"""Processes: folder locks naming their holder, children that die with their parent, SIGTERM as an interrupt.

- :func:`lock_folder` takes an exclusive ``flock`` on ``FOLDER/.lock`` and writes the holder's PID and
  command line into it, so that a second command writing into the same folder fails naming the first.
  The kernel releases a ``flock`` when its process dies (also under ``kill -9``), so a lock never
  outlives its run.  A process may take the lock of a folder it holds already (the experiment worker
  holds its run folder's lock, and the training it runs takes it again): the lock is held until the
  last of its handles is released.
- :func:`die_with_parent` (Linux ``PR_SET_PDEATHSIG``) makes a child get SIGTERM when its parent dies;
  :func:`dies_with_me` is its ``preexec_fn`` form for :mod:`subprocess`.
- :func:`stopped_by_parent` also puts a child (a trainer of ``scanmt demo``, a worker of ``experiment run``)
  in a process group of its own, so that a terminal's Ctrl-C reaches the parent alone, which stops the
  child with one SIGTERM (a child that got Ctrl-C too would take that SIGTERM as a second interrupt and
  quit without saving); :func:`stopped_by_me` is its ``preexec_fn`` form.
- :func:`sigterm_interrupts` turns SIGTERM (what ``timeout``, Slurm and ``docker stop`` send) into an
  :class:`Interrupted` exception, a ``KeyboardInterrupt``, so that ``finally`` blocks and ``with``
  statements clean up as they do after Ctrl-C.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shlex
import signal
import sys
import threading
import time
import weakref
from pathlib import Path
from typing import IO, Any, Callable, Iterator

from scanmt.errors import BusyError
from scanmt.io import LOCK_FILE


class Interrupted(KeyboardInterrupt):
    """An interrupt by a signal other than SIGINT (``signum``: SIGTERM); caught like Ctrl-C."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def exit_status(exc: KeyboardInterrupt) -> int:
    """The shell's exit status of a process stopped by ``exc``: 128 + the signal (130 for Ctrl-C, 143 for SIGTERM)."""
    return 128 + getattr(exc, "signum", signal.SIGINT)


def signal_name(signum: int) -> str:
    """``Ctrl-C`` for SIGINT, else the signal's name (``SIGTERM``)."""
    return "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name


def raise_interrupted(signum: int, frame: Any) -> None:
    """A signal handler that raises :class:`Interrupted`."""
    raise Interrupted(signum)


def second_sigterm(parent: int) -> Callable[[int, Any], None]:
    """The handler of a SIGTERM that follows a first one: it raises :class:`Interrupted` (quit at once), unless
    this process's parent ``parent`` has died since.  A parent's death sends its children one SIGTERM per
    ``PR_SET_PDEATHSIG`` (:func:`die_with_parent`) for every thread of the parent that they are handed to as
    it exits, so several can arrive within milliseconds; those repeat the first and are ignored (the
    process goes on saving)."""

    def handler(signum: int, frame: Any) -> None:
        if os.getppid() != parent:
            logging.getLogger(__name__).debug("another SIGTERM from the parent's death: ignored")
            return
        raise_interrupted(signum, frame)

    return handler


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """While inside, SIGTERM raises :class:`Interrupted` (in the main thread; elsewhere nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGTERM, raise_interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


# --------------------------------------------------------------------------- children


@functools.lru_cache(maxsize=1)
def _prctl() -> Callable[..., int] | None:
    """libc's ``prctl`` (None where there is none), looked up once, before any fork."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def die_with_parent(parent: int | None = None) -> None:
    """Linux: get SIGTERM when the parent process dies (``PR_SET_PDEATHSIG``); ``parent`` is its PID, known
    before this process started: if the parent is gone already (it died before ``prctl``), exit at once."""
    prctl = _prctl()
    if prctl is None:
        return
    prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    if parent is not None and os.getppid() != parent:
        os._exit(1)


def dies_with_me() -> Callable[[], None]:
    """A ``preexec_fn`` for :mod:`subprocess` that makes the child get SIGTERM when this process dies."""
    _prctl()  # the lookup happens here, not in the forked child
    return functools.partial(die_with_parent, os.getpid())


def stopped_by_parent(parent: int | None = None) -> None:
    """Make this child process one that only its parent stops: in a process group of its own (a terminal's
    Ctrl-C, sent to its foreground group, no longer reaches it), and getting SIGTERM when the parent dies
    (:func:`die_with_parent`; ``parent``: its PID, known before this process started)."""
    os.setpgrp()
    die_with_parent(parent)


def stopped_by_me() -> Callable[[], None]:
    """A ``preexec_fn`` for :mod:`subprocess` that makes the child one that only this process stops
    (:func:`stopped_by_parent`): set up before the child runs anything, so that no Ctrl-C reaches it."""
    _prctl()  # the lookup happens here, not in the forked child
    return functools.partial(stopped_by_parent, os.getpid())


def command_line() -> str:
    """This process's command line (``/proc/self/cmdline``, else ``sys.argv``), quoted for a shell."""
    try:
        argv = Path("/proc/self/cmdline").read_bytes().decode("utf-8", "replace").split("\0")[:-1]
    except OSError:
        argv = [sys.executable, *sys.argv]
    return " ".join(shlex.quote(a) for a in argv)


# --------------------------------------------------------------------------- locks


class _Held:
    """An open lock file with its ``flock`` taken; closing it (when the last handle goes) releases the lock."""

    def __init__(self, fh: IO[str]) -> None:
        self.fh = fh

    def __del__(self) -> None:
        self.fh.close()


#: the locks this process holds, by the lock file's real path
_HELD: "weakref.WeakValueDictionary[str, _Held]" = weakref.WeakValueDictionary()
_HELD_GUARD = threading.Lock()


class FileLock:
    """A handle on an exclusive lock this process holds; :meth:`release` (or the end of a ``with``) lets it go.
    One made with ``held=None`` holds nothing (a process that needs no lock, e.g. the other ranks of a
    distributed run)."""

    def __init__(self, path: Path, held: _Held | None) -> None:
        self.path = path
        self._held: _Held | None = held

    def release(self) -> None:
        self._held = None

    def __enter__(self) -> "FileLock":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _try_flock(path: Path, command: str) -> _Held | None:
    """Open ``path`` and take its ``flock`` without waiting, recording the PID and ``command``; None if busy."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    fh = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - held until the lock is released
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.close()
        return None
    fh.seek(0)
    fh.truncate()
    fh.write(f"{os.getpid()}\n{command}\n")
    fh.flush()
    return _Held(fh)


def try_lock(path: str | Path, *, wait_s: float = 0.0, command: str | None = None) -> FileLock | None:
    """An exclusive lock on the file ``path`` (waiting up to ``wait_s`` seconds), or None if another process
    holds it.  The file gets this process's PID and ``command`` (default: its command line)."""
    path = Path(path)
    key = os.path.realpath(path)
    deadline = time.time() + wait_s
    while True:
        with _HELD_GUARD:
            held = _HELD.get(key) or _try_flock(path, command or command_line())
            if held is not None:
                _HELD[key] = held
                return FileLock(path, held)
        if time.time() >= deadline:
            return None
        time.sleep(0.5)


def holds_lock(folder: str | Path) -> bool:
    """Whether this process holds ``FOLDER/.lock`` (:func:`lock_folder`): it claimed the folder before locking it."""
    with _HELD_GUARD:
        return _HELD.get(os.path.realpath(Path(folder) / LOCK_FILE)) is not None


def lock_holder(path: str | Path) -> str:
    """Who holds the lock file ``path``, from what it records: ``process PID (COMMAND)``."""
    pid, command = _recorded(path)
    if not pid.isdigit():
        return "another process (it has not written its PID yet)"
    return f"process {pid}" + (f" ({command})" if command else "")


def _recorded(path: str | Path) -> tuple[str, str]:
    """What a lock file records: its holder's PID and command line ("" where it has none, or is unreadable)."""
    try:
        pid, _, command = Path(path).read_text(encoding="utf-8").partition("\n")
    except (OSError, UnicodeDecodeError):
        pid, command = "", ""
    return pid.strip(), command.strip()


def lock_held(path: str | Path) -> bool:
    """Whether some process holds the ``flock`` of the lock file ``path``, seen without taking it: a lock taken
    only to look would make a process that tries to take it at that moment fail as busy.

    On Linux, from ``/proc/locks`` (a held ``FLOCK`` on the file's inode; its device, or, where an overlay file
    system reports another device, the holder's PID the file records, must match too).  Elsewhere, from
    whether the process whose PID the file records is alive (a lock never outlives its process, but a PID may
    be reused).
    """
    path = Path(path)
    try:
        st = path.stat()
    except OSError:
        return False
    pid = _recorded(path)[0]
    try:
        table = Path("/proc/locks").read_text(encoding="ascii", errors="replace").splitlines()
    except OSError:
        table = None
    if table is None:
        if not pid.isdigit():
            return False
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass  # alive, and another user's
        return True
    device = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}"
    for line in table:
        fields = line.split()
        if len(fields) < 6 or fields[1] != "FLOCK":  # "N: -> FLOCK ..." waits for the lock, it does not hold it
            continue
        holder, (dev_major, dev_minor, inode) = fields[4], (fields[5].split(":") + ["", "", ""])[:3]
        if inode == str(st.st_ino) and (f"{dev_major}:{dev_minor}" == device or holder == pid):
            return True
    return False


def lock_folder(folder: str | Path, *, what: str = "--out", command: str | None = None) -> FileLock:
    """Lock ``FOLDER/.lock`` for this process (made if missing); raises :class:`BusyError` naming the process
    that holds it.  ``what`` names the folder in the message (an option, or "the run folder")."""
    path = Path(folder) / LOCK_FILE
    lock = try_lock(path, command=command)
    if lock is None:
        raise BusyError(f"{what} {folder}: {lock_holder(path)} is writing into this folder; wait for it to end "
                        f"or stop it (lock {path})")
    return lock


def check_unlocked(folder: str | Path, *, what: str = "--out") -> None:
    """Raise :class:`BusyError` if another process holds ``FOLDER/.lock`` (nothing is made when it is missing)."""
    if (Path(folder) / LOCK_FILE).exists():
        lock_folder(folder, what=what).release()
