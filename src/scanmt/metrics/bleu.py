"""BLEU through sacrebleu: detokenized cased BLEU, the paper's tokenized BLEU, paired bootstrap.

- :func:`detok_bleu`: sacrebleu's standard BLEU on detokenized, cased text
  (its own ``13a`` tokenizer); the signature makes the number reproducible.
- :func:`tokenized_bleu`: BLEU on Moses-tokenized, lowercased text with no
  further tokenization (``tokenize="none"``, ``lowercase=True``), which is what
  ``multi-bleu.perl -lc`` computes and what the paper reports.  The caller
  tokenizes (``scanmt.data.tokenize``).
- :func:`paired_bootstrap`: sacrebleu's paired bootstrap resampling
  (Koehn 2004) of a second system against a baseline, with a p-value
  (None over fewer than :data:`scanmt.metrics.paired.MIN_INPUTS` sentences,
  where the resamples take a handful of values; print it with
  :func:`scanmt.metrics.paired.format_p`).

Scores are on the 0–100 scale.  One reference per sentence.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Sequence

from sacrebleu.metrics import BLEU
from sacrebleu.significance import PairedTest

from scanmt.errors import DataError
from scanmt.metrics.paired import MIN_INPUTS


@dataclass(frozen=True)
class BleuResult:
    """A corpus BLEU score.

    Attributes:
        score: BLEU, 0–100.
        signature: sacrebleu's signature string (settings and version).
        details: sacrebleu's one-line summary (n-gram precisions, BP, lengths).
    """

    score: float
    signature: str
    details: str


@dataclass(frozen=True)
class BootstrapResult:
    """Paired bootstrap of system 2 against system 1 (the baseline).

    Attributes:
        score1, score2: corpus BLEU of each system.
        p_value: probability, under resampling, that the difference is due to
            chance (sacrebleu's estimate; small means significant); None with
            fewer than :data:`~scanmt.metrics.paired.MIN_INPUTS` sentences (the
            test was not run: print it with :func:`scanmt.metrics.paired.format_p`).
        samples: number of bootstrap resamples asked for.
        signature: sacrebleu's signature, including the seed and sample count
            (the plain BLEU signature when the test was not run).
    """

    score1: float
    score2: float
    p_value: float | None
    samples: int
    signature: str


def _check(hyps: Sequence[str], refs: Sequence[str]) -> None:
    if len(hyps) != len(refs):
        raise DataError(f"BLEU: {len(hyps)} hypotheses but {len(refs)} references")
    if not hyps:
        raise DataError("BLEU: no sentences")


def _bleu(tokenize: str | None, lowercase: bool) -> BLEU:
    # force=True on pre-tokenized input: the text is tokenized on purpose (no "forgot to detokenize" warning)
    return BLEU(tokenize=tokenize, lowercase=lowercase, force=tokenize == "none")


def _score(metric: BLEU, hyps: Sequence[str], refs: Sequence[str]) -> BleuResult:
    _check(hyps, refs)
    res = metric.corpus_score(list(hyps), [list(refs)])
    return BleuResult(score=float(res.score), signature=str(metric.get_signature()), details=res.format())


def detok_bleu(hyps: Sequence[str], refs: Sequence[str]) -> BleuResult:
    """sacrebleu BLEU on detokenized, cased text (default ``13a`` tokenizer)."""
    return _score(_bleu(None, False), hyps, refs)


def tokenized_bleu(hyps_tok: Sequence[str], refs_tok: Sequence[str]) -> BleuResult:
    """BLEU on already Moses-tokenized text, lowercased, no further tokenization (≈ multi-bleu -lc)."""
    return _score(_bleu("none", True), hyps_tok, refs_tok)


def paired_bootstrap(
    hyps1: Sequence[str],
    hyps2: Sequence[str],
    refs: Sequence[str],
    *,
    tokenized: bool = False,
    samples: int = 1000,
) -> BootstrapResult:
    """Paired bootstrap resampling of BLEU, system 2 vs. baseline system 1.

    Args:
        tokenized: score as :func:`tokenized_bleu` (inputs already tokenized);
            otherwise as :func:`detok_bleu`.
        samples: bootstrap resamples.  The seed is sacrebleu's
            (``SACREBLEU_SEED``, default 12345), so results are reproducible.

    With fewer than :data:`~scanmt.metrics.paired.MIN_INPUTS` sentences the
    test is not run: the two scores, and ``p_value`` None (over one sentence
    every resample is that sentence and sacrebleu's p would be
    ``1 / (1 + samples)`` whatever the difference).
    """
    _check(hyps1, refs)
    _check(hyps2, refs)
    if samples < 1:
        raise DataError(f"paired bootstrap: samples must be >= 1, got {samples}")
    metric = _bleu("none", True) if tokenized else _bleu(None, False)
    if len(refs) < MIN_INPUTS:
        score1, score2 = (_score(metric, hyps, refs) for hyps in (hyps1, hyps2))
        return BootstrapResult(score1=score1.score, score2=score2.score, p_value=None, samples=samples,
                               signature=score1.signature)
    quiet = logging.getLogger("sacrebleu")  # its INFO lines ("Pre-computing BLEU statistics ...") on every call
    level = quiet.level
    quiet.setLevel(max(level, logging.WARNING))
    try:
        test = PairedTest(
            [("baseline", list(hyps1)), ("system2", list(hyps2))],
            {"BLEU": metric},
            [list(refs)],
            test_type="bs",
            n_samples=samples,
        )
        sigs, scores = test()
    finally:
        quiet.setLevel(level)
    base, other = scores["BLEU"][0], scores["BLEU"][1]
    return BootstrapResult(
        score1=float(base.score),
        score2=float(other.score),
        p_value=float(other.p_value),
        samples=samples,
        signature=str(sigs["BLEU"]),
    )
