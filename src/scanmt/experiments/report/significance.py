"""The report's paired tests of BLEU: per system and seed, sacrebleu's paired bootstrap of its tokenized BLEU
against its baseline's run with the same seed (:func:`significance`), and the table cell that shows them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from scanmt.experiments.baselines import Baselines, as_baselines
from scanmt.experiments.report.collection import SystemResults, Texts, hyp_lines, tokenize_all
from scanmt.metrics.paired import format_p


@dataclass(frozen=True)
class SeedTest:
    """Paired bootstrap of one seed's tokenized BLEU against its baseline's run with the same seed."""

    seed: int
    delta: float  #: system's BLEU minus the baseline's, in BLEU points
    p: float | None  #: sacrebleu's p-value; 1.0 when the two scores are equal; None over too few sentences


def significance(out: Path, rec: dict[str, Any], texts: Texts, systems: Sequence[SystemResults],
                 baseline: str | Baselines, samples: int) -> dict[str, list[SeedTest]]:
    """Per system, a :class:`SeedTest` for each finished seed whose baseline run of the same seed has outputs.

    ``baseline``: the system every other one is compared with, or each system's own (:mod:`scanmt.experiments.
    baselines`); a system that is its own baseline, or whose baseline is not among ``systems``, gets no entry.
    Seeds pair runs that share everything but the system (data order, initialisation seed), so each
    seed is tested against its own baseline run; a seed the baseline lacks is left out.
    """
    from scanmt.metrics.bleu import paired_bootstrap

    by_name = {s.name: s for s in systems}
    baselines = as_baselines(list(by_name), baseline)
    base_tok: dict[str, dict[int, list[str]]] = {}
    for name in sorted({b for n, b in baselines.items() if b != n and b in by_name}):
        base_tok[name] = {}
        for r in by_name[name].runs:
            hyp = hyp_lines(out, rec, name, r["seed"])
            if hyp is not None:
                base_tok[name][r["seed"]] = tokenize_all(hyp, texts.tgt_lang)
    tests: dict[str, list[SeedTest]] = {}
    for s in systems:
        name = baselines.get(s.name, s.name)
        base = base_tok.get(name) if name != s.name else None
        if base is None:
            continue
        tests[s.name] = []
        for k in sorted(r["seed"] for r in s.runs):
            hyp = hyp_lines(out, rec, s.name, k)
            if k not in base or hyp is None:
                continue
            b = paired_bootstrap(base[k], tokenize_all(hyp, texts.tgt_lang), texts.ref_tok, tokenized=True,
                                 samples=samples)
            # sacrebleu counts resampled differences strictly above the observed one, so a zero difference
            # (e.g. identical outputs) would get p = 1/(samples+1); no difference is never significant.  None:
            # fewer than MIN_INPUTS sentences, the test was not run
            p_value = 1.0 if b.score1 == b.score2 and b.p_value is not None else b.p_value
            tests[s.name].append(SeedTest(k, b.score2 - b.score1, p_value))
    return tests


def p_cell(name: str, baselines: Baselines, tests: dict[str, list[SeedTest]]) -> str:
    """``+0.99 (0.018 †) / +0.73 (0.065)``: per seed, the BLEU difference to the baseline and its p-value
    (:func:`scanmt.metrics.paired.format_p`: its n/a text over too few sentences)."""
    if baselines.get(name) == name:
        return "baseline"
    if not tests.get(name):
        return "n/a"
    return " / ".join(f"{t.delta:+.2f} ({format_p(t.p, significant_below=0.05)})" for t in tests[name])
