"""Where a run stands: one function, :func:`run_state`, read by ``experiment run`` (what to skip, resume or start),
``experiment status`` (done, training, decoding, stopped, not started) and ``experiment report`` (finished runs,
and where an unfinished one stopped).

A run is ``done`` when its folder has ``DONE``, a readable ``metrics.json`` and, given its spec, every extra split
and the stress test the spec asks for; ``resume`` when something is there already (``last.pt`` or a step marker);
``new`` otherwise.  The stages in order are :data:`STAGES`, then each extra split's translate and evaluate, then
the stress test (:meth:`scanmt.experiments.spec.RunSpec.steps`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scanmt.experiments.common import read_json
from scanmt.experiments.layout import DONE, LAST_CHECKPOINT, LOG, METRICS, stage_marker
from scanmt.experiments.spec import MODEL_STAGES, RunSpec

#: the main split's stages, in the order a run does them
STAGES = ("train", "tune", "translate", "evaluate")


@dataclass(frozen=True)
class RunState:
    """Where one run stands.

    Attributes:
        dir: its folder.
        status: ``done``, ``resume`` or ``new`` (see the module's docstring).
        done_marker: whether ``DONE`` is written.
        metrics: its ``metrics.json`` (None: missing, or not a JSON object).
        checkpoint: whether ``last.pt`` is there (a training to resume).
        logged: whether ``log.txt`` is there (a worker started it).
        last_stage: the last of :data:`STAGES` with a step marker (None: none).
        spec: its spec as planned now (None: judged from its folder alone).
        missing_splits: the extra splits of its spec its ``metrics.json`` has no numbers for.
        missing_stress: whether its spec asks for a stress test it has not finished with these K values.
    """

    dir: Path
    status: str
    done_marker: bool
    metrics: dict[str, Any] | None
    checkpoint: bool
    logged: bool
    last_stage: str | None
    spec: RunSpec | None = None
    missing_splits: tuple[str, ...] = ()
    missing_stress: bool = False

    @property
    def pending(self) -> tuple[str, ...]:
        """The steps its spec asks for and it has not finished, in order (() without a spec)."""
        return () if self.spec is None else tuple(pending_steps(self.spec))

    @property
    def finished(self) -> bool:
        """Whether it has finished with readable metrics (what the report counts; a spec may ask for more)."""
        return self.done_marker and self.metrics is not None

    @property
    def metrics_unreadable(self) -> bool:
        """Whether it has finished but its ``metrics.json`` is missing or does not parse as a JSON object."""
        return self.done_marker and self.metrics is None

    def stopped_where(self) -> str:
        """Where an unfinished run stopped, in words: ``not started``, ``stopped during training``, ``stopped before
        its first checkpoint`` or ``stopped after STAGE`` (the last of :data:`STAGES` it finished)."""
        where = "not started"
        if self.checkpoint:
            where = "stopped during training"
        elif self.logged:
            where = "stopped before its first checkpoint"
        if self.last_stage is not None:
            where = f"stopped after {self.last_stage}"
        return where


def run_state(run: Path, spec: RunSpec | None = None) -> RunState:
    """Where the run in folder ``run`` stands; ``spec``: its spec as planned now (None: judged from the folder
    alone, as the report does)."""
    done = (run / DONE).exists()
    metrics = read_json(run / METRICS) if done or spec is not None and spec.extra_splits else None
    checkpoint = (run / LAST_CHECKPOINT).exists()
    last = next((s for s in reversed(STAGES) if stage_marker(run, s).exists()), None)
    splits: tuple[str, ...] = ()
    stress = False
    if spec is not None:
        have = (metrics or {}).get("test_sets") or {}
        splits = tuple(split for split in spec.extra_splits if split not in have)
        stress = missing_stress(spec)
    if done and metrics is not None and not splits and not stress:
        status = "done"
    elif checkpoint or last is not None:
        status = "resume"
    else:
        status = "new"
    return RunState(run, status, done, metrics if done else None, checkpoint, (run / LOG).exists(), last, spec,
                    splits, stress)


def missing_splits(spec: RunSpec) -> list[str]:
    """The extra splits of ``spec`` its ``metrics.json`` has no numbers for."""
    if not spec.extra_splits:
        return []
    have = (read_json(spec.dir / METRICS) or {}).get("test_sets") or {}
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
    return run_state(spec.dir).metrics_unreadable


def run_status(spec: RunSpec) -> str:
    """``done``, ``resume`` (something is there already) or ``new``: :attr:`RunState.status` of the run.

    A run finished (DONE) without an extra split it is now asked for is ``resume``: only that
    split's steps are left (the markers of the others exist).  So is one whose ``metrics.json``
    does not parse (cut short, edited): its finished steps are skipped and it is scored again
    (a summary would otherwise count it finished with no numbers).
    """
    return run_state(spec.dir, spec).status


def needs_training(spec: RunSpec) -> bool:
    """Whether the run still has to train its model (shared predictor and fertility caches are for these)."""
    return spec.train is not None and run_status(spec) != "done" and not stage_marker(spec.dir, "train").exists()


def missing_model(spec: RunSpec) -> str | None:
    """Why ``spec`` cannot go on here, or None: a step it has left loads its model (:data:`MODEL_STAGES`), whose
    training has finished (the run's own, or for ``reuse_model`` the run it decodes), yet whose checkpoint is not
    there, as in a run restored from an archive (which keeps no checkpoint): nothing here can make it again."""
    trained_in = Path(spec.model_from or spec.run_dir)
    if spec.checkpoint.is_file() or not stage_marker(trained_in, "train").exists():
        return None
    left = [stage for stage in pending_steps(spec) if stage.partition(".")[0] in MODEL_STAGES]
    if not left:
        return None
    whose = f"the model of {trained_in}" if spec.model_from else "its model"
    return (f"{spec.key}: its steps {', '.join(left)} need {whose} ({spec.checkpoint}), which is not here: that "
            "training finished elsewhere (a run restored from an archive keeps no checkpoint)")


def decoded(spec: RunSpec) -> bool:
    """Whether any decode step of the run has finished (what ``--redecode`` would move aside)."""
    return (spec.dir / DONE).exists() or any(
        stage_marker(spec.dir, stage).exists() for stage, request in spec.steps()[1:] if request is not None)


def redecodable(spec: RunSpec) -> bool:
    """Whether ``--redecode`` would decode the run again: some decode step has finished and its model is
    there (a run restored from an archive has no checkpoint)."""
    return decoded(spec) and spec.checkpoint.is_file()


def resume_note(spec: RunSpec) -> str:
    """What a (re)started run picks up, for the pool's ``start`` line and ``experiment status`` ("" for a new
    run)."""
    st = run_state(spec.dir, spec)
    if st.status != "resume":
        return ""
    if st.checkpoint and not stage_marker(spec.dir, "train").exists():
        return f", resuming training from {LAST_CHECKPOINT}"
    if st.metrics_unreadable:
        return f", scoring it again: its {spec.dir / METRICS} does not parse"
    if st.done_marker:
        adding = [f"test set(s) {', '.join(st.missing_splits)}"] if st.missing_splits else []
        adding += ["the stress test"] if st.missing_stress else []
        return f", adding {' and '.join(adding)}"
    return ", resuming after its finished steps"
