"""``evaluate``: score any system's output with every metric the papers report.

Text metrics (need ``hyp`` and ``ref``, one sentence per line, detokenized
unless ``tokenized``):

- ``bleu``: sacrebleu on detokenized cased text, with its signature;
- ``tok-bleu``: the paper's BLEU on Moses-tokenized, lowercased text (≈ ``multi-bleu.perl -lc``);
- ``meteor``: nltk METEOR with WordNet synonyms (mean of sentence scores);
- ``rep``: REP-score (repeated bigrams and words) on tokenized text;
- ``drop``: DROP-score (needs ``src`` and ``align_model``: a word-level ``align`` model); the
  aligner samples at random, so ``drop_samples`` > 1 averages DROP over that many alignments of each side;
- with ``hyp2``: paired bootstrap resampling of BLEU, system 2 vs. ``hyp``.

Attention metrics (need ``attention``, from ``translate``'s ``attention_out``):

- ``attn-stats``: exact-zero share, attended tokens per step, cumulative
  attention vs. fertility, never-attended source tokens;
- ``aer``, ``saer``: with ``gold_align``; the attention file must come from
  forced decoding of the gold target sentences.

Every metric is selected automatically when its inputs are given; ``metrics``
restricts (or insists on) a list.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from scanmt.api.arguments import check_type
from scanmt.api.evaluate_attention import attention_metrics
from scanmt.api.evaluate_text import Row, text_metrics
from scanmt.api.requests import CommandRequest
from scanmt.errors import ConfigError
from scanmt.io import atomic_open, check_outputs

TEXT_METRICS = ("bleu", "tok-bleu", "meteor", "rep", "drop")
ATTN_METRICS = ("attn-stats", "aer", "saer")
METRICS = TEXT_METRICS + ATTN_METRICS


@dataclass(frozen=True)
class EvaluateRequest(CommandRequest):
    """``scanmt evaluate``: the files to score (see the module docstring) and how."""

    COMMAND = "evaluate"
    hyp: Path | None = None
    ref: Path | None = None
    src: Path | None = None
    hyp2: Path | None = None
    #: the text files are Moses-tokenized already
    tokenized: bool = False
    src_lang: str = "de"
    tgt_lang: str = "en"
    #: word-level aligner of ``align`` (ALIGN_DIR or ALIGN_DIR/word), for drop
    align_model: Path | None = None
    #: drop: align source-reference and source-output this many times each and average DROP over the pairings
    drop_samples: int = 1
    bootstrap_samples: int = 1000
    no_synonyms: bool = False
    attention: Path | None = None
    gold_align: Path | None = None
    gold_one_indexed: bool = False
    unattended_threshold: float = 0.1
    #: metrics to compute (from :data:`METRICS`); None: every metric whose inputs are given
    metrics: tuple[str, ...] | None = None
    #: also write the results as JSON here
    json: Path | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        unknown = [m for m in self.metrics or () if m not in METRICS]
        if unknown:
            raise ConfigError(f"--metrics: unknown metric {unknown[0]!r}; choose from {', '.join(METRICS)}")


@dataclass
class EvaluateResult:
    """The scores as table rows ``(metric, value, note)`` and as the JSON document."""

    rows: list[Row]
    results: dict[str, Any]
    title: str

    def write_json(self, path: str | Path) -> None:
        """The results as JSON, written atomically."""
        with atomic_open(path) as fh:
            json.dump(self.results, fh, indent=2, ensure_ascii=False)
            fh.write("\n")

    def summary(self, request: EvaluateRequest | None = None) -> str:
        """What ``scanmt evaluate`` prints: the title and the table, then (when ``request`` names a JSON file,
        which :func:`evaluate` has written) the line :func:`json_written`."""
        text = f"{self.title}\n{format_table(self.rows)}"
        if request is not None and request.json is not None:
            text += "\n" + json_written(request.json)
        return text


def format_table(rows: list[Row]) -> str:
    """Rows ``(metric, value, note)`` as an aligned plain-text table."""
    w0 = max([len("metric")] + [len(r[0]) for r in rows])
    w1 = max([len("value")] + [len(r[1]) for r in rows])
    lines = [f"{'metric':<{w0}}  {'value':>{w1}}  note", f"{'-' * w0}  {'-' * w1}  {'-' * 4}"]
    lines += [f"{m:<{w0}}  {v:>{w1}}  {n}" for m, v, n in rows]
    return "\n".join(lines)


def json_written(path: str | Path) -> str:
    """The line that tells where the JSON results went."""
    return f"results written to {path}"


def check_drop_samples(k: object) -> None:
    """Raise :class:`ConfigError` unless ``k`` (``--drop-samples``) is a positive integer."""
    if not (isinstance(k, int) and k >= 1):
        raise ConfigError(f"--drop-samples must be a positive integer, got {k!r}")


def select_metrics(request: EvaluateRequest) -> list[str]:
    """The metrics to compute: those asked for, or every one whose inputs are given."""
    has_text = request.hyp is not None and request.ref is not None
    if (request.hyp is None) != (request.ref is None):
        raise ConfigError("--hyp and --ref go together")
    available = {
        "bleu": has_text,
        "tok-bleu": has_text,
        "meteor": has_text,
        "rep": has_text,
        "drop": has_text and request.src is not None and request.align_model is not None,
        "attn-stats": request.attention is not None,
        "aer": request.attention is not None and request.gold_align is not None,
        "saer": request.attention is not None and request.gold_align is not None,
    }
    needs = {
        "drop": "--hyp, --ref, --src and --align-model",
        "attn-stats": "--attention",
        "aer": "--attention and --gold-align",
        "saer": "--attention and --gold-align",
    }
    if request.metrics:
        for m in request.metrics:
            if not available[m]:
                raise ConfigError(f"metric {m} needs {needs.get(m, '--hyp and --ref')}")
        return list(dict.fromkeys(request.metrics))
    chosen = [m for m in METRICS if available[m]]
    if not chosen:
        raise ConfigError("nothing to evaluate: give --hyp and --ref, and/or --attention")
    if request.hyp2 is not None and not has_text:
        raise ConfigError("--hyp2 needs --hyp and --ref")
    return chosen



def missing_drop(request: EvaluateRequest, metrics: Sequence[str]) -> list[Row]:
    """A DROP row that says why DROP was not computed, when the metrics were not named and only one of the two
    inputs it needs besides the texts was given (``--src`` without ``--align-model``, or the reverse)."""
    if "drop" in metrics or request.metrics or request.hyp is None:
        return []
    missing = [option for option, value in (("--src", request.src), ("--align-model", request.align_model))
               if value is None]
    if len(missing) != 1:
        return []
    return [("DROP", "-", f"not computed: it needs {missing[0]} too (the source text and a word-level aligner "
                          "of `scanmt align`)")]


def score(request: EvaluateRequest) -> EvaluateResult:
    """Compute the metrics of ``request`` (no file written; :func:`evaluate` also writes ``request.json``)."""
    metrics = select_metrics(request)
    check_drop_samples(request.drop_samples)
    inputs = {f"--{k.replace('_', '-')}": getattr(request, k) for k in ("hyp", "ref", "src", "hyp2", "attention",
                                                                        "gold_align")}
    check_outputs({"--json": request.json}, inputs)  # before the work, not after it
    t0 = time.perf_counter()
    rows: list[Row] = []
    inputs = ("hyp", "ref", "src", "hyp2", "attention", "gold_align", "align_model")
    results: dict[str, Any] = {
        "inputs": {k: (str(getattr(request, k)) if getattr(request, k) is not None else None) for k in inputs},
        "tokenized_input": request.tokenized,
        "languages": [request.src_lang, request.tgt_lang],
        "metrics": metrics,
    }
    if any(m in TEXT_METRICS for m in metrics) or request.hyp2 is not None:
        text_metrics(request, metrics, rows, results)
    if any(m in ATTN_METRICS for m in metrics):
        attention_metrics(request, metrics, rows, results)
    rows += missing_drop(request, metrics)
    results["seconds"] = time.perf_counter() - t0
    title = f"scanmt evaluate: {request.hyp or request.attention}"
    if "sentences" in results:
        title += f" ({results['sentences']} sentences)"
    return EvaluateResult(rows, results, title)


def evaluate(request: EvaluateRequest) -> EvaluateResult:
    """Score a translation (:func:`score`) and write the JSON to ``request.json`` when it is given."""
    check_type("evaluate", "request", request, EvaluateRequest)
    result = score(request)
    if request.json is not None:
        result.write_json(request.json)
    return result
