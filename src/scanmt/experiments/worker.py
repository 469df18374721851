"""One grid run in a worker process: ``python -m scanmt.experiments.runner SPEC.json THREADS``.

The worker holds the run's lock, runs each step's request through its API function (resuming: steps whose
markers exist are skipped, training continues from ``last.pt``), writes a marker per step with its times, then
``metrics.json`` (:mod:`scanmt.experiments.run_metrics`) and ``DONE`` last.  Every file is written atomically,
so the run is safe to kill at any moment.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Sequence

from scanmt import api
from scanmt.allocator import tune_malloc
from scanmt.api import (CommandRequest, EvaluateRequest, StressRequest, TrainRequest, TranslateRequest,
                        TunePenaltiesRequest)
from scanmt.errors import DataError, ScanmtError
from scanmt.experiments.common import write_json
from scanmt.experiments.layout import COMMAND, DONE, LAST_CHECKPOINT, METRICS, stage_marker
from scanmt.experiments.progress import updates_done
from scanmt.experiments.run_metrics import collect_metrics
from scanmt.experiments.spec import MODEL_STAGES, RunSpec
from scanmt.experiments.state import missing_model, step_done
from scanmt.io import LOCK_FILE, atomic_open, close_progress_bars, os_error_line, setup_logging
from scanmt.processes import die_with_parent, exit_status, lock_holder, sigterm_interrupts, try_lock


#: the API function that runs each kind of step request
STEP_FUNCTIONS: dict[type, Callable[[Any], Any]] = {
    TrainRequest: api.train, TunePenaltiesRequest: api.tune_penalties, TranslateRequest: api.translate_file,
    EvaluateRequest: api.evaluate, StressRequest: api.stress,
}


EXIT_BUSY = 75
LOCK_WAIT_S = 30.0


def _cpu_seconds() -> float:
    """CPU time of this process (all its threads) and of its waited-for children (eflomal), in seconds."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _step(request: CommandRequest, what: str) -> tuple[dict[str, float], Any]:
    """Run one step's request through its API function; ``(timing, result)``, the timing for the step's
    marker: ``seconds`` (wall clock), and on a machine without a GPU ``cpu_seconds`` (:func:`_cpu_seconds`)
    and torch's ``threads`` (:func:`step_times`).

    The log gets the step's command line, then what ``scanmt`` prints at the end of that
    command (the result's ``summary``: training summary, translate line, evaluate table, ...).
    """
    import torch

    print(f"\n=== {what}: {request.command_line()}", flush=True)
    t0, c0 = time.time(), _cpu_seconds()
    try:
        result = STEP_FUNCTIONS[type(request)](request)
    except (ScanmtError, OSError) as exc:
        where = f": {exc.filename}" if isinstance(exc, OSError) and exc.filename else ""
        raise DataError(f"{what} failed ({exc}{where}): {request.command_line()}") from None
    print(result.summary(request), flush=True)
    timing: dict[str, float] = {"seconds": round(time.time() - t0, 1)}
    if not torch.cuda.is_available():
        timing |= {"cpu_seconds": round(_cpu_seconds() - c0, 1), "threads": torch.get_num_threads()}
    return timing, result


def _mark(run: Path, stage: str, info: dict[str, Any]) -> None:
    write_json(stage_marker(run, stage), {**info, "finished": time.strftime("%Y-%m-%d %H:%M:%S")})


def _train_summary(result: api.TrainResult) -> dict[str, Any]:
    """The train marker's numbers (``metrics.json`` ``train``)."""
    return {"steps": result.step, "epochs": result.epochs, "minutes": round(result.seconds / 60, 2),
            "best_valid_bleu": result.best_bleu, "best_step": result.best_step}


def device_steps(spec: RunSpec, device: str) -> list[tuple[str, CommandRequest | None]]:
    """:meth:`RunSpec.steps` with ``device`` set on the decoding steps (:data:`~scanmt.experiments.spec.MODEL_STAGES`)."""
    if device == "cpu":
        return spec.steps()
    return [(stage, dataclasses.replace(request, device=device)
             if request is not None and stage.partition(".")[0] in MODEL_STAGES else request)
            for stage, request in spec.steps()]


def write_command_file(spec: RunSpec, steps: list[tuple[str, CommandRequest | None]], device: str) -> None:
    lines = [
        f"# {spec.grid}: system {spec.system} ({spec.label}), seed {spec.seed}",
        f"# git commit: {spec.commit}",
        f"# device: {device}",
        "# the grid command that made this run:",
        spec.command,
        "# the steps it ran (each line reproduces its step; train continues a killed run with --resume):",
    ]
    if spec.model_from:
        lines.append(f"# (model trained by {spec.model_from}; no training here)")
    lines += [request.command_line() for _, request in steps if request is not None]
    with atomic_open(spec.dir / COMMAND) as fh:
        fh.write("\n".join(lines) + "\n")


def _train(spec: RunSpec) -> None:
    """The train step of ``spec``, resumed from ``last.pt`` (checked: the model it decodes is trained)."""
    run = spec.dir
    if spec.train is None:
        if not stage_marker(Path(spec.model_from or ""), "train").exists():
            raise DataError(f"{spec.key}: the model it decodes ({spec.model_from}) is not trained yet")
        why = missing_model(spec)
        if why is not None:
            raise DataError(why)
        return
    if stage_marker(run, "train").exists():
        print("=== train: done before", flush=True)
        return
    request = spec.train
    start = updates_done(run)
    if (run / LAST_CHECKPOINT).exists():
        request = dataclasses.replace(request, resume=True)
        print(f"=== train: resuming from {LAST_CHECKPOINT}", flush=True)
    timing, result = _step(request, "train")
    # attempt_steps: the updates that ``seconds`` counts (about: the log may run ahead of last.pt)
    _mark(run, "train", {**_train_summary(result), **timing, "attempt_steps": max(1, result.step - start)})


def run_one(spec: RunSpec, threads: int) -> dict[str, Any]:
    """Run (or finish) one run in this process; returns its metrics (also in ``metrics.json``)."""
    import torch

    run = spec.dir
    torch.set_num_threads(max(1, threads))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    steps = device_steps(spec, device)
    write_command_file(spec, steps, device)
    print(f"=== {spec.key} ({spec.label}) in {run}: device {device}, {threads} thread(s), commit {spec.commit}",
          flush=True)
    _train(spec)
    for stage, request in steps[1:]:
        if request is None:
            continue
        if step_done(spec, stage):
            print(f"=== {stage}: done before", flush=True)
            continue
        timing, _ = _step(request, stage)
        _mark(run, stage, {**timing, **({"k": list(request.k)} if stage == "stress" else {})})
    metrics = collect_metrics(spec)
    write_json(run / METRICS, metrics)
    with atomic_open(run / DONE) as fh:
        fh.write(time.strftime("%Y-%m-%d %H:%M:%S") + "\n")
    print(f"=== {spec.key}: DONE (BLEU {metrics['bleu']:.2f})", flush=True)
    return metrics


def worker_main(argv: Sequence[str]) -> int:
    """``python -m scanmt.experiments.runner SPEC.json THREADS``: exit 0 done, 2 error, 75 busy (130/143: interrupted).

    The worker gets SIGTERM when the grid process dies; SIGTERM stops its training after the current update
    with ``last.pt`` saved, and its other steps as Ctrl-C would.  Started by the pool, it runs in a process
    group of its own (:func:`scanmt.processes.stopped_by_me`): a terminal's Ctrl-C reaches the grid alone,
    which stops the worker with one SIGTERM (a worker that got the Ctrl-C too took that SIGTERM as a second
    interrupt and quit without saving).
    """
    parent = os.environ.get("SCANMT_GRID_PID")
    die_with_parent(int(parent) if parent else None)
    setup_logging(verbose=False)
    tune_malloc()  # (inherited from the grid process's environment, unless a user started this one)
    spec_path, threads = Path(argv[0]), int(argv[1]) if len(argv) > 1 else 1
    spec = RunSpec.from_dict(json.loads(spec_path.read_text(encoding="utf-8")))
    lock = try_lock(spec.dir / LOCK_FILE, wait_s=LOCK_WAIT_S)
    if lock is None:
        print(f"{spec.key}: {lock_holder(spec.dir / LOCK_FILE)} is running it ({spec.dir / LOCK_FILE})",
              file=sys.stderr, flush=True)
        return EXIT_BUSY
    with lock, sigterm_interrupts():
        try:
            run_one(spec, threads)
        except ScanmtError as exc:
            _tell(spec.key, f"error: {exc}")
            return 2
        except KeyboardInterrupt as exc:
            _tell(spec.key, "interrupted")
            return exit_status(exc)
        except OSError as exc:  # a full disk, a folder that is not writable: one line naming the file
            _tell(spec.key, f"error: {os_error_line(exc)}")
            return 1
        except Exception:  # noqa: BLE001 - a bug: keep the traceback in the run's log
            close_progress_bars()
            traceback.print_exc()
            return 1
    return 0


def _tell(key: str, what: str) -> None:
    """``KEY: WHAT`` on the worker's stderr (the run's log), on a line of its own after the progress bars it ends."""
    close_progress_bars()
    print(f"{key}: {what}", file=sys.stderr, flush=True)
