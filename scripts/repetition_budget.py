"""Where do a system's repetitions get their attention from? (docs/results.md, section 6)

For each attention file written by ``scanmt translate --attention-out``, walks every output step and
counts the output tokens that close a bigram already produced earlier in the same sentence (a
repetition), then reports:

- the share of those tokens whose most-attended column is the sink (files with one): a repetition
  that attends to no source word most;
- of the others, the share whose most-attended source token had already received at least ``--used``
  attention before that step (the source word is being translated a second time);
- of the others, the share whose most-attended source token has a fertility bound of at least
  ``--bound`` (a bound that leaves room for a second translation; unbounded transforms count as
  infinite);
- the share of source tokens (sink excluded) whose total attention over the sentence reaches
  ``--bound``, and the mean finite bound;
- the largest weight on a source token (sink excluded), mean over the repeated tokens and over the other
  output tokens (the first and ``</s>`` left out): a repetition made with flat attention has a small one;
- over the same tokens, the weight on the sink (files with one), and the weight on source tokens that had
  already received half their bound or more (bounded files): a bounded layer that has little fresh source
  left to attend puts its weight there;
- a second table: the repeated tokens that attend to a source token most, counted by the attention that
  token had already received (bins with edges ``EDGES``), to see which repetitions a bound near 2 can stop.

    python scripts/repetition_budget.py ../grid/table1/runs/{softmax,csparsemax}/seed1/test.attn.npz
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from scanmt.data.attention_file import AttentionFile

#: bin edges of the attention a repeated token's source word had already received
EDGES = (0.5, 1.0, 1.5, 2.0)


def budget_stats(path: Path, used: float, bound: float) -> dict[str, float]:
    """Statistics of one attention file (see the module docstring)."""
    repeats = on_sink = retranslated = roomy = 0
    prior_bins = [0] * (len(EDGES) + 1)
    src_total = src_over = 0
    finite_bounds: list[float] = []
    # repeated? -> per output token: largest source weight, weight on the sink, weight on half-spent source tokens
    peaks: dict[bool, list[float]] = {True: [], False: []}
    sinks: dict[bool, list[float]] = {True: [], False: []}
    spent: dict[bool, list[float]] = {True: [], False: []}
    for sent in AttentionFile(path):
        attn = np.asarray(sent.attention, dtype=np.float64)
        n_src = attn.shape[1] - (1 if sent.has_sink else 0)
        bounds = (np.asarray(sent.fertility, dtype=np.float64) if sent.fertility is not None
                  else np.full(attn.shape[1], np.inf))
        cum = np.zeros(attn.shape[1])
        seen: set[tuple[str, str]] = set()
        for t, token in enumerate(sent.hyp):
            if t > 0:
                bigram, j = (sent.hyp[t - 1], token), int(attn[t].argmax())
                repeated = bigram in seen
                if token != "</s>" and n_src:
                    peaks[repeated].append(float(attn[t, :n_src].max()))
                    if sent.has_sink:
                        sinks[repeated].append(float(attn[t, n_src]))
                    if sent.fertility is not None:
                        half = cum[:n_src] >= 0.5 * bounds[:n_src]
                        spent[repeated].append(float(attn[t, :n_src][half].sum()))
                if repeated:
                    repeats += 1
                    if j >= n_src:  # the sink: no source word's statistics
                        on_sink += 1
                    else:
                        retranslated += cum[j] >= used
                        roomy += bounds[j] >= bound
                        prior_bins[int(np.searchsorted(EDGES, cum[j], side="right"))] += 1
                seen.add(bigram)
            cum += attn[t]
        src_total += n_src
        src_over += int((cum[:n_src] >= bound).sum())
        finite_bounds.extend(b for b in bounds[:n_src] if np.isfinite(b))
    return {
        "repeated_tokens": repeats,
        "sink_argmax": on_sink / max(repeats, 1),
        "retranslated": retranslated / max(repeats - on_sink, 1),
        "bound_room": roomy / max(repeats - on_sink, 1),
        "src_over_bound": src_over / max(src_total, 1),
        "mean_bound": float(np.mean(finite_bounds)) if finite_bounds else float("inf"),
        "prior_attention_bins": prior_bins,
        "peak_repeated": _mean(peaks[True]),
        "peak_other": _mean(peaks[False]),
        "sink_repeated": _mean(sinks[True]),
        "sink_other": _mean(sinks[False]),
        "spent_repeated": _mean(spent[True]),
        "spent_other": _mean(spent[False]),
    }


def _mean(values: list[float]) -> float:
    """The mean, NaN for no values (printed as a dash)."""
    return float(np.mean(values)) if values else float("nan")


def _pair(a: float, b: float) -> str:
    """``a / b`` with three decimals, or a dash where the file has no such weight."""
    return "–" if np.isnan(a) and np.isnan(b) else f"{a:.3f} / {b:.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("attention", nargs="+", type=Path, help="attention .npz files (scanmt translate --attention-out)")
    ap.add_argument("--used", type=float, default=0.5,
                    help="attention a source token must already have received for a repetition to count as a "
                         "second translation of it")
    ap.add_argument("--bound", type=float, default=1.5, help="a fertility bound that leaves room for two translations")
    args = ap.parse_args()
    print(f"| file | repeated-bigram tokens | most attended: the sink | else: source word already attended >= {args.used} "
          f"| its bound >= {args.bound} "
          f"| source words with total attention >= {args.bound} | mean bound | largest source weight: repeated / other "
          f"| sink weight: repeated / other | weight on half-spent source words: repeated / other |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    stats = {path: budget_stats(path, args.used, args.bound) for path in args.attention}
    for path, s in stats.items():
        print(f"| {path} | {s['repeated_tokens']} | {s['sink_argmax']:.0%} | {s['retranslated']:.0%} | {s['bound_room']:.0%} "
              f"| {s['src_over_bound']:.2%} | {s['mean_bound']:.2f} | {_pair(s['peak_repeated'], s['peak_other'])} "
              f"| {_pair(s['sink_repeated'], s['sink_other'])} | {_pair(s['spent_repeated'], s['spent_other'])} |")
    bins = [f"< {EDGES[0]}"] + [f"{lo}-{hi}" for lo, hi in zip(EDGES, EDGES[1:])] + [f">= {EDGES[-1]}"]
    print("\nrepeated-bigram tokens that attend to a source word most, by the attention it had already received")
    print("| file | " + " | ".join(bins) + " |")
    print("| --- |" + " ---: |" * len(bins))
    for path, s in stats.items():
        print(f"| {path} | " + " | ".join(str(n) for n in s["prior_attention_bins"]) + " |")


if __name__ == "__main__":
    main()
