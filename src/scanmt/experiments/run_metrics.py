"""A finished run's ``metrics.json``: its scores (main split, each extra split, the stress test), search
statistics, training summary, decode settings, commits and machines (:func:`collect_metrics`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scanmt.api.decode import PENALTY_KEYS
from scanmt.errors import DataError
from scanmt.experiments.common import read_json
from scanmt.experiments.layout import EVAL, PENALTIES, STRESS_JSON, eval_json_name, search_json_name, stage_marker
from scanmt.experiments.spec import RunSpec


def collect_metrics(spec: RunSpec) -> dict[str, Any]:
    """``metrics.json`` of a run whose steps have all finished."""
    import yaml

    run = spec.dir
    ev = read_json(run / EVAL)
    if ev is None:
        raise DataError(f"{run / EVAL}: missing or unreadable; rerun the grid to redo evaluation")
    train_dir = Path(spec.model_from) if spec.model_from else run
    train = read_json(stage_marker(train_dir, "train")) or {}
    penalties = None
    if spec.tune_penalties:
        try:
            penalties = yaml.safe_load((run / PENALTIES).read_text(encoding="utf-8"))
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
    source-reference alignment; :mod:`scanmt.experiments.report.drop_noise`) of an ``eval.json``; 1, None and None for one
    from before ``evaluate --drop-samples``."""
    drop = ev["drop"]
    return {"drop_samples": drop.get("samples", 1), "drop_sd": drop.get("score_sd"), "drop_scores": drop.get("scores")}


def stress_metrics(spec: RunSpec) -> dict[str, Any] | None:
    """``metrics.json`` ``stress``: ``{"k": [...], "inputs": {K: n}, "scores": {K: {metric: value}},
    "per_input": {K: counts}}`` of the run's ``stress/stress.json`` (None: no stress test asked for); the per-input
    counts (:data:`scanmt.api.stress.PerInput`) feed the report's paired tests between systems."""
    if spec.stress is None:
        return None
    path = spec.stress.out / STRESS_JSON
    doc = read_json(path)
    if doc is None or spec.stress.names[0] not in (doc.get("scores") or {}):
        raise DataError(f"{path}: missing or unreadable; rerun the grid to redo the stress test")
    name = spec.stress.names[0]
    return {"k": doc["k"], "inputs": doc["inputs"], "scores": doc["scores"][name],
            "per_input": (doc.get("per_input") or {}).get(name, {})}


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
