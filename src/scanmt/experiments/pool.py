"""The pool of a grid's workers (:func:`run_pool`): up to ``workers`` worker processes
(``python -m scanmt.experiments.runner SPEC.json THREADS``, :mod:`scanmt.experiments.worker`), one per GPU when
given GPUs; runs that decode another run's model wait for it.  Given a deadline (``experiment run --deadline``),
it starts only the runs expected to end before it (:mod:`scanmt.experiments.deadline`, from the step markers of
the runs finished before) and defers the rest.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from scanmt.experiments.common import read_json
from scanmt.experiments.deadline import defer_reason
from scanmt.experiments.layout import LOG, METRICS, stage_marker
from scanmt.experiments.planning import write_spec
from scanmt.experiments.progress import RunTimes
from scanmt.experiments.spec import RunSpec
from scanmt.experiments.state import resume_note, run_status
from scanmt.experiments.worker import EXIT_BUSY
from scanmt.processes import stopped_by_me

#: the worker's module: ``python -m WORKER_MODULE SPEC.json THREADS`` (the name a grid's workers have always had)
WORKER_MODULE = "scanmt.experiments.runner"


@dataclass
class RunResult:
    spec: RunSpec
    status: str  # done | skipped | failed | busy | deferred (not started: --deadline)
    seconds: float = 0.0
    message: str = ""
    metrics: dict[str, Any] | None = None


def visible_gpus() -> list[str]:
    """GPU ids the workers may use (CUDA_VISIBLE_DEVICES, else every device torch sees)."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [g.strip() for g in env.split(",") if g.strip() and g.strip() != "-1"]
    try:
        import torch

        return [str(k) for k in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
    except Exception:  # noqa: BLE001
        return []


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


#: a progress bar's frame in a log, up to its end (tqdm's ``... [elapsed<remaining, rate, postfix]`` or
#: ``... [elapsed, rate]``): what follows it on the line was written after the bar
PROGRESS_FRAME = re.compile(r"^.*\[(\d+:)?\d\d:\d\d(<|, )[^\]]*\]")


def _tail(path: Path, n: int = 3) -> str:
    """The last ``n`` lines of the log ``path`` that say something: progress bars' frames (each ends in ``\\r``,
    a line to :meth:`str.splitlines`) left out, so that a failed run's reason is not a bar's fragment."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    lines = [ln for ln in (PROGRESS_FRAME.sub("", ln).strip() for ln in text.splitlines()) if ln]
    return " | ".join(ln.strip()[-200:] for ln in lines[-n:])


def describe(metrics: dict[str, Any] | None) -> str:
    if not metrics:
        return ""
    return (f"BLEU {metrics['bleu']:.2f}, METEOR {metrics['meteor']:.2f}, REP {metrics['rep']:.2f}, "
            f"DROP {metrics['drop']:.2f}")


def run_pool(specs: Sequence[RunSpec], *, workers: int, gpus: Sequence[str], threads: dict[str, int],
             say: Callable[[str], None], poll_s: float = 0.3, deadline: float | None = None) -> list[RunResult]:
    """Run the specs not yet DONE in up to ``workers`` worker processes.

    Runs that decode another system's model wait until that model is trained.
    ``threads`` gives each run's torch thread count (by run key).  With ``gpus``,
    worker slot ``k`` sees only GPU ``gpus[k % len(gpus)]``.  With a ``deadline`` (seconds since the
    epoch), a run expected to end after it is not started but ``deferred``
    (:mod:`scanmt.experiments.deadline`).
    """
    pool = _Pool(specs, workers=workers, gpus=gpus, threads=threads, say=say, deadline=deadline)
    try:
        while pool.pending or pool.running:
            pool.reap()
            launched = pool.launch_ready()
            if not pool.running and pool.pending and not launched:
                pool.fail_stranded()
            if pool.running:
                time.sleep(poll_s)
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM: each worker stops (training saves last.pt); say where they stand
        pool.stop_all()
        pool.tell_interrupted()
        raise
    except BaseException:
        pool.stop_all()
        raise
    return [pool.results[s.key] for s in specs if s.key in pool.results]


@dataclass
class _Worker:
    """One running worker process: its run, when it started and its open log file."""

    proc: subprocess.Popen
    spec: RunSpec
    started: float
    log: Any


class _Pool:
    """The state of :func:`run_pool`: runs waiting, worker slots, workers running, results."""

    def __init__(self, specs: Sequence[RunSpec], *, workers: int, gpus: Sequence[str], threads: dict[str, int],
                 say: Callable[[str], None], deadline: float | None = None) -> None:
        self.specs, self.gpus, self.threads, self.say = specs, gpus, threads, say
        self.deadline = deadline
        #: the step times of the finished runs (what a --deadline estimates from)
        self.history = RunTimes()
        if deadline is not None:
            self.history.add_others(specs)
        self.results: dict[str, RunResult] = {}
        self.order = {s.key: k for k, s in enumerate(specs, 1)}
        self.running: dict[int, _Worker] = {}
        self.free = list(range(max(1, workers)))
        self.pending: list[RunSpec] = []
        for spec in specs:
            if run_status(spec) == "done":
                self.remember(spec)
                m = read_json(spec.dir / METRICS)
                self.results[spec.key] = RunResult(spec, "skipped", metrics=m, message="done before")
                self.tell(spec, "skip ", f"done before ({describe(m)})", sep=": ")
            else:
                self.pending.append(spec)

    def tell(self, spec: RunSpec, what: str, text: str, sep: str = " ") -> None:
        """``[k/N] WHAT KEY TEXT``: one line of the pool's progress."""
        self.say(f"[{self.order[spec.key]}/{len(self.specs)}] {what} {spec.key}{sep}{text}")

    def remember(self, spec: RunSpec) -> None:
        """Add a finished run's step times to the history a deadline estimates from."""
        if self.deadline is not None:
            self.history.add(spec)

    def ready(self, spec: RunSpec) -> bool | str | None:
        """Whether ``spec`` can start now (None: never, the run that trains its model failed; "deferred": the
        run that trains its model was deferred)."""
        if spec.model_from is None:
            return True
        if stage_marker(Path(spec.model_from), "train").exists():
            return True
        src_key = next((s.key for s in self.specs if s.run_dir == spec.model_from), None)
        if src_key in self.results and self.results[src_key].status == "deferred":
            return "deferred"
        if src_key in self.results and self.results[src_key].status not in ("done", "skipped"):
            return None  # its model will never come
        return False

    def defer(self, spec: RunSpec, reason: str) -> None:
        self.results[spec.key] = RunResult(spec, "deferred", message=reason)
        self.tell(spec, "defer", f"{reason}; rerun the command to continue it", sep=": ")

    def launch(self, slot: int, spec: RunSpec, note: str = "") -> None:
        path = write_spec(spec)
        env = {**os.environ, "SCANMT_GRID_PID": str(os.getpid())}
        n = self.threads.get(spec.key, 1)
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(n)
        where = "cpu"
        if self.gpus:
            env["CUDA_VISIBLE_DEVICES"] = self.gpus[slot % len(self.gpus)]
            where = f"GPU {self.gpus[slot % len(self.gpus)]}"
        note = resume_note(spec) + note
        log = open(spec.dir / LOG, "ab")  # noqa: SIM115 - closed when the process ends
        log.write(f"\n##### {time.strftime('%Y-%m-%d %H:%M:%S')} start ({where}, {n} threads)\n".encode())
        log.flush()
        # in a process group of its own: a terminal's Ctrl-C reaches the grid alone, which stops it (stop_all)
        proc = subprocess.Popen([sys.executable, "-m", WORKER_MODULE, str(path), str(n)],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                preexec_fn=stopped_by_me())
        self.running[slot] = _Worker(proc, spec, time.time(), log)
        self.tell(spec, "start", f"({where}, {n} thread{'s' if n > 1 else ''}{note}); log {spec.dir / LOG}")

    def finish(self, slot: int) -> None:
        w = self.running.pop(slot)
        w.log.close()
        self.free.append(slot)
        self.free.sort()
        spec, dt, rc = w.spec, time.time() - w.started, w.proc.returncode
        if rc == 0:
            self.remember(spec)
            m = read_json(spec.dir / METRICS)
            self.results[spec.key] = RunResult(spec, "done", dt, metrics=m)
            self.tell(spec, "done ", f"in {dt / 60:.1f} min: {describe(m)}")
        elif rc == EXIT_BUSY:
            self.results[spec.key] = RunResult(spec, "busy", dt, "another process holds its lock")
            self.tell(spec, "busy ", "another process is running it; left alone", sep=": ")
        else:
            tail = _tail(spec.dir / LOG)
            self.results[spec.key] = RunResult(spec, "failed", dt, f"exit status {rc}: {tail}")
            self.tell(spec, "FAILED", f"(exit status {rc}) after {dt / 60:.1f} min; see {spec.dir / LOG}: {tail}")

    def reap(self) -> None:
        """Collect the workers that have ended."""
        for slot, w in list(self.running.items()):
            if w.proc.poll() is not None:
                self.finish(slot)

    def next_ready(self) -> RunSpec | None:
        """The first pending run that can start (failing those whose model will never come), or None."""
        for spec in list(self.pending):
            r = self.ready(spec)
            if r is None:
                self.pending.remove(spec)
                self.results[spec.key] = RunResult(spec, "failed", message=f"its model ({spec.model_from}) failed")
                self.tell(spec, "FAILED", "the run that trains its model failed", sep=": ")
            elif r == "deferred":
                self.pending.remove(spec)
                self.defer(spec, "the run that trains its model was deferred")
            elif r:
                return spec
        return None

    def launch_ready(self) -> bool:
        """Start ready runs in the free slots (deferring those a deadline forbids); whether any was started."""
        launched = False
        while self.free and self.pending:
            choice = self.next_ready()
            if choice is None:
                break
            self.pending.remove(choice)
            note = ""
            if self.deadline is not None:
                estimate = self.history.estimate(choice)
                reason = defer_reason(self.deadline, time.time(), estimate)
                if reason is not None:
                    self.defer(choice, reason)
                    continue
                note = (", no finished run to estimate its time from" if estimate is None
                        else f", expected to take {estimate.seconds / 60:.0f} min")
            self.launch(self.free.pop(0), choice, note)
            launched = True
        return launched

    def fail_stranded(self) -> None:
        """Nothing runs and nothing can start: the pending runs wait for models never trained."""
        for spec in self.pending:
            self.results[spec.key] = RunResult(spec, "failed", message=f"its model ({spec.model_from}) was not trained")
            self.tell(spec, "FAILED", f"its model {spec.model_from} was never trained", sep=": ")
        self.pending.clear()

    def tell_interrupted(self) -> None:
        """After :meth:`stop_all` on Ctrl-C or SIGTERM: where each stopped run stands and how to continue it."""
        from scanmt.model.checkpoint import last_saved

        for w in self.running.values():
            self.tell(w.spec, "stop ", f"interrupted: {last_saved(w.spec.dir)}; rerun the same command to continue it "
                      "(it resumes from its first unfinished step, training from last.pt)", sep=": ")

    def stop_all(self) -> None:
        """Terminate every worker (killed after 20 s) and close its log."""
        for w in self.running.values():
            with contextlib.suppress(OSError):
                w.proc.terminate()
        for w in self.running.values():
            try:
                w.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                w.proc.kill()
            w.log.close()
