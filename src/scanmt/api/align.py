"""``align``: eflomal word alignment of prepared data, of new pairs, and AER on a gold set.

Three modes (:func:`align_mode` picks one from the request):

- train (``data``): learn an aligner on DIR's train split at the subword
  and/or word level (source = ``meta.json``'s ``src_lang``), write
  ``ALIGN_DIR/{split}.{level}.align`` (Pharaoh, 0-based ``i-j``) for train
  (from training) and for the other splits (aligned with the learned priors),
  and the aligner itself in ``ALIGN_DIR/{level}/``.  An aligner already there
  that was trained on the same text with the same settings is reused
  (:mod:`scanmt.api.align_train`).
- apply (``model``, ``src``, ``tgt``, ``out``): align new tokenized pairs (at the
  model's level) with the saved priors.
- gold evaluation (``eval_gold``, ``data``): append the gold set's sentences
  (RWTH De–En: ``test.de``, ``test.en``, ``test.talp``) to DIR's training text,
  align everything, and report AER on the gold part (:mod:`scanmt.api.align_gold`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from scanmt.api.arguments import check_type
from scanmt.api.requests import CommandRequest
from scanmt.data.align import MODEL_FILE, Aligner, AlignerSettings, link_stats, write_links
from scanmt.errors import ConfigError
from scanmt.io import check_parallel, read_lines

if TYPE_CHECKING:
    from scanmt.api.align_gold import GoldResult
    from scanmt.api.align_train import AlignTrainResult

_DEFAULTS = AlignerSettings()


@dataclass(frozen=True)
class AlignRequest(CommandRequest):
    """``scanmt align``: train (``data``), apply (``model``, ``src``, ``tgt``, ``out``) or ``eval_gold``."""

    COMMAND = "align"
    data: Path | None = None
    #: train: subword, word or both [both]; apply: the model's level [subword]; eval-gold: [word]
    level: str | None = None
    #: train: ALIGN_DIR [DIR/align]; apply: links file; eval-gold: JSON report
    out: Path | None = None
    splits: tuple[str, ...] | None = None
    force: bool = False
    model: Path | None = None
    src: Path | None = None
    tgt: Path | None = None
    eval_gold: Path | None = None
    symmetrization: str = _DEFAULTS.symmetrization
    eflomal_model: int = _DEFAULTS.model
    samplers: int = _DEFAULTS.n_samplers
    rel_iterations: float = _DEFAULTS.rel_iterations
    null_prior: float = _DEFAULTS.null_prior

    def settings(self) -> AlignerSettings:
        return AlignerSettings(symmetrization=self.symmetrization, model=self.eflomal_model,
                               n_samplers=self.samplers, rel_iterations=self.rel_iterations,
                               null_prior=self.null_prior)


@dataclass
class AlignApplyResult:
    """New pairs aligned with a saved aligner: link statistics (:func:`scanmt.data.align.link_stats`)."""

    pairs: int
    model_dir: Path
    symmetrization: str
    out: Path
    stats: dict


def align_mode(request: AlignRequest) -> str:
    """``train``, ``apply`` or ``eval-gold``; a :class:`ConfigError` for options of two modes."""
    if request.eval_gold is not None:
        if request.model or request.src or request.tgt:
            raise ConfigError("--eval-gold takes --data (the training text), not --model/--src/--tgt")
        return "eval-gold"
    if request.model is not None:
        if request.data is not None:
            raise ConfigError("give either --data (train) or --model (align new pairs), not both")
        return "apply"
    if request.data is None:
        raise ConfigError("nothing to do: give --data DIR (train), --model ALIGN_DIR --src --tgt --out, or --eval-gold")
    if request.src or request.tgt:
        raise ConfigError("--src/--tgt are for aligning new pairs with --model")
    return "train"


def read_pair(src_path: Path, tgt_path: Path) -> tuple[list[list[str]], list[list[str]]]:
    """Two line-parallel files of whitespace-tokenized sentences."""
    src_lines = read_lines(src_path, what="source file")
    tgt_lines = read_lines(tgt_path, what="target file")
    check_parallel(src_lines, tgt_lines, src_path, tgt_path)
    return [ln.split() for ln in src_lines], [ln.split() for ln in tgt_lines]


def apply_aligner(request: AlignRequest) -> AlignApplyResult:
    """Align ``request.src``/``request.tgt`` with the aligner in ``request.model``; links to ``request.out``."""
    if not (request.src and request.tgt and request.out):
        raise ConfigError("--model needs --src FILE --tgt FILE --out FILE")
    model_dir = Path(request.model)
    if not (model_dir / MODEL_FILE).exists():
        level = request.level or "subword"
        if level == "both":
            raise ConfigError("--level both is for training; pick subword or word with --model")
        model_dir = model_dir / level
    aligner = Aligner.load(model_dir)
    src, tgt = read_pair(request.src, request.tgt)
    links = aligner.align(src, tgt)
    write_links(request.out, links)
    stats = link_stats(links, [len(x) for x in src], [len(x) for x in tgt])
    return AlignApplyResult(len(links), model_dir, aligner.settings.symmetrization, Path(request.out), stats)


def align(request: AlignRequest) -> AlignTrainResult | AlignApplyResult | GoldResult:
    """Run ``request`` in its mode (:func:`align_mode`); the gold mode writes its JSON report to ``out``."""
    from scanmt.api.align_gold import evaluate_gold, read_gold
    from scanmt.api.align_train import train_aligner

    check_type("align", "request", request, AlignRequest)
    mode = align_mode(request)
    if mode == "train":
        return train_aligner(request)
    if mode == "apply":
        return apply_aligner(request)
    result = evaluate_gold(read_gold(request))
    if request.out:
        result.write_json(request.out)
    return result
