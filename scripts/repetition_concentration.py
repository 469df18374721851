"""Which sentences carry a system's extra repetitions and its cut-short outputs, against a baseline? (docs/kftt.md)

Corpus REP is ``100 · Σ σ_i / reference words`` (:mod:`scanmt.metrics.rep`), so a difference in REP is a sum
of per-sentence differences ``σ_i(B) − σ_i(A)``.  For two systems' outputs of one test set this prints:

- each system's REP, its runaway sentences (a loop: ``σ_i`` at least ``--runaway-min`` and at least
  ``--runaway-frac`` of the output's tokens) with the share of ``Σ σ`` they hold, and its cut-short outputs
  (fewer than a third of the reference's tokens, references of 4 tokens or more), of which how many are a
  number and nothing else (an output that stops after a list item's number: "27" for "27. Fukuroi-juku ...");
- in how many sentences B's ``σ_i`` is above, below or equal to A's, and how much of ``Σ σ(B) − Σ σ(A)`` the
  k sentences where B gains most carry (k = 10, 20, 50);
- with ``--src``: REP of both systems on the sentences within the training length (at most ``--max-src-words``
  source words, the cleaning's limit; KFTT's is 40 MeCab words) and on those beyond it.

Tokens are the tokenized text REP reads (Moses for English, MeCab for Japanese: ``scanmt.data.tokenize``).

    python scripts/repetition_concentration.py --ref test.raw.en --hyp softmax/test.hyp.en csparsemax/test.hyp.en \\
        --names softmax csparsemax --src test.raw.ja --src-lang ja --max-src-words 40
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from scanmt.api.evaluate_text import check_line_counts, read_hypotheses
from scanmt.data.tokenize import tokenize_all
from scanmt.experiments.report.lengths import is_cut_short
from scanmt.io import read_lines
from scanmt.metrics.rep import rep_sentence

NUMBER = re.compile(r"\d+\.?")


@dataclass
class SystemStats:
    """Per-sentence counts of one system's output (``[N]`` arrays over the test sentences)."""

    sigma: np.ndarray  # REP's sentence score σ_i
    tokens: np.ndarray  # tokens of the output
    cut_short: np.ndarray  # fewer than a third of the reference's tokens (reference of 4 or more: is_cut_short)
    number_only: np.ndarray  # the output is one number (with or without a full stop)
    runaway: np.ndarray  # σ_i >= runaway_min and σ_i >= runaway_frac × tokens


def system_stats(hyp: list[list[str]], ref: list[list[str]], *, runaway_min: float,
                 runaway_frac: float) -> SystemStats:
    """The counts of one system from its tokenized output and the tokenized references."""
    sigma = np.array([rep_sentence(h, r) for h, r in zip(hyp, ref)], dtype=np.float64)
    tokens = np.array([len(h) for h in hyp])
    cut_short = np.array([is_cut_short(len(h), len(r)) for h, r in zip(hyp, ref)], dtype=bool)
    number_only = np.array([bool(NUMBER.fullmatch("".join(h))) for h in hyp])
    return SystemStats(sigma=sigma, tokens=tokens, cut_short=cut_short,
                       number_only=number_only,
                       runaway=(sigma >= runaway_min) & (sigma >= runaway_frac * tokens))


def rep_of(sigma: np.ndarray, ref_len: np.ndarray, keep: np.ndarray) -> float:
    """Corpus REP over the sentences in ``keep``."""
    return 100.0 * float(sigma[keep].sum()) / max(int(ref_len[keep].sum()), 1)


def report(names: tuple[str, str], a: SystemStats, b: SystemStats, ref_len: np.ndarray,
           src_words: np.ndarray | None, max_src_words: int, tops: tuple[int, ...] = (10, 20, 50)) -> list[str]:
    """The printed lines (module docstring)."""
    n = len(ref_len)
    every = np.ones(n, dtype=bool)
    lines = [f"{n} sentences, {int(ref_len.sum())} reference tokens"]
    for name, s in zip(names, (a, b)):
        run = s.runaway
        lines.append(
            f"{name}: REP {rep_of(s.sigma, ref_len, every):.2f}, {int(s.tokens.sum())} output tokens; runaway sentences "
            f"{int(run.sum())} holding {s.sigma[run].sum() / max(s.sigma.sum(), 1e-12):.0%} of its σ; cut-short "
            f"outputs {int(s.cut_short.sum())}, of which a number alone {int((s.cut_short & s.number_only).sum())} "
            f"(number-only outputs in all: {int(s.number_only.sum())})")
    diff = b.sigma - a.sigma
    order = np.argsort(-diff, kind="stable")
    lines.append(f"{names[1]} − {names[0]}: Σσ {diff.sum():+.0f}; σ higher in {int((diff > 0).sum())} sentences, "
                 f"lower in {int((diff < 0).sum())}, equal in {int((diff == 0).sum())}")
    for k in tops:
        if k < n:
            lines.append(f"  the {k} sentences where {names[1]} gains most carry {diff[order[:k]].sum():+.0f}; "
                         f"without them Σσ differs by {diff[order[k:]].sum():+.0f} "
                         f"(REP {rep_of(a.sigma, ref_len, np.isin(np.arange(n), order[k:])):.2f} against "
                         f"{rep_of(b.sigma, ref_len, np.isin(np.arange(n), order[k:])):.2f})")
    neither = ~(a.runaway | b.runaway)
    lines.append(f"  where neither runs away ({int(neither.sum())} sentences): REP {rep_of(a.sigma, ref_len, neither):.2f} "
                 f"against {rep_of(b.sigma, ref_len, neither):.2f}; output tokens {int(a.tokens[neither].sum())} "
                 f"against {int(b.tokens[neither].sum())}")
    if src_words is not None:
        for label, keep in ((f"at most {max_src_words} source words", src_words <= max_src_words),
                            (f"over {max_src_words} source words", src_words > max_src_words)):
            ra, rb = rep_of(a.sigma, ref_len, keep), rep_of(b.sigma, ref_len, keep)
            ratio = f" ({rb / ra:.2f}×)" if ra > 0 else ""
            lines.append(f"  {label} ({int(keep.sum())} sentences, {int(src_words[keep].sum())} source words): "
                         f"REP {ra:.2f} against {rb:.2f}{ratio}; runaways {int(a.runaway[keep].sum())} against "
                         f"{int(b.runaway[keep].sum())}; cut short {int(a.cut_short[keep].sum())} against "
                         f"{int(b.cut_short[keep].sum())}")
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ref", type=Path, required=True, help="reference translations, one per line")
    ap.add_argument("--hyp", type=Path, nargs=2, required=True, metavar=("BASELINE", "SYSTEM"),
                    help="the two systems' outputs, line-aligned with --ref")
    ap.add_argument("--names", nargs=2, metavar=("BASELINE", "SYSTEM"),
                    help="the two systems' names in the printout (default: the --hyp paths)")
    ap.add_argument("--src", type=Path, help="source sentences: split REP by --max-src-words")
    ap.add_argument("--src-lang", default="de", help="source language, for its word tokenizer (default: de)")
    ap.add_argument("--tgt-lang", default="en", help="target language, for its word tokenizer (default: en)")
    ap.add_argument("--max-src-words", type=int, default=40,
                    help="the training data's longest source, in words (default: 40, KFTT's cleaning)")
    ap.add_argument("--runaway-min", type=float, default=8.0, help="a runaway sentence's least σ (default: 8)")
    ap.add_argument("--runaway-frac", type=float, default=0.25,
                    help="a runaway sentence's least σ per output token (default: 0.25)")
    args = ap.parse_args(argv)
    ref_raw = read_lines(args.ref, what="reference file")
    ref = [x.split() for x in tokenize_all(ref_raw, args.tgt_lang)]
    ref_len = np.array([len(r) for r in ref])
    stats = []
    for path in args.hyp:
        hyp = [x.split() for x in tokenize_all(read_hypotheses(path, len(ref_raw), args.ref), args.tgt_lang)]
        stats.append(system_stats(hyp, ref, runaway_min=args.runaway_min, runaway_frac=args.runaway_frac))
    src_words = None
    if args.src is not None:
        src_raw = read_lines(args.src, what="source file")
        check_line_counts(args.src, len(src_raw), args.ref, len(ref_raw))
        src_words = np.array([len(x.split()) for x in tokenize_all(src_raw, args.src_lang)])
    names = tuple(args.names) if args.names else (str(args.hyp[0]), str(args.hyp[1]))
    print("\n".join(report(names, stats[0], stats[1], ref_len, src_words, args.max_src_words)))


if __name__ == "__main__":
    main()
