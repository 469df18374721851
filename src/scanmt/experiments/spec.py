"""A grid run's spec (``RUN/spec.json``): what a grid invocation fixes for all of its runs (:class:`RunContext`),
and one run's config and step requests (:class:`RunSpec`), with the requests as JSON.

Each step is a typed request of :mod:`scanmt.api` (``TrainRequest``, ``TunePenaltiesRequest``,
``TranslateRequest``, ``EvaluateRequest``, ``StressRequest``); ``spec.json`` holds the requests, and
``command.txt`` their command lines (``request.command_line()``), which ``scanmt`` parses back into the same
requests.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from scanmt.api import (CommandRequest, EvaluateRequest, StressRequest, TrainRequest, TranslateRequest,
                        TunePenaltiesRequest)
from scanmt.api.evaluate import check_drop_samples
from scanmt.errors import ConfigError
from scanmt.experiments.layout import checkpoint_of, seed_name

#: step request types by command name (the ``command`` key of a request in ``spec.json``)
STEP_REQUESTS: dict[str, type] = {cls.COMMAND: cls for cls in (TrainRequest, TunePenaltiesRequest, TranslateRequest,
                                                                EvaluateRequest, StressRequest)}


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
        return f"{self.system}/{seed_name(self.seed)}"

    @property
    def checkpoint(self) -> Path:
        return checkpoint_of(self.model_from or self.run_dir)

    def steps(self) -> list[tuple[str, CommandRequest | None]]:
        """``(stage, request)`` of every step in order (request None: the step is not part of this run); the
        ``stress`` step comes last, and only when the run asks for one."""
        return [(stage, self.request(stage)) for stage in stage_names(self.extra_splits, self.stress is not None)]

    def request(self, stage: str) -> CommandRequest | None:
        """The request of ``stage`` (a name of :func:`stage_names`: ``translate.SPLIT`` is an extra split's)."""
        step, _, split = stage.partition(".")
        return self.extra_splits[split][step] if split else getattr(self, step)

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


def stage_names(extra_splits: Iterable[str], stress: bool) -> list[str]:
    """Every stage of a grid run in the order its worker runs them: train, tune, translate, evaluate, then
    ``translate.SPLIT`` and ``evaluate.SPLIT`` of each extra split, and ``stress`` last when the run has one
    (:meth:`RunSpec.steps`; ``experiment status`` for a run that has no spec yet)."""
    names = ["train", "tune", "translate", "evaluate"]
    for split in extra_splits:
        names += [f"translate.{split}", f"evaluate.{split}"]
    return names + (["stress"] if stress else [])


#: the steps that load the run's model (its checkpoint, :attr:`RunSpec.checkpoint`), and so run on a device;
#: ``translate.SPLIT`` is a ``translate`` step
MODEL_STAGES = ("tune", "translate", "stress")

#: the fields of :class:`RunSpec` that hold step requests
STEP_FIELDS = ("train", "tune", "translate", "evaluate", "stress")
