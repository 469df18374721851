"""Runs of a grid: planning and checking them, running one (a worker process), and the pool.

Every run (system x seed) lives in ``OUT/runs/{system}/seed{k}/``::

    spec.json           what the run is: config, the exact step commands, commit (written by the planner)
    command.txt         the exact commands (grid command, then one `scanmt ...` line per step) and git commit
    log.txt             everything the worker printed (appended across attempts)
    config.yaml, last.pt, best.pt, metrics.csv      scanmt train (resumed from last.pt after a kill)
    penalties.yaml      scanmt tune-penalties (systems with tune_penalties: true)
    {split}.hyp.{tgt}, {split}.hyp.tok.{tgt}, {split}.attn.npz     scanmt translate (main split and each extra one)
    {split}.search.json the searches of that translate (``--search-stats``: output support, exact searches,
                        forced ``</s>``); runs translated before the option existed have none
    eval.json           scanmt evaluate of the main split (every metric with its signature)
    eval.{split}.json   scanmt evaluate of each extra test split (``--extra-splits``, e.g. test2017)
    stress/             scanmt stress of the model on the main split (``--stress-k``): stress/stress.json, its
                        figure, joined inputs and outputs; ``metrics.json`` ``stress`` holds its numbers by K
    metrics.json        the run's summary: BLEU, tokenized BLEU, METEOR, REP, DROP (with ``drop_samples``,
                        ``drop_sd``, ``drop_scores``: :func:`drop_spread`), attention stats, training,
                        ``output`` (``model.output``), ``search`` (the main split's ``{split}.search.json``, or None);
                        ``test_sets``: {split: {bleu, sacrebleu, meteor, rep, drop, drop_samples, drop_sd,
                        drop_scores, sentences, search}} per extra split
    .stages/*.done      one marker per finished step (train, tune, translate, evaluate, then
                        translate.{split} and evaluate.{split} per extra split, then stress)
    DONE                written last; a rerun skips the run unless an extra split asked for is missing
    previous-decode-N/  what ``experiment run --redecode`` moved aside: the outputs, markers and DONE of
                        an earlier decode of the same model (N = 1, 2, ...)

Each step is a typed request of :mod:`scanmt.api` (``TrainRequest``, ``TunePenaltiesRequest``,
``TranslateRequest``, ``EvaluateRequest``), run in the worker by its API function.  ``spec.json``
holds the requests; ``command.txt`` their command lines (``request.command_line()``), which
``scanmt`` parses back into the same requests, so each line there reproduces its step.  Every
file is written atomically, so the run is safe to kill at any moment; a rerun
resumes from the first unfinished step (training from ``last.pt``).  A finished run asked
for an extra split it lacks gets only that split's translate and evaluate steps; one asked for a stress
test (or for other K values than its last one) gets only the stress step.

A worker is ``python -m scanmt.experiments.runner SPEC.json THREADS``; the pool
(:func:`run_pool`) starts up to ``workers`` of them, one per GPU when given GPUs.  Given a deadline
(``experiment run --deadline``), it starts only the runs expected to end before it
(:mod:`scanmt.experiments.deadline`, from the step markers of the runs finished before) and defers the rest.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Collection, Iterator, Sequence

from scanmt import api
from scanmt.api import (CommandRequest, EvaluateRequest, StressRequest, TrainRequest, TranslateRequest,
                        TunePenaltiesRequest)
from scanmt.allocator import tune_malloc
from scanmt.api.decode import PENALTY_KEYS
from scanmt.api.evaluate import check_drop_samples
from scanmt.config import config_differences, with_defaults
from scanmt.errors import BusyError, ConfigError, DataError, ScanmtError
from scanmt.experiments.deadline import Estimate, StepTimes, defer_reason, expected_seconds
from scanmt.experiments.grid import SPEED_KEYS, Grid, GridError, System
from scanmt.io import LOCK_FILE, atomic_open, close_progress_bars, os_error_line, setup_logging
from scanmt.processes import (die_with_parent, exit_status, lock_holder, sigterm_interrupts, stopped_by_me,
                               try_lock)

#: decode keys the translate request sets when they differ from the checkpoint's config (beam: always)
DECODE_KEYS = (*PENALTY_KEYS, "batch_size")
#: the API function that runs each kind of step request
STEP_FUNCTIONS: dict[type, Callable[[Any], Any]] = {
    TrainRequest: api.train, TunePenaltiesRequest: api.tune_penalties, TranslateRequest: api.translate_file,
    EvaluateRequest: api.evaluate, StressRequest: api.stress,
}
#: step request types by command name (the ``command`` key of a request in ``spec.json``)
STEP_REQUESTS: dict[str, type] = {cls.COMMAND: cls for cls in STEP_FUNCTIONS}
#: stages whose requests decode, and so run on the worker's GPU when it has one
DEVICE_STAGES = ("tune", "translate", "stress")
STAGES = ("train", "tune", "translate", "evaluate")
#: extra test splits every run also translates and scores when the prepared data has them
DEFAULT_EXTRA_SPLITS = ("test2017",)
EXIT_BUSY = 75
LOCK_WAIT_S = 30.0


# --------------------------------------------------------------------------- small helpers


def repo_root() -> Path:
    import scanmt

    return Path(scanmt.__file__).resolve().parents[2]


def git_commit(root: Path | None = None) -> str:
    """``git rev-parse`` of the source checkout (``+dirty`` when src/ has uncommitted changes), or ``unknown``."""
    root = root or repo_root()
    if not (root / ".git").exists():
        return "unknown (not a git checkout)"
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=20, env=env, check=True).stdout.strip()
        status = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", "src"], capture_output=True,
                                text=True, timeout=20, env=env, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown (git failed)"
    return head + ("+dirty" if status else "")


def write_json(path: Path, obj: Any) -> None:
    with atomic_open(path) as fh:
        json.dump(obj, fh, indent=2, ensure_ascii=False)
        fh.write("\n")


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    return obj if isinstance(obj, dict) else None


def request_to_json(request: CommandRequest | None) -> dict[str, Any] | None:
    """A step request as JSON: ``{"command": COMMAND, field: value, ...}`` (paths as strings, tuples as lists)."""
    if request is None:
        return None
    out: dict[str, Any] = {"command": request.COMMAND}
    for f in dataclasses.fields(request):  # type: ignore[arg-type]
        value = getattr(request, f.name)
        out[f.name] = str(value) if isinstance(value, Path) else list(value) if isinstance(value, tuple) else value
    return out


def request_from_json(obj: dict[str, Any] | CommandRequest | None) -> CommandRequest | None:
    """The step request of :func:`request_to_json` (a request is returned as it is)."""
    if obj is None or isinstance(obj, CommandRequest):
        return obj
    fields = dict(obj)
    return STEP_REQUESTS[fields.pop("command")](**fields)


# --------------------------------------------------------------------------- plan

#: alignments of each side that a grid run's DROP is averaged over: a grid compares systems, and one
#: alignment's noise (about 0.1 DROP points on 1,000 sentences) is as large as the spread over seeds
DROP_SAMPLES = 3


@dataclass
class RunContext:
    """Everything a grid invocation fixes for all of its runs."""

    out: Path
    preset: Path
    data_dir: Path
    src_lang: str
    tgt_lang: str
    cli_set: list[str]
    split: str
    command: str
    commit: str
    align_model: Path
    predictor: Path | None = None
    #: further prepared test splits every run translates and scores after the main one
    extra_splits: tuple[str, ...] = ()
    #: DROP averaged over this many alignments of each side (``evaluate``'s ``drop_samples``)
    drop_samples: int = DROP_SAMPLES
    #: K values of a stress test of every run's model on the main split (``--stress-k``; (): none)
    stress_k: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        check_drop_samples(self.drop_samples)
        bad = next((k for k in self.stress_k if isinstance(k, bool) or not isinstance(k, int) or k < 1), None)
        if bad is not None:
            raise ConfigError(f"--stress-k must be whole numbers >= 1, got {bad!r}")
        if len(set(self.stress_k)) != len(self.stress_k):
            raise ConfigError(f"--stress-k {' '.join(map(str, self.stress_k))}: give each K once")


@dataclass
class RunSpec:
    """One run (system x seed): its config and the exact commands of its steps."""

    grid: str
    system: str
    label: str
    seed: int
    run_dir: str
    preset: str
    overrides: list[str]
    config: dict[str, Any]
    split: str
    src_lang: str
    tgt_lang: str
    tune_penalties: bool
    model_from: str | None
    #: the step requests (train None: the run decodes another run's model; tune None: no tuning)
    train: TrainRequest | None
    tune: TunePenaltiesRequest | None
    translate: TranslateRequest
    evaluate: EvaluateRequest
    command: str
    commit: str
    #: extra test split -> {"translate": request, "evaluate": request}, in the order they run
    extra_splits: dict[str, dict[str, CommandRequest]] = field(default_factory=dict)
    #: the stress test of the model on the main split (``--stress-k``; None: none), after every other step
    stress: StressRequest | None = None
    #: one entry per attempt: {"started": time, "commit": ...} (a run resumed under another commit shows it)
    history: list[dict[str, str]] = field(default_factory=list)

    @property
    def dir(self) -> Path:
        return Path(self.run_dir)

    @property
    def key(self) -> str:
        return f"{self.system}/seed{self.seed}"

    @property
    def checkpoint(self) -> Path:
        return Path(self.model_from or self.run_dir) / "best.pt"

    def steps(self) -> list[tuple[str, CommandRequest | None]]:
        """``(stage, request)`` of every step in order (request None: the step is not part of this run); the
        ``stress`` step comes last, and only when the run asks for one."""
        steps: list[tuple[str, CommandRequest | None]] = [
            ("train", self.train), ("tune", self.tune), ("translate", self.translate), ("evaluate", self.evaluate)]
        for split, requests in self.extra_splits.items():
            steps += [(f"translate.{split}", requests["translate"]), (f"evaluate.{split}", requests["evaluate"])]
        return steps + ([("stress", self.stress)] if self.stress is not None else [])

    def to_dict(self) -> dict[str, Any]:
        """The spec as JSON (``spec.json``); the step requests as :func:`request_to_json` writes them."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        for stage in STEP_FIELDS:
            d[stage] = request_to_json(d[stage])
        d["extra_splits"] = {split: {k: request_to_json(r) for k, r in requests.items()}
                             for split, requests in self.extra_splits.items()}
        return json.loads(json.dumps(d))

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "RunSpec":
        names = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in d.items() if k in names}
        for stage in STEP_FIELDS:
            values[stage] = request_from_json(values.get(stage))
        values["extra_splits"] = {split: {k: request_from_json(r) for k, r in requests.items()}
                                  for split, requests in (values.get("extra_splits") or {}).items()}
        return cls(**values)


#: the fields of :class:`RunSpec` that hold step requests
STEP_FIELDS = ("train", "tune", "translate", "evaluate", "stress")


def run_dir(out: Path, system: str, seed: int) -> Path:
    return out / "runs" / system / f"seed{seed}"


def stage_marker(run: Path, stage: str) -> Path:
    return run / ".stages" / f"{stage}.done"


def step_times(run: Path) -> StepTimes | None:
    """How long the steps of a finished run took, from its step markers (None: not finished, or no marker
    records seconds).

    A step's time is its wall-clock seconds, or, for a step that ran on one CPU thread, its CPU seconds
    when less: the time it takes with its core to itself.  A run that waited for the CPU behind other jobs
    (a shared machine, a low priority) would otherwise make every later estimate too long; one that had the
    CPU gives its wall time.  With several threads the CPU time says less (threads also idle for want of
    work), and a GPU step records none, so those give their wall time, as do markers written before the
    CPU time was recorded.
    """
    if not (run / "DONE").exists():
        return None
    seconds: dict[str, float] = {}
    train: dict[str, Any] = {}
    cpu_timed = False
    for marker in sorted((run / ".stages").glob("*.done")):
        info = read_json(marker) or {}
        if isinstance(info.get("seconds"), (int, float)):
            wall = float(info["seconds"])
            cpu, threads = info.get("cpu_seconds"), info.get("threads")
            if isinstance(cpu, (int, float)) and threads == 1:
                wall = min(wall, float(cpu))
                cpu_timed = cpu_timed or marker.name == "train.done"
            seconds[marker.name.removesuffix(".done")] = wall
        if marker.name == "train.done":
            train = info
    if not seconds:
        return None
    updates = train.get("steps") if isinstance(train.get("steps"), int) else None
    attempt = train.get("attempt_steps") if isinstance(train.get("attempt_steps"), int) else None
    return StepTimes(seconds, updates, attempt, cpu_timed)


def updates_done(run: Path) -> int:
    """The updates an unfinished training has logged (the last step of ``RUN/metrics.csv``; 0 when it has
    not started, has no checkpoint to resume from, or logs elsewhere).  Training resumes from ``last.pt``,
    at most ``train.checkpoint_every`` updates before it."""
    if not (run / "last.pt").exists() or stage_marker(run, "train").exists():
        return 0
    return logged_updates(run)


def logged_updates(run: Path) -> int:
    """The last step a training in ``run`` has logged in ``RUN/metrics.csv`` (0: none, or no such file)."""
    try:
        with open(run / "metrics.csv", "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 4096))
            lines = fh.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return 0
    for line in reversed(lines):
        first = line.split(",", 1)[0].strip()
        if first.isdigit():
            return int(first)
    return 0


def planned_updates(spec: RunSpec) -> int | None:
    """The updates the run's training will make in all, where its config fixes them and its first epoch has
    been logged: no early stopping (``train.patience`` 0) and a validation at each epoch's end
    (``train.valid_every`` 0), so that the first ``valid/`` row of ``RUN/metrics.csv`` is the first epoch's
    updates: ``train.epochs`` times those, at most ``train.max_steps``.  None otherwise (early stopping,
    no epoch finished yet, or no training of its own)."""
    train = (spec.config or {}).get("train") or {}
    if spec.train is None or train.get("patience") != 0 or train.get("valid_every") != 0 or not train.get("epochs"):
        return None
    first = _first_validation(spec.dir / "metrics.csv")
    if first is None:
        return None
    planned = int(train["epochs"]) * first
    return min(planned, int(train["max_steps"])) if train.get("max_steps") else planned


def _first_validation(metrics: Path) -> int | None:
    """The step of the first ``valid/`` row of a ``metrics.csv`` (None: none, or no such file)."""
    try:
        with open(metrics, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                step, _, rest = line.partition(",")
                if rest.startswith("valid/") and step.strip().isdigit():
                    return int(step)
    except OSError:
        return None
    return None


def missing_splits(spec: RunSpec) -> list[str]:
    """The extra splits of ``spec`` its ``metrics.json`` has no numbers for."""
    if not spec.extra_splits:
        return []
    have = (read_json(spec.dir / "metrics.json") or {}).get("test_sets") or {}
    return [split for split in spec.extra_splits if split not in have]


def missing_stress(spec: RunSpec) -> bool:
    """Whether ``spec`` asks for a stress test its run has not finished with these K values (its marker's ``k``)."""
    stress = getattr(spec, "stress", None)  # (a spec of a run planned before stress tests existed has None)
    if stress is None:
        return False
    done = read_json(stage_marker(spec.dir, "stress"))
    return done is None or done.get("k") != list(stress.k)


def step_done(spec: RunSpec, stage: str) -> bool:
    """Whether the run has finished ``stage`` as it is asked for now (a stress test with other K values is not)."""
    return stage_marker(spec.dir, stage).exists() and not (stage == "stress" and missing_stress(spec))


def pending_steps(spec: RunSpec) -> list[str]:
    """The steps of ``spec`` that it asks for and has not finished, in order."""
    return [stage for stage, request in spec.steps() if request is not None and not step_done(spec, stage)]


def metrics_unreadable(spec: RunSpec) -> bool:
    """Whether a finished run's ``metrics.json`` is missing or does not parse as a JSON object."""
    return (spec.dir / "DONE").exists() and read_json(spec.dir / "metrics.json") is None


def resolve_extra_splits(asked: Sequence[str] | None, main_split: str, available: Sequence[str],
                         where: str) -> tuple[str, ...]:
    """The extra test splits of a grid invocation, checked against the prepared data's splits.

    Args:
        asked: ``--extra-splits`` (None: not given, the :data:`DEFAULT_EXTRA_SPLITS` the data has).
        main_split: ``--split``; it must exist too, and is never an extra split.
        available: the splits the prepared data has (``meta.json`` ``splits``).
        where: the data, for the error messages.

    Raises:
        ConfigError: a split the data does not have, or the main split given as an extra one.
    """
    known = ", ".join(available) or "none"
    if main_split not in available:
        raise ConfigError(f"--split {main_split}: {where} has no such split (available: {known})")
    if asked is None:
        return tuple(s for s in DEFAULT_EXTRA_SPLITS if s in available and s != main_split)
    chosen: list[str] = []
    for split in asked:
        if split not in available:
            raise ConfigError(f"--extra-splits {split}: {where} has no such split (available: {known})")
        if split == main_split:
            raise ConfigError(f"--extra-splits {split}: that is the main split (--split); list only further ones")
        if split not in chosen:
            chosen.append(split)
    return tuple(chosen)


#: the files of a run that its decode steps (tune, translate, evaluate) write, and metrics.json
DECODE_OUTPUTS = ("*.hyp.*", "*.attn.npz", "*.search.json", "eval*.json", "penalties.yaml", "metrics.json")


def decoded(spec: RunSpec) -> bool:
    """Whether any decode step of the run has finished (what ``--redecode`` would move aside)."""
    return (spec.dir / "DONE").exists() or any(
        stage_marker(spec.dir, stage).exists() for stage, request in spec.steps()[1:] if request is not None)


def redecodable(spec: RunSpec) -> bool:
    """Whether ``--redecode`` would decode the run again: some decode step has finished and its model is
    there (a run restored from an archive has no checkpoint)."""
    return decoded(spec) and spec.checkpoint.is_file()


def forget_decoding(spec: RunSpec) -> Path | None:
    """Make the run decode its trained model again (``experiment run --redecode``, after a change to
    decoding or scoring): its decode outputs (:data:`DECODE_OUTPUTS`), the markers of its decode steps
    and ``DONE`` move to a new ``previous-decode-N/`` folder of the run, nothing is deleted.

    The outputs move first and ``DONE`` last, each by a rename, so an interrupted call leaves a run
    that is either still done or resumes its decode steps.  Returns the folder, or None when no
    decode step had finished (training, and its markers, are never touched).  A decoded run whose model
    checkpoint is gone (:attr:`RunSpec.checkpoint`; archives keep none) is refused with a
    :class:`~scanmt.errors.DataError`, and nothing moves.
    """
    if not decoded(spec):
        return None
    if not spec.checkpoint.is_file():  # its outputs would move aside with nothing to make them again
        raise DataError(f"{spec.key}: its model {spec.checkpoint} is gone (a restored archive keeps no checkpoints), "
                        "so it cannot be decoded again; its outputs are kept as they are")
    run = spec.dir
    k = 1
    while (run / f"previous-decode-{k}").exists():
        k += 1
    dest = run / f"previous-decode-{k}"
    dest.mkdir()
    for path in sorted({p for pattern in DECODE_OUTPUTS for p in run.glob(pattern) if p.is_file()}):
        os.replace(path, dest / path.name)
    for stage, request in spec.steps()[1:]:
        marker = stage_marker(run, stage)
        if request is not None and marker.exists():
            os.replace(marker, dest / f"stage-{marker.name}")
    if (run / "DONE").exists():
        os.replace(run / "DONE", dest / "DONE")
    return dest


def run_status(spec: RunSpec) -> str:
    """``done``, ``resume`` (something is there already) or ``new``.

    A run finished (DONE) without an extra split it is now asked for is ``resume``: only that
    split's steps are left (the markers of the others exist).  So is one whose ``metrics.json``
    does not parse (cut short, edited): its finished steps are skipped and it is scored again
    (a summary would otherwise count it finished with no numbers).
    """
    d = spec.dir
    if (d / "DONE").exists() and not missing_splits(spec) and not missing_stress(spec) and not metrics_unreadable(spec):
        return "done"
    if (d / "last.pt").exists() or any(stage_marker(d, s).exists() for s in STAGES):
        return "resume"
    return "new"


def needs_training(spec: RunSpec) -> bool:
    """Whether the run still has to train its model (shared predictor and fertility caches are for these)."""
    return spec.train is not None and run_status(spec) != "done" and not stage_marker(spec.dir, "train").exists()


def _load_config(ctx: RunContext, overrides: list[str], where: str):
    from scanmt.config import Config

    try:
        return Config.load(ctx.preset, overrides)
    except ConfigError as exc:
        raise GridError(f"{where}: {exc}") from None


def _check_config(cfg, where: str, tune: bool, auto_predictor: Path | None = None) -> None:
    """Checks the trainer would only make after data loading: the grid's fertility limits, tuning needs.

    The transform (and every other closed choice, :mod:`scanmt.choices`) and the fertility
    cross-field rules (transform and strategy, exhaustion) were checked when the config was built.
    """
    from scanmt.fertility.rules import ORACLE
    att = cfg.model.attention
    strategy = att.fertility.strategy
    if strategy == ORACLE:
        raise GridError(f"{where}: model.attention.fertility.strategy=actual (oracle) needs reference alignments "
                        "at test time, which the grid runner does not provide; use constant, guided or predicted")
    pred = att.fertility.predictor
    if strategy == "predicted" and pred and Path(pred) != auto_predictor and not Path(pred).exists():
        raise GridError(f"{where}: model.attention.fertility.predictor={att.fertility.predictor}: file not found")
    if tune and cfg.decode.beam < 2:
        raise GridError(f"{where}: tune_penalties needs beam search; decode.beam={cfg.decode.beam}")


def uses_predictor(cfg) -> bool:
    from scanmt.model.transforms import get_transform

    att = cfg.model.attention
    return get_transform(att.transform).constrained and att.fertility.strategy == "predicted"


def system_config(grid: Grid, system: System, ctx: RunContext, seed: int):
    """``(overrides, Config)`` of one system and seed, checked (the predictor path filled in)."""
    where = f"{grid.path}: system {system.name!r}"
    try:
        return _system_config(grid, system, ctx, seed, where)
    except GridError:
        raise
    except ConfigError as exc:
        raise GridError(f"{where}: {exc}") from None


def _system_config(grid: Grid, system: System, ctx: RunContext, seed: int, where: str):
    base = [f"data.dir={ctx.data_dir}", f"data.src_lang={ctx.src_lang}", f"data.tgt_lang={ctx.tgt_lang}",
            f"train.seed={seed}"]
    own = base + list(grid.set) + list(system.set)
    cfg = _load_config(ctx, own + ctx.cli_set, where)
    if uses_predictor(cfg) and not cfg.model.attention.fertility.predictor:
        if ctx.predictor is None:
            raise GridError(f"{where}: predicted fertility needs a predictor, and none is trained for this grid")
        own.append(f"model.attention.fertility.predictor={ctx.predictor}")
        cfg = _load_config(ctx, own + ctx.cli_set, where)
    _check_config(cfg, where, system.tune_penalties, ctx.predictor)
    return own + ctx.cli_set, cfg


@dataclass
class _Decode:
    """What the decoding steps of one run need: its checkpoint, decode settings and those of the model."""

    where: str
    run: Path
    ckpt: str
    dec: dict[str, Any]
    model_dec: dict[str, Any]
    tune: bool

    @property
    def penalties(self) -> Path:
        return self.run / "penalties.yaml"


def _tune_request(ctx: RunContext, d: _Decode) -> TunePenaltiesRequest | None:
    """``tune_penalties`` on the validation split (decode settings that differ from the model's passed on)."""
    if not d.tune:
        return None
    changed = {k: d.dec[k] for k in ("penalty_mode", "coverage_eps", "batch_size") if d.dec[k] != d.model_dec[k]}
    return TunePenaltiesRequest(model=d.ckpt, data=ctx.data_dir, split="valid", beam=d.dec["beam"], out=d.penalties,
                                **changed)


def _translate_request(ctx: RunContext, d: _Decode, split: str) -> TranslateRequest:
    """``translate`` of one prepared split into ``RUN/{split}.hyp.{tgt}`` (+ tokenized, attention, search
    statistics)."""
    s, t = ctx.src_lang, ctx.tgt_lang
    changed = {k: d.dec[k] for k in DECODE_KEYS
               if not (d.tune and k in PENALTY_KEYS) and d.dec[k] != d.model_dec[k]}
    return TranslateRequest(
        model=d.ckpt, input=str(ctx.data_dir / f"{split}.raw.{s}"), output=str(d.run / f"{split}.hyp.{t}"),
        tokenized_out=str(d.run / f"{split}.hyp.tok.{t}"), attention_out=str(d.run / f"{split}.attn.npz"),
        beam=d.dec["beam"], penalties=str(d.penalties) if d.tune else None,
        search_stats=str(d.run / search_json_name(split)), **changed,
    )


def search_json_name(split: str) -> str:
    """``{split}.search.json``: the search statistics of a split's translate step."""
    return f"{split}.search.json"


def eval_json_name(split: str, main_split: str) -> str:
    """``eval.json`` for the main split, ``eval.{split}.json`` for an extra one."""
    return "eval.json" if split == main_split else f"eval.{split}.json"


def _evaluate_request(ctx: RunContext, run: Path, split: str) -> EvaluateRequest:
    """``evaluate`` of ``RUN/{split}.hyp.{tgt}`` against the prepared split."""
    s, t = ctx.src_lang, ctx.tgt_lang
    return EvaluateRequest(
        hyp=run / f"{split}.hyp.{t}", ref=ctx.data_dir / f"{split}.raw.{t}", src=ctx.data_dir / f"{split}.raw.{s}",
        align_model=ctx.align_model, drop_samples=ctx.drop_samples, attention=run / f"{split}.attn.npz",
        src_lang=s, tgt_lang=t, json=run / eval_json_name(split, ctx.split),
    )


def _stress_request(ctx: RunContext, d: _Decode) -> StressRequest | None:
    """``stress`` of the run's model on the main split into ``RUN/stress/`` (the run's beam; the checkpoint's other
    decode settings: tuned penalties are not applied)."""
    if not ctx.stress_k:
        return None
    s, t = ctx.src_lang, ctx.tgt_lang
    return StressRequest(model=(d.ckpt,), names=(d.run.parent.name,), src=ctx.data_dir / f"{ctx.split}.raw.{s}",
                         ref=ctx.data_dir / f"{ctx.split}.raw.{t}", out=d.run / "stress", k=ctx.stress_k,
                         beam=d.dec["beam"], align_model=ctx.align_model)


def _stale(spec: RunSpec) -> str | None:
    """Why the run directory was made with another config than ``spec``'s, or None."""
    old = read_json(spec.dir / "spec.json")
    if old is None:
        return None
    diffs = config_differences(with_defaults(old.get("config", {})), spec.config, SPEED_KEYS)
    if old.get("model_from") != spec.model_from:
        diffs.append(("reuse_model", old.get("model_from"), spec.model_from))
    if bool(old.get("tune_penalties")) != spec.tune_penalties:
        diffs.append(("tune_penalties", old.get("tune_penalties"), spec.tune_penalties))
    if not diffs:
        return None
    k, a, b = diffs[0]
    more = f" (and {len(diffs) - 1} more)" if len(diffs) > 1 else ""
    return f"{spec.dir} was made with {k}={a!r} but the grid now gives {k}={b!r}{more}"


def _model_from(grid: Grid, system: System, ctx: RunContext, seed: int, configs: dict[tuple[str, int], dict[str, Any]]
                ) -> tuple[str | None, dict[str, Any]]:
    """``(run directory of the model it decodes or None, that model's config)``, checked for reuse_model."""
    cfg_dict = configs[system.name, seed]
    if not system.reuse_model:
        return None, cfg_dict
    model_cfg = configs[system.reuse_model, seed]
    diffs = config_differences(model_cfg, cfg_dict, SPEED_KEYS, prefixes=("decode.",))
    if diffs:
        k, a, b = diffs[0]
        raise GridError(f"{grid.path}: system {system.name!r}: reuse_model {system.reuse_model!r} was trained with "
                        f"{k}={a!r} but this system sets {k}={b!r}; only decode.* may differ")
    return str(run_dir(ctx.out, system.reuse_model, seed)), model_cfg


def _plan_one(grid: Grid, system: System, seed: int, ctx: RunContext, overrides: list[str],
              configs: dict[tuple[str, int], dict[str, Any]]) -> RunSpec:
    """The spec of one run (system x seed): the request of each of its steps."""
    cfg_dict = configs[system.name, seed]
    d = run_dir(ctx.out, system.name, seed)
    model_from, model_cfg = _model_from(grid, system, ctx, seed, configs)
    dec = _Decode(f"{grid.path}: system {system.name!r}", d, str(Path(model_from or d) / "best.pt"),
                  cfg_dict["decode"], model_cfg["decode"], system.tune_penalties)
    train = None
    if model_from is None:
        train = TrainRequest(config=str(ctx.preset), out=str(d), set=tuple(overrides))
    extra = {split: {"translate": _translate_request(ctx, dec, split), "evaluate": _evaluate_request(ctx, d, split)}
             for split in ctx.extra_splits}
    return RunSpec(
        grid=grid.name, system=system.name, label=system.label, seed=seed, run_dir=str(d),
        preset=str(ctx.preset), overrides=overrides, config=cfg_dict, split=ctx.split, src_lang=ctx.src_lang,
        tgt_lang=ctx.tgt_lang, tune_penalties=system.tune_penalties, model_from=model_from, train=train,
        tune=_tune_request(ctx, dec), translate=_translate_request(ctx, dec, ctx.split),
        evaluate=_evaluate_request(ctx, d, ctx.split), command=ctx.command, commit=ctx.commit, extra_splits=extra,
        stress=_stress_request(ctx, dec),
    )


def plan_runs(grid: Grid, systems: Sequence[System], seeds: Sequence[int], ctx: RunContext) -> list[RunSpec]:
    """Every run's spec, in the order seeds x systems; raises :class:`GridError` before any work.

    Checks: each config loads; transform and fertility are consistent; systems
    that reuse a model agree with it outside ``decode``; a run directory made
    earlier with another config is not silently mixed with this one.  Extra
    splits (``ctx.extra_splits``) never make a run stale.
    """
    resolved = {(s.name, seed): system_config(grid, s, ctx, seed) for seed in seeds for s in systems}
    configs = {key: cfg.to_dict() for key, (_, cfg) in resolved.items()}
    specs = [_plan_one(grid, system, seed, ctx, resolved[system.name, seed][0], configs)
             for seed in seeds for system in systems]
    problems = [p for p in map(_stale, specs) if p is not None]
    if problems:
        raise GridError(
            "these runs were made with another config; use another --out, or delete them to redo them:\n  "
            + "\n  ".join(problems)
        )
    return specs


def machine(threads: int = 0, precision: str | None = None) -> str:
    """The processor, CPU count and torch build an attempt ran on, its training threads (``train.threads``;
    0: torch's default, not named) and precision (``train.precision``; None: not named), for the report: a grid
    archived and continued elsewhere (:mod:`scanmt.experiments.archive`) has runs of several machines, whose
    kernels may differ, and neither a thread count nor a precision makes a finished run stale, yet each trains
    the same seed to another model."""
    import platform

    import torch

    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return (f"{cpu}, {os.cpu_count()} CPUs, torch {torch.__version__}" + (f", {threads} thread(s)" if threads else "")
            + (f", {precision}" if precision else ""))


def write_spec(spec: RunSpec) -> Path:
    """Write ``spec.json`` for a new attempt, keeping the attempts (and commits) of earlier ones."""
    path = spec.dir / "spec.json"
    old = read_json(path) or {}
    history = [h for h in old.get("history") or [] if isinstance(h, dict)]
    spec.history = history + [{"started": time.strftime("%Y-%m-%d %H:%M:%S"), "commit": spec.commit,
                               "machine": machine(spec.config["train"].get("threads") or 0,
                                                  spec.config["train"].get("precision"))}]
    write_json(path, spec.to_dict())
    return path


# --------------------------------------------------------------------------- one run (worker process)


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
    """:meth:`RunSpec.steps` with ``device`` set on the decoding steps (:data:`DEVICE_STAGES`)."""
    if device == "cpu":
        return spec.steps()
    return [(stage, dataclasses.replace(request, device=device)
             if request is not None and stage.partition(".")[0] in DEVICE_STAGES else request)
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
    with atomic_open(spec.dir / "command.txt") as fh:
        fh.write("\n".join(lines) + "\n")


def _train(spec: RunSpec) -> None:
    """The train step of ``spec``, resumed from ``last.pt`` (checked: the model it decodes is trained)."""
    run = spec.dir
    if spec.train is None:
        if not stage_marker(Path(spec.model_from or ""), "train").exists():
            raise DataError(f"{spec.key}: the model it decodes ({spec.model_from}) is not trained yet")
        return
    if stage_marker(run, "train").exists():
        print("=== train: done before", flush=True)
        return
    request = spec.train
    start = updates_done(run)
    if (run / "last.pt").exists():
        request = dataclasses.replace(request, resume=True)
        print("=== train: resuming from last.pt", flush=True)
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
    write_json(run / "metrics.json", metrics)
    with atomic_open(run / "DONE") as fh:
        fh.write(time.strftime("%Y-%m-%d %H:%M:%S") + "\n")
    print(f"=== {spec.key}: DONE (BLEU {metrics['bleu']:.2f})", flush=True)
    return metrics


def collect_metrics(spec: RunSpec) -> dict[str, Any]:
    """``metrics.json`` of a run whose steps have all finished."""
    import yaml

    run = spec.dir
    ev = read_json(run / "eval.json")
    if ev is None:
        raise DataError(f"{run / 'eval.json'}: missing or unreadable; rerun the grid to redo evaluation")
    train_dir = Path(spec.model_from) if spec.model_from else run
    train = read_json(stage_marker(train_dir, "train")) or {}
    penalties = None
    if spec.tune_penalties:
        try:
            penalties = yaml.safe_load((run / "penalties.yaml").read_text(encoding="utf-8"))
            penalties = {k: v for k, v in penalties.items() if k != "grid"}
        except (OSError, yaml.YAMLError, AttributeError):
            penalties = None
    stages = {s: (read_json(stage_marker(run, s)) or {}).get("seconds") for s, _ in spec.steps()}
    if spec.model_from:
        stages["train"] = None
    dec = spec.config["decode"]
    return {
        "grid": spec.grid, "system": spec.system, "label": spec.label, "seed": spec.seed, "split": spec.split,
        "sentences": ev.get("sentences"),
        "bleu": ev["tok_bleu"]["score"], "bleu_signature": ev["tok_bleu"]["signature"],
        "sacrebleu": ev["bleu"]["score"], "sacrebleu_signature": ev["bleu"]["signature"],
        "meteor": ev["meteor"]["score"], "meteor_synonyms": ev["meteor"].get("synonyms"),
        "rep": ev["rep"]["score"], "drop": ev["drop"]["score"],
        "drop_of_ref_aligned": ev["drop"].get("score_of_ref_aligned"), **drop_spread(ev),
        "attention": ev.get("attention_stats", {}),
        "train": {k: train.get(k) for k in ("steps", "epochs", "minutes", "best_valid_bleu", "best_step")},
        "model_from": spec.model_from, "checkpoint": str(spec.checkpoint),
        "decode": {k: dec[k] for k in ("beam", *PENALTY_KEYS)}, "penalties": penalties,
        "transform": spec.config["model"]["attention"]["transform"], "output": spec.config["model"]["output"],
        "search": search_metrics(run / search_json_name(spec.split)),
        "commit": spec.commit, "commits": sorted({h["commit"] for h in spec.history} | {spec.commit}),
        "machines": sorted({h["machine"] for h in spec.history if h.get("machine")}),
        "command": spec.command, "seconds": stages,
        "test_sets": {split: split_metrics(run / eval_json_name(split, spec.split), run / search_json_name(split))
                      for split in spec.extra_splits},
        "stress": stress_metrics(spec),
    }


def drop_spread(ev: dict[str, Any]) -> dict[str, Any]:
    """``metrics.json`` ``drop_samples``, ``drop_sd`` and ``drop_scores`` (the K×K pairing scores, row i = the i-th
    source-reference alignment; :mod:`scanmt.experiments.drop_noise`) of an ``eval.json``; 1, None and None for one
    from before ``evaluate --drop-samples``."""
    drop = ev["drop"]
    return {"drop_samples": drop.get("samples", 1), "drop_sd": drop.get("score_sd"), "drop_scores": drop.get("scores")}


def stress_metrics(spec: RunSpec) -> dict[str, Any] | None:
    """``metrics.json`` ``stress``: ``{"k": [...], "inputs": {K: n}, "scores": {K: {metric: value}},
    "per_input": {K: counts}}`` of the run's ``stress/stress.json`` (None: no stress test asked for); the per-input
    counts (:data:`scanmt.api.stress.PerInput`) feed the report's paired tests between systems."""
    if spec.stress is None:
        return None
    path = spec.stress.out / "stress.json"
    doc = read_json(path)
    if doc is None or spec.stress.names[0] not in (doc.get("scores") or {}):
        raise DataError(f"{path}: missing or unreadable; rerun the grid to redo the stress test")
    name = spec.stress.names[0]
    return {"k": doc["k"], "inputs": doc["inputs"], "scores": doc["scores"][name],
            "per_input": (doc.get("per_input") or {}).get(name, {})}


@contextlib.contextmanager
def finished_run_of_stress(stress_dir: Path) -> Iterator[RunSpec | None]:
    """The finished grid run whose stress folder ``stress_dir`` is (``RUN/stress`` of a run with ``spec.json``,
    ``DONE`` and a readable ``metrics.json``), held locked while the block runs, so that no grid worker runs it
    meanwhile; None where ``stress_dir`` is no such folder.  Raises BusyError while a worker holds the run."""
    stress_dir = Path(stress_dir).resolve()
    run = stress_dir.parent
    spec_doc = read_json(run / "spec.json")
    if spec_doc is None or read_json(run / "metrics.json") is None or not (run / "DONE").exists():
        yield None
        return
    spec = RunSpec.from_dict(spec_doc)
    if spec.stress is None or Path(spec.stress.out).resolve() != stress_dir:
        yield None
        return
    lock = try_lock(run / LOCK_FILE)
    if lock is None:
        raise BusyError(f"{run}: {lock_holder(run / LOCK_FILE)} is running it; try again when it ends")
    with lock:
        yield spec


def refresh_stress_metrics(spec: RunSpec) -> Path:
    """Copy the numbers of the finished run's ``stress/stress.json`` into its ``metrics.json`` (``stress``:
    :func:`stress_metrics`), after ``scanmt stress --boundary-only`` measured them again, so that the report and
    the archive see them; returns that ``metrics.json``.  Hold the run (:func:`finished_run_of_stress`)."""
    path = spec.dir / "metrics.json"
    metrics = read_json(path)
    if metrics is None:
        raise DataError(f"{path}: missing or unreadable")
    metrics["stress"] = stress_metrics(spec)
    write_json(path, metrics)
    return path


def search_metrics(path: Path) -> dict[str, Any] | None:
    """``metrics.json`` ``search``: the search statistics a translate step wrote (``--search-stats``:
    :meth:`scanmt.api.translate.TranslateResult.search_stats_json`), or None when the file is missing or
    unreadable (a run translated before the option existed: the report shows "–" for it)."""
    return read_json(path)


def split_metrics(path: Path, search: Path) -> dict[str, Any]:
    """One extra test split's entry of ``metrics.json`` ``test_sets``, from its ``eval.{split}.json`` (and its
    ``{split}.search.json``: ``search``, :func:`search_metrics`).

    ``bleu`` is tokenized BLEU like the top-level ``bleu`` (the paper's); ``sacrebleu`` the detokenized one.
    """
    ev = read_json(path)
    if ev is None:
        raise DataError(f"{path}: missing or unreadable; rerun the grid to redo its evaluation")
    return {"sentences": ev.get("sentences"), "bleu": ev["tok_bleu"]["score"], "sacrebleu": ev["bleu"]["score"],
            "meteor": ev["meteor"]["score"], "rep": ev["rep"]["score"], "drop": ev["drop"]["score"],
            **drop_spread(ev), "search": search_metrics(search)}


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


# --------------------------------------------------------------------------- pool


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


def resume_note(spec: RunSpec) -> str:
    """What a (re)started run picks up, for the pool's ``start`` line ("" for a new run)."""
    if run_status(spec) != "resume":
        return ""
    if (spec.dir / "last.pt").exists() and not stage_marker(spec.dir, "train").exists():
        return ", resuming training from last.pt"
    if metrics_unreadable(spec):
        return f", scoring it again: its {spec.dir / 'metrics.json'} does not parse"
    if (spec.dir / "DONE").exists():
        adding = [f"test set(s) {', '.join(missing_splits(spec))}"] if missing_splits(spec) else []
        adding += ["the stress test"] if missing_stress(spec) else []
        return f", adding {' and '.join(adding)}"
    return ", resuming after its finished steps"


class RunTimes:
    """The step times of a grid's finished runs, by system, and what they make of a run's remaining time."""

    def __init__(self, specs: Sequence[RunSpec] = ()) -> None:
        self.by_system: dict[str, list[StepTimes]] = {}
        for spec in specs:
            if run_status(spec) == "done":
                self.add(spec)

    def add(self, spec: RunSpec) -> None:
        """Add a finished run (one without step times adds nothing)."""
        self.add_dir(spec.system, spec.dir)

    def add_dir(self, system: str, run: Path) -> None:
        """Add the finished run in ``run`` of ``system`` (one without step times adds nothing)."""
        if (times := step_times(run)) is not None:
            self.by_system.setdefault(system, []).append(times)

    def add_others(self, specs: Sequence[RunSpec]) -> None:
        """Add the finished runs in the folders of ``specs`` (``OUT/runs/SYSTEM/seedK``) that are not among them:
        the systems a ``--systems`` left out, and other grids run into the same folder, so that a run of a
        system without finished runs is estimated from the whole folder's."""
        mine = {spec.dir.resolve() for spec in specs}
        for runs in sorted({spec.dir.parent.parent for spec in specs}):
            self.add_folder(runs, skip=mine)

    def add_folder(self, runs: Path, skip: Collection[Path] = ()) -> None:
        """Add the finished runs in ``runs`` (an ``OUT/runs`` folder of ``SYSTEM/seedK``), but those whose
        resolved path is in ``skip``."""
        for run in sorted(runs.glob("*/seed*")):
            if run.is_dir() and run.resolve() not in skip:
                self.add_dir(run.parent.name, run)

    def estimate(self, spec: RunSpec, updates: int | None = None) -> Estimate | None:
        """The expected seconds of what ``spec`` still has to do (:func:`expected_seconds`); its training has
        done ``updates`` updates already (default: those a resume picks up, :func:`updates_done`)."""
        return self.estimate_steps(spec.system, pending_steps(spec),
                                   updates_done(spec.dir) if updates is None else updates, planned_updates(spec))

    def estimate_steps(self, system: str, steps: Sequence[str], updates: int = 0,
                       planned: int | None = None) -> Estimate | None:
        """The expected seconds of the ``steps`` of a run of ``system`` whose training has done ``updates`` (of
        ``planned`` in all, where known: :func:`planned_updates`)."""
        grid = [t for times in self.by_system.values() for t in times]
        return expected_seconds(steps, updates, self.by_system.get(system, []), grid, planned)


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
                m = read_json(spec.dir / "metrics.json")
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
        log = open(spec.dir / "log.txt", "ab")  # noqa: SIM115 - closed when the process ends
        log.write(f"\n##### {time.strftime('%Y-%m-%d %H:%M:%S')} start ({where}, {n} threads)\n".encode())
        log.flush()
        # in a process group of its own: a terminal's Ctrl-C reaches the grid alone, which stops it (stop_all)
        proc = subprocess.Popen([sys.executable, "-m", "scanmt.experiments.runner", str(path), str(n)],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                preexec_fn=stopped_by_me())
        self.running[slot] = _Worker(proc, spec, time.time(), log)
        self.tell(spec, "start", f"({where}, {n} thread{'s' if n > 1 else ''}{note}); log {spec.dir / 'log.txt'}")

    def finish(self, slot: int) -> None:
        w = self.running.pop(slot)
        w.log.close()
        self.free.append(slot)
        self.free.sort()
        spec, dt, rc = w.spec, time.time() - w.started, w.proc.returncode
        if rc == 0:
            self.remember(spec)
            m = read_json(spec.dir / "metrics.json")
            self.results[spec.key] = RunResult(spec, "done", dt, metrics=m)
            self.tell(spec, "done ", f"in {dt / 60:.1f} min: {describe(m)}")
        elif rc == EXIT_BUSY:
            self.results[spec.key] = RunResult(spec, "busy", dt, "another process holds its lock")
            self.tell(spec, "busy ", "another process is running it; left alone", sep=": ")
        else:
            tail = _tail(spec.dir / "log.txt")
            self.results[spec.key] = RunResult(spec, "failed", dt, f"exit status {rc}: {tail}")
            self.tell(spec, "FAILED", f"(exit status {rc}) after {dt / 60:.1f} min; see {spec.dir / 'log.txt'}: {tail}")

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


if __name__ == "__main__":
    sys.exit(worker_main(sys.argv[1:]))
