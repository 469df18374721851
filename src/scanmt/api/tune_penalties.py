"""``tune_penalties``: grid search of the length and coverage penalty weights on a split.

The paper (Section 5, CovPenalty) tunes Wu et al.'s ``alpha`` (length) and
``beta`` (coverage) on the validation set over ``{0.0, 0.2, ..., 1.0}``.  Every
batch of the split is encoded once, beam search runs from the cached encoder
outputs for every grid point, each is scored with sacreBLEU against
``DIR/{split}.raw.{tgt}``, and the best setting is written atomically as YAML,
for ``translate --penalties FILE``.

With ``decode.penalty_mode = rescore`` the beam itself does not depend on the
penalties (they only rank finished hypotheses), so the split is decoded once
and every grid point re-ranks the same finished hypotheses: exactly what a
fresh decode per point would give (``redecode`` does that instead).  With
``step`` the beam is run once per grid point.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scanmt.api.arguments import check_type
from scanmt.api.decode import DecodeOverrides, load_penalties  # noqa: F401 - load_penalties: the file's reader
from scanmt.api.requests import CommandRequest, option
from scanmt.config import Range, key_range
from scanmt.errors import ConfigError

if TYPE_CHECKING:
    from scanmt.data.dataset import ParallelData
    from scanmt.decoding.translator import EncodedBatch, Translator

Point = tuple[float, float]  # (alpha, beta)


@dataclass(frozen=True)
class TunePenaltiesRequest(CommandRequest):
    """``scanmt tune-penalties``: tune (alpha, beta) of ``model`` on ``data``'s ``split`` by BLEU."""

    COMMAND = "tune-penalties"
    #: checkpoint (``best.pt`` of a run) and prepared data folder
    model: str
    data: Path
    split: str = "valid"
    #: values of alpha and of beta (comma-separated); ``alphas``/``betas`` override it for one of them
    grid: str = "0,0.2,0.4,0.6,0.8,1.0"
    alphas: str | None = None
    betas: str | None = None
    beam: int = option(5, range=Range(2, key_range("decode.beam").high, note="penalties act in beam search only"))
    #: None: the checkpoint's ``decode.penalty_mode`` / ``decode.coverage_eps``
    penalty_mode: str | None = None
    coverage_eps: float | None = option(None, key="decode.coverage_eps")
    #: rescore mode: run the beam for every grid point instead of re-ranking one decode
    redecode: bool = False
    #: only the first N sentences of the split (0 = all)
    limit: int = option(0, range=Range(0, note="0 = all"))
    batch_size: int | None = option(None, key="decode.batch_size")
    #: where the best setting goes; None: ``CKPT_DIR/penalties.SPLIT.yaml``
    out: Path | None = None
    device: str = "cpu"

    def __post_init__(self) -> None:
        super().__post_init__()
        self.grids()  # the grid values are checked when the request is built

    def grids(self) -> tuple[list[float], list[float]]:
        """The values of alpha and of beta (``alphas``/``betas`` or ``grid``), each checked against its range."""
        return (parse_grid(self.alphas or self.grid, "--alphas" if self.alphas else "--grid", "decode.length_alpha"),
                parse_grid(self.betas or self.grid, "--betas" if self.betas else "--grid", "decode.coverage_beta"))


@dataclass
class TunePenaltiesResult:
    """BLEU per grid point and the best one (written to ``out``)."""

    alphas: list[float]
    betas: list[float]
    bleu: dict[Point, float]
    best: Point
    out: Path
    sentences: int
    penalty_mode: str
    coverage_eps: float
    #: beam searches run, and whether one decode was re-ranked per point
    beam_searches: int
    reranked: bool
    encode_seconds: float
    seconds: float

    def summary(self, request: TunePenaltiesRequest) -> str:
        """What ``scanmt tune-penalties`` prints: BLEU per grid point (rows alpha, columns beta; * the best),
        how it was decoded and the best setting."""
        how = "decoded once, re-ranked per grid point" if self.reranked else "decoded once per grid point"
        a, b = self.best
        return "\n".join([
            f"sacreBLEU on {request.data}/{request.split} ({self.sentences} sentences), beam {request.beam}, "
            f"penalty mode {self.penalty_mode}, eps {self.coverage_eps:g}:",
            self.table(),
            f"  {len(self.bleu)} grid points, {how} (beam searches: {self.beam_searches}); "
            f"encoding {self.encode_seconds:.1f} s, total {self.seconds:.1f} s",
            f"  best: alpha {a:g}, beta {b:g}: BLEU {self.bleu[self.best]:.2f} -> {self.out}",
        ])

    def table(self) -> str:
        """BLEU per grid point: a row per alpha, a column per beta, the best marked with ``*``."""
        head = "alpha \\ beta " + "".join(f"{b:>8.2f}" for b in self.betas)
        rows = [head, "-" * len(head)]
        for a in self.alphas:
            cells = "".join(f"{self.bleu[a, b]:>7.2f}{'*' if (a, b) == self.best else ' '}" for b in self.betas)
            rows.append(f"{a:>12.2f} {cells}")
        return "\n".join(rows)


def parse_grid(text: str, what: str = "--grid", key: str = "decode.length_alpha") -> list[float]:
    """Sorted distinct weights from ``"0,0.2,0.4"``, each in the range of the config ``key`` it sets."""
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ConfigError(f"{what} {text!r}: expected comma-separated numbers, e.g. 0,0.2,0.4") from None
    if not values:
        raise ConfigError(f"{what} is empty")
    for v in values:
        key_range(key).check(f"{what} {text!r}: {key}", v)
    return sorted(set(values))


def _split_data(request: TunePenaltiesRequest, tr: Translator) -> tuple[ParallelData, list[str]]:
    """The split's source sentences (with their oracle fertilities where the model uses them) and references."""
    from scanmt.data.dataset import ParallelData
    from scanmt.data.prepare import read_meta
    from scanmt.io import read_lines

    data_dir, split = request.data, request.split
    meta = read_meta(data_dir)
    s, t = tr.pipeline.src_lang, tr.pipeline.tgt_lang
    if (meta["src_lang"], meta["tgt_lang"]) != (s, t):
        raise ConfigError(f"{request.model} translates {s}->{t} but {data_dir} holds {meta['src_lang']}->{meta['tgt_lang']}")
    src_lines = read_lines(data_dir / f"{split}.raw.{s}", what="source file")
    refs = read_lines(data_dir / f"{split}.raw.{t}", what="reference file")
    if len(src_lines) != len(refs):
        raise ConfigError(f"{data_dir}: {split}.raw.{s} has {len(src_lines)} lines but {split}.raw.{t} {len(refs)}")
    if request.limit:  # >= 0: checked when the request was built
        src_lines, refs = src_lines[: request.limit], refs[: request.limit]
    vocab = tr.pipeline.vocab
    data = ParallelData([vocab.encode(p) for p in tr.pipeline.source_pieces_all(src_lines)], None)
    from scanmt.fertility.strategies import is_oracle, source_from_config

    if tr.model.constrained and is_oracle(tr.fertility_strategy):  # bounds from the split's own alignment
        data = source_from_config(data_dir, tr.config.model.attention.fertility).attach(data, split)
    return data, refs


def _grid_bleu(tr: Translator, encoded: list[EncodedBatch], n: int, refs: list[str], points: list[Point], beam: int,
               rerank: bool) -> tuple[dict[Point, float], int]:
    """sacreBLEU of every grid point from the ``n`` encoded sentences, and the number of beam searches run."""
    import sacrebleu
    from tqdm import tqdm

    from scanmt.decoding.search import rescore

    base = tr.decode
    nbest = tr.search_encoded(encoded, n, beam=beam) if rerank else None
    searches = 1 if rerank else 0
    bleu: dict[Point, float] = {}
    for a, b in tqdm(points, desc="grid", unit="point", leave=False):
        if rerank:
            hyps = rescore(nbest, length_alpha=a, coverage_beta=b, coverage_eps=base.coverage_eps)
        else:
            tr.decode = dataclasses.replace(base, length_alpha=a, coverage_beta=b)
            hyps = [h[0] for h in tr.search_encoded(encoded, n, beam=beam)]
            searches += 1
        bleu[a, b] = sacrebleu.corpus_bleu(tr.texts(hyps), [refs]).score
    tr.decode = base
    return bleu, searches


def _best_setting(request: TunePenaltiesRequest, r: TunePenaltiesResult) -> dict[str, Any]:
    a, b = r.best
    return {
        "length_alpha": a, "coverage_beta": b, "coverage_eps": r.coverage_eps, "penalty_mode": r.penalty_mode,
        "bleu": round(r.bleu[r.best], 4), "beam": request.beam, "split": request.split, "sentences": r.sentences,
        "data": str(request.data), "model": str(request.model),
        "grid": {"alphas": r.alphas, "betas": r.betas,
                 "bleu": [[round(r.bleu[x, y], 4) for y in r.betas] for x in r.alphas]},
    }


def _write_best(request: TunePenaltiesRequest, r: TunePenaltiesResult) -> None:
    import yaml

    from scanmt.io import atomic_open

    with atomic_open(r.out) as fh:
        fh.write(f"# scanmt tune-penalties: best (alpha, beta) on {request.data} {request.split}; "
                 f"use with scanmt translate --penalties {r.out}\n")
        yaml.safe_dump(_best_setting(request, r), fh, sort_keys=False, default_flow_style=None)


def tune_penalties(request: TunePenaltiesRequest) -> TunePenaltiesResult:
    """Grid-search (alpha, beta) by sacreBLEU; writes the best setting as YAML to ``request.out``."""
    from scanmt.api.translate import load_translator

    check_type("tune_penalties", "request", request, TunePenaltiesRequest)
    alphas, betas = request.grids()
    overrides = DecodeOverrides(coverage_eps=request.coverage_eps, penalty_mode=request.penalty_mode or None,
                                batch_size=request.batch_size)
    tr = load_translator(request.model, decode=overrides, device=request.device)
    data, refs = _split_data(request, tr)
    t0 = time.time()
    encoded = tr.encode_all(data)
    t_enc = time.time() - t0
    rerank = tr.decode.penalty_mode == "rescore" and not request.redecode
    points = [(a, b) for a in alphas for b in betas]
    bleu, searches = _grid_bleu(tr, encoded, len(data), refs, points, request.beam, rerank)
    result = TunePenaltiesResult(
        alphas, betas, bleu, max(points, key=lambda p: bleu[p]),  # first of equal BLEU: the smallest penalties
        request.out or Path(request.model).parent / f"penalties.{request.split}.yaml", len(data),
        tr.decode.penalty_mode, tr.decode.coverage_eps, searches, rerank, t_enc, time.time() - t0,
    )
    _write_best(request, result)
    return result
