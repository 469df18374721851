"""``fertility``: cached source-token fertilities of a prepared folder, and the fertility predictor.

Three modes (:func:`fertility_mode`):

- compute (``strategy``): ``DIR/fertility/{split}.{strategy}-{tag}.fert`` for each split
  (:func:`compute_split`; cached files are reused when parameters and inputs are unchanged);
  ``guided`` and ``actual`` need the subword links of ``align``, ``predicted`` a predictor;
- train-predictor (``train_predictor``): train the BiLSTM tagger over the aligner's
  fertilities (:func:`train_fertility_predictor`, subword or, with ``set=("level=word",)``,
  word targets);
- eval-predictor (``eval_predictor``): accuracy and MAE against the majority class
  (:func:`evaluate_predictor_split`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scanmt.api.arguments import check_type
from scanmt.api.requests import CommandRequest
from scanmt.errors import ConfigError

if TYPE_CHECKING:
    from scanmt.fertility.predictor.evaluation import PredictorEval
    from scanmt.fertility.strategies import FertilitySource


@dataclass(frozen=True)
class FertilityRequest(CommandRequest):
    """``scanmt fertility``: compute a ``strategy``, ``train_predictor`` into a folder, or ``eval_predictor``."""

    COMMAND = "fertility"
    #: prepared data folder
    data: Path
    #: constant, guided, actual or predicted
    strategy: str | None = None
    #: the fertility of every token (constant only)
    value: float | None = None
    #: predictor checkpoint (predicted only) and what is added to its expected fertility
    predictor: Path | None = None
    add: float = 1.0
    #: train the predictor into this folder
    train_predictor: Path | None = None
    #: predictor config overrides (``key=value``)
    set: tuple[str, ...] = ()
    #: score this predictor checkpoint on ``splits`` [valid]
    eval_predictor: Path | None = None
    #: eval-predictor: also write the numbers as JSON here
    json: Path | None = None
    resume: bool = False
    splits: tuple[str, ...] | None = None
    #: where ``align`` wrote its links [DIR/align]
    align_dir: Path | None = None
    force: bool = False


@dataclass(frozen=True)
class PredictorTrainResult:
    """The end of a predictor training run, and its best validation."""

    out: Path
    stop_reason: str
    step: int
    seconds: float
    best: dict[str, float]
    checkpoint: Path


@dataclass(frozen=True)
class FertilitySplit:
    """One split's fertilities: statistics (:func:`scanmt.data.fertility.fertility_stats`) and the cache file."""

    split: str
    stats: dict[str, Any]
    path: Path
    reused: bool


def fertility_mode(request: FertilityRequest) -> str:
    """``train-predictor``, ``eval-predictor`` or ``compute``; a :class:`ConfigError` for options that clash."""
    if request.train_predictor and request.eval_predictor:
        raise ConfigError("give either --train-predictor or --eval-predictor, not both")
    if request.train_predictor:
        return "train-predictor"
    if request.eval_predictor:
        return "eval-predictor"
    if request.json:
        raise ConfigError("--json is only for --eval-predictor")
    if request.strategy is None:
        raise ConfigError("give --strategy (constant, guided, actual, predicted) or --train-predictor OUT")
    return "compute"


def predictor_config(request: FertilityRequest):
    """The :class:`~scanmt.config.PredictorConfig` of ``request.data`` with ``request.set`` applied."""
    from scanmt.config import PredictorConfig, apply_overrides, set_error
    from scanmt.data.prepare import read_meta

    meta = read_meta(request.data)
    raw: dict = {"data": {"dir": str(request.data), "src_lang": meta["src_lang"], "tgt_lang": meta["tgt_lang"]}}
    if request.align_dir:
        raw["align_dir"] = str(request.align_dir)
    apply_overrides(raw, list(request.set))
    try:
        return PredictorConfig.from_dict(raw)
    except ConfigError as exc:
        raise set_error(exc, list(request.set)) from None


def train_fertility_predictor(request: FertilityRequest) -> PredictorTrainResult:
    """Train the fertility predictor into ``request.train_predictor`` (``resume`` continues a killed run)."""
    from scanmt.training.fertility_trainer import train_predictor

    out = Path(request.train_predictor)
    res = train_predictor(predictor_config(request), out, resume=request.resume)
    best = max(res.progress.history, key=lambda h: h["valid/accuracy"])
    return PredictorTrainResult(out, res.stop_reason, res.progress.step, res.progress.elapsed, best, res.checkpoint)


def eval_splits(request: FertilityRequest) -> list[str]:
    return list(request.splits or ["valid"])


def evaluate_predictor_split(request: FertilityRequest, split: str) -> PredictorEval:
    """Score the predictor ``request.eval_predictor`` on one split."""
    from scanmt.fertility.predictor.evaluation import evaluate_predictor
    from scanmt.fertility.strategies import require_predictor

    path = require_predictor(request.eval_predictor, key="--eval-predictor")
    return evaluate_predictor(path, request.data, split=split, add=request.add, align_dir=request.align_dir)


def write_predictor_evals(path: str | Path, predictor: Path, evals: list[PredictorEval]) -> None:
    from scanmt.io import atomic_open

    with atomic_open(path) as fh:
        json.dump({"predictor": str(predictor), "results": [r.as_dict() for r in evals]}, fh, indent=2)
        fh.write("\n")


def compute_plan(request: FertilityRequest) -> tuple[dict, list[str], FertilitySource]:
    """``(meta, splits, the strategy on the folder)`` of a compute request, checked."""
    from scanmt.data.prepare import read_meta
    from scanmt.fertility.strategies import FertilityOptions, fertility_source

    options = FertilityOptions(value=request.value, predictor=request.predictor, add=request.add,
                               align_dir=request.align_dir, predictor_key="--predictor", cli=True)
    source = fertility_source(request.data, request.strategy, options)
    meta = read_meta(request.data)
    return meta, list(request.splits or meta.get("splits") or ["train", "valid", "test"]), source


def compute_split(request: FertilityRequest, split: str, source: FertilitySource) -> FertilitySplit:
    """The fertilities of one split (computed or read from the cache)."""
    from scanmt.data.fertility import fertility_stats

    res = source.compute(split, force=request.force)
    return FertilitySplit(split, fertility_stats(res.values), res.path, res.reused)


def fertility(request: FertilityRequest) -> PredictorTrainResult | list[PredictorEval] | list[FertilitySplit]:
    """Run ``request`` in its mode (:func:`fertility_mode`); eval-predictor writes ``request.json`` when given."""
    check_type("fertility", "request", request, FertilityRequest)
    mode = fertility_mode(request)
    if mode == "train-predictor":
        return train_fertility_predictor(request)
    if mode == "eval-predictor":
        evals = [evaluate_predictor_split(request, s) for s in eval_splits(request)]
        if request.json:
            write_predictor_evals(request.json, Path(request.eval_predictor), evals)
        return evals
    _, splits, source = compute_plan(request)
    return [compute_split(request, s, source) for s in splits]
