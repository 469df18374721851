"""How much of a system's extra repetition under the stress test comes from writing longer outputs?

Reads a grid folder's stress tests (``scanmt experiment run --stress-k``: each finished run's ``metrics.json``
``stress.per_input``) and, for each K, pools the joined inputs of every seed and compares a system's REP with
the baseline's at equal output length (:mod:`scanmt.metrics.length_standardized`): the inputs are grouped by
their output/reference length ratio, and the baseline's REP within each group is weighted by how much of the
system's reference text falls in it.  Runs whose counts predate ``hyp_words`` are measured from their
``RUN/stress/NAME.kK.hyp.LANG`` outputs, Moses-tokenized as REP is (docs/results.md, "When constrained
attention helps").

    python scripts/stress_rep_by_length.py runs/transformer-lr14 --baseline softmax --systems csparsemax
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from scanmt.errors import DataError
from scanmt.metrics.length_standardized import RATIO_EDGES, standardize_rep

Counts = dict[str, list[float]]


def _hyp_words(stress_dir: Path, k: int) -> list[float]:
    """Moses-tokenized words of each output of one K, from the stress test's output file."""
    from scanmt.data.tokenize import tokenize

    found = sorted(stress_dir.glob(f"*.k{k}.hyp.*"))
    if len(found) != 1:
        raise DataError(f"{stress_dir}: expected one output file *.k{k}.hyp.LANG, found {len(found)}")
    lang = found[0].name.rsplit(".", 1)[1]
    lines = found[0].read_text(encoding="utf-8").splitlines()
    return [float(len(tokenize(h, lang).split())) if h.strip() else 0.0 for h in lines]


def system_counts(out: Path, system: str, k: int) -> Counts:
    """The per-input REP counts and output lengths of every finished seed of ``system`` at ``k``, pooled."""
    pooled: Counts = {"rep_sigma": [], "ref_words": [], "hyp_words": []}
    runs = sorted((out / "runs" / system).glob("seed*/DONE"))
    if not runs:
        raise DataError(f"{out / 'runs' / system}: no finished run")
    for done in runs:
        run = done.parent
        metrics: dict[str, Any] = json.loads((run / "metrics.json").read_text(encoding="utf-8"))
        counts = ((metrics.get("stress") or {}).get("per_input") or {}).get(str(k))
        if counts is None:
            raise DataError(f"{run}/metrics.json: no stress test at K = {k}")
        hyp = counts.get("hyp_words") or _hyp_words(run / "stress", k)
        if len(hyp) != len(counts["ref_words"]):
            raise DataError(f"{run}: {len(hyp)} outputs at K = {k} for {len(counts['ref_words'])} joined inputs")
        pooled["rep_sigma"] += counts["rep_sigma"]
        pooled["ref_words"] += counts["ref_words"]
        pooled["hyp_words"] += hyp
    return pooled


def _ratio(c: Counts) -> float:
    return sum(c["hyp_words"]) / max(1.0, sum(c["ref_words"]))


def table(out: Path, baseline: str, systems: list[str], ks: list[int], edges: tuple[float, ...]) -> str:
    head = ("system", "K", "length ratio (system / baseline)", f"REP {baseline}", "REP system",
            f"REP {baseline} at the system's lengths", "share explained by length", "uncovered")
    lines = ["| " + " | ".join(head) + " |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for k in ks:
        base = system_counts(out, baseline, k)
        for name in systems:
            mine = system_counts(out, name, k)
            r = standardize_rep([mine], [base], edges)
            if math.isnan(r.baseline_at_system_lengths):  # the system writes only where the baseline never does
                at_lengths, share = "– (no length group in common)", "–"
            else:
                at_lengths = f"{r.baseline_at_system_lengths:.2f}"
                share = "–" if r.explained is None else f"{100 * r.explained:.0f} %"
            lines.append(f"| {name} | {k} | {_ratio(mine):.2f} / {_ratio(base):.2f} | {r.baseline:.2f} | {r.system:.2f} "
                         f"| {at_lengths} | {share} | {100 * r.uncovered:.1f} % |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("out", type=Path, help="grid folder of `scanmt experiment run --out` whose runs have a stress test")
    p.add_argument("--baseline", default="softmax", help="system whose REP at equal length is the reference")
    p.add_argument("--systems", nargs="+", required=True, help="systems compared with the baseline")
    p.add_argument("--k", type=int, nargs="+", default=[1, 2, 3, 4], help="the stress test's K values to report")
    p.add_argument("--edges", type=float, nargs="+", default=list(RATIO_EDGES),
                   help="the output/reference length ratios that separate the groups")
    args = p.parse_args(argv)
    try:
        print(table(args.out, args.baseline, args.systems, args.k, tuple(args.edges)))
    except (DataError, OSError, json.JSONDecodeError) as exc:
        p.exit(2, f"stress_rep_by_length: {exc}\n")
    print("\nREP pooled over the seeds' joined inputs. Share explained by length: (REP of the baseline at the "
          "system's lengths − the baseline's REP) / (the system's REP − the baseline's). Uncovered: the system's "
          "reference words in length groups where the baseline has no output (left out of the weighting).")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
