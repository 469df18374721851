"""The run folder of ``scanmt train`` and ``scanmt fertility --train-predictor``: what may be written there.

A run writes ``last.pt``, ``best.pt``, ``metrics.csv`` (or ``tensorboard/``), ``checkpoints/`` (with
``train.keep_checkpoints``) and, for NMT, ``config.yaml`` into its folder; other files there (an experiment's
``spec.json``, logs, translations) are never touched.

The folder must be new, empty, or the command's own earlier output (:func:`claim_run_dir`): a run's folder
(``last.pt``, or the ``config.yaml`` / ``metrics.csv`` / ``best.pt`` a run writes, each checked below), a grid
run's folder (its ``spec.json``, which the experiment runner writes before it trains there, names it as the
train step's ``--out``), or a folder this process has locked already (a demo's trainer locks its folder before
it opens its log there).  Any other folder with files in it (a home, ``/``, a link to a folder of someone
else's) is refused before anything is written.  A new run also refuses a folder that already holds a run
(``last.pt``: resume it or pick another folder) and one holding a ``config.yaml``, ``metrics.csv`` or
``best.pt`` that a run did not write, so that ``--out .`` cannot overwrite a hand-written config.  A run
killed before its first checkpoint is ours (its ``config.yaml`` and ``metrics.csv`` start with the lines
scanmt writes), so it can simply be started again.

A run holds the folder's lock (``.lock``, :func:`scanmt.processes.lock_folder`) from before it writes
anything until it ends, so that a second run into the same folder fails naming the first (its PID
and command line) instead of interleaving its checkpoints and ``metrics.csv`` with it.
"""

from __future__ import annotations

import json
from pathlib import Path

from scanmt.config import CONFIG_HEADER
from scanmt.errors import ConfigError, DataError, ScanmtError
from scanmt.io import LOCK_FILE, check_output_dir, same_file
from scanmt.processes import FileLock, check_unlocked, holds_lock, lock_folder

#: the first line of a ``metrics.csv`` written by scanmt
METRICS_HEADER = "step,name,value"
#: files a new run writes that must not be someone else's
RUN_FILES: tuple[str, ...] = ("config.yaml", "metrics.csv", "best.pt")
#: the file of a grid run's folder that the experiment runner writes first (:class:`scanmt.experiments.spec.RunSpec`)
GRID_SPEC = "spec.json"
#: what a folder a run may write into holds (for the message refusing another one)
RUN_DIR_HOLDS = (f"a scanmt training run (last.pt, or the {', '.join(RUN_FILES)} a run writes) or a grid run "
                 f"({GRID_SPEC} naming it)")


def claim_run_dir(out: str | Path, *, resume: bool, lock: bool = True) -> FileLock:
    """Check that ``out`` may receive a new run (or, with ``resume``, holds one to continue) and lock it for
    this run (unless ``lock`` is False: the other processes of a distributed run); the lock is held until
    the returned handle is released (a ``with`` block).  Raises :class:`~scanmt.errors.DataError` for a
    folder that is not new, empty or a run's (the module docstring), and :class:`~scanmt.errors.BusyError`
    naming the process that is writing into ``out``.  A folder that fails the check gets no lock file."""
    folder = check_output_dir(out, ours=may_hold_run, holds=RUN_DIR_HOLDS)  # a link is followed to its folder
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


def may_hold_run(folder: Path) -> bool:
    """Whether the folder ``folder`` (not empty) may be a run's: it holds a run's files (:func:`check_run_dir`
    checks that a run wrote them), is a grid run's folder (:func:`is_grid_run`), or this process has locked it."""
    return (any((folder / name).exists() for name in ("last.pt", *RUN_FILES)) or is_grid_run(folder)
            or holds_lock(folder))


def is_grid_run(folder: Path) -> bool:
    """Whether ``folder`` is a run folder the experiment runner made: its ``spec.json`` is a run spec whose
    train step writes into ``folder`` (a spec.json copied elsewhere does not count)."""
    try:
        spec = json.loads((folder / GRID_SPEC).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    train = spec.get("train") if isinstance(spec, dict) else None
    return (isinstance(train, dict) and train.get("command") == "train" and isinstance(train.get("out"), str)
            and same_file(train["out"], folder))


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
