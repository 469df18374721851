"""The run folder of ``scanmt train`` and ``scanmt fertility --train-predictor``: what may be written there.

A run writes ``last.pt``, ``best.pt``, ``metrics.csv`` (or ``tensorboard/``) and, for NMT,
``config.yaml`` into its folder; other files there (an experiment's ``spec.json``, logs,
translations) are never touched.  A new run refuses a folder that already holds a run
(``last.pt``: resume it or pick another folder) and one holding a ``config.yaml``,
``metrics.csv`` or ``best.pt`` that a run did not write, so that ``--out .`` cannot
overwrite a hand-written config.  A run killed before its first checkpoint is ours
(its ``config.yaml`` and ``metrics.csv`` start with the lines scanmt writes), so it can
simply be started again.

A run holds the folder's lock (``.lock``, :func:`scanmt.processes.lock_folder`) from before it writes
anything until it ends, so that a second run into the same folder fails naming the first (its PID
and command line) instead of interleaving its checkpoints and ``metrics.csv`` with it.
"""

from __future__ import annotations

from pathlib import Path

from scanmt.config import CONFIG_HEADER
from scanmt.errors import ConfigError, DataError, ScanmtError
from scanmt.io import LOCK_FILE, check_output_dir
from scanmt.processes import FileLock, check_unlocked, lock_folder

#: the first line of a ``metrics.csv`` written by scanmt
METRICS_HEADER = "step,name,value"
#: files a new run writes that must not be someone else's
RUN_FILES: tuple[str, ...] = ("config.yaml", "metrics.csv", "best.pt")


def claim_run_dir(out: str | Path, *, resume: bool, lock: bool = True) -> FileLock:
    """Check that ``out`` may receive a new run (or, with ``resume``, holds one to continue) and lock it for
    this run (unless ``lock`` is False: the other processes of a distributed run); the lock is held until
    the returned handle is released (a ``with`` block).  Raises :class:`~scanmt.errors.BusyError` naming the process that is
    writing into ``out``.  A folder that fails the check gets no lock file."""
    # a file is an error; the files of a folder are checked one by one below
    folder = check_output_dir(out, ours=lambda d: True, holds="")
    try:
        check_run_dir(folder, resume=resume)
    except ScanmtError:
        check_unlocked(folder, what="--out")  # a live run there: name it, not the files it wrote
        raise
    if not lock:
        return FileLock(folder / LOCK_FILE, None)
    held = lock_folder(folder, what="--out")
    try:
        check_run_dir(folder, resume=resume)  # again: a run may have started between the check and the lock
    except BaseException:
        held.release()
        raise
    return held


def check_run_dir(out: Path, *, resume: bool) -> None:
    """Raise unless the folder ``out`` may receive a new run (or, with ``resume``, holds one to continue)."""
    last = out / "last.pt"
    if resume:
        if not last.exists():
            raise ConfigError(f"--resume: {last} not found")
        return
    if last.exists():
        raise ConfigError(f"{out} already holds a run (last.pt); pass --resume to continue it or pick another --out")
    ours = _first_line(out / "config.yaml") == CONFIG_HEADER or _first_line(out / "metrics.csv") == METRICS_HEADER
    for name in RUN_FILES:
        path = out / name
        if path.exists() and not (ours and (name == "best.pt" or _first_line(path) in (CONFIG_HEADER, METRICS_HEADER))):
            raise DataError(
                f"--out {out}: holds a {name} that no scanmt run wrote (no last.pt); refusing to overwrite it "
                "(give a new or empty folder)"
            )


def _first_line(path: Path) -> str | None:
    """The first line of a text file, or None (missing, binary, unreadable)."""
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.readline().rstrip("\r\n")
    except (OSError, UnicodeDecodeError):
        return None
