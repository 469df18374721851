"""The report's scores by source length: the test sentences grouped by their number of source words, and in each
group every system's tokenized BLEU, REP and DROP against its baseline's.

Coverage mistakes grow with the sentence: on KFTT (22 words a sentence) a softmax baseline repeats and drops far
more than on 13-word captions.  Where a grid misses a paper's REP or DROP ratio, the first question is whether the
bounds change the long sentences at all; this section answers it with numbers.

- **REP and DROP** come from each finished run's stress test at K = 1 (``experiment run --stress-k 1 ...``): its
  ``per_input`` counts, one entry per test sentence in order (σ and reference words for REP, dropped and source
  words for DROP; :data:`scanmt.api.stress.PerInput`).  A group's rate pools the runs' counts over seeds, as the
  stress test's paired tables do, and its difference from the baseline's is tested by a paired bootstrap over the
  group's inputs, resampled with the same indices for both systems (:func:`scanmt.metrics.paired.paired_rates`;
  one-sided, "the system's rate is lower").
- **BLEU** is the tokenized BLEU of each run's test translation restricted to the group, averaged over seeds.
- **Source words** are the aligner's words that DROP counts (the runs' ``source_words``), else the source
  tokenized by the source language's tokenizer (:func:`scanmt.data.tokenize.tokenize`; MeCab for Japanese).

Groups of fewer than :data:`MIN_GROUP` sentences are merged into their neighbour towards the middle, so that no
group's rates rest on a handful of sentences.  Where the data's training pairs were filtered by length
(``prepare --max-train-words``, KFTT's 40 words), two more rows split the test set at that length: the sentences
the model saw the like of in training, and those longer than any training source (on KFTT the bounds' whole
effect on the Transformer sat in the second: docs/kftt.md, "Eleventh session").  A last line counts each system's
cut-short outputs: fewer than a third of the reference's words (references of :data:`CUT_SHORT_MIN_REF` words or
more), and of those the outputs of one word (a beam that ends after a list item's number).  Runs without a
stress test at K = 1 are left out of REP and DROP (each system's table names the seeds it pairs with its
baseline), and a grid whose runs have none gets no section.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from scanmt.experiments.report.markdown import md_escape

#: the upper edges of the source-length groups, in source words: 1-10, 11-20, 21-30, 31-40, 41-60, 61 and longer
EDGES = (10, 20, 30, 40, 60)
#: the fewest sentences a group keeps on its own (smaller groups join a neighbour)
MIN_GROUP = 30
#: the K of the stress test whose per-input counts are the test set itself
K = 1
#: the shortest reference (words) whose output can count as cut short
CUT_SHORT_MIN_REF = 4


@dataclass(frozen=True)
class Group:
    """A range of source lengths and the test sentences in it (0-based indices)."""

    low: int
    high: int | None  #: None: no upper end
    indices: tuple[int, ...]
    note: str = ""  #: shown after the range

    @property
    def label(self) -> str:
        span = f"{self.low}+" if self.high is None else f"{self.low}–{self.high}"
        return f"{span} ({self.note})" if self.note else span


def length_groups(src_words: Sequence[int], edges: Sequence[int] = EDGES, min_group: int = MIN_GROUP) -> list[Group]:
    """The sentences grouped by source length at ``edges``; empty groups dropped, and groups of fewer than
    ``min_group`` sentences merged into their neighbour towards the middle (one group when all are small)."""
    bounds = [(lo, hi) for lo, hi in zip((1, *(e + 1 for e in edges)), (*edges, None))]
    groups = [Group(lo, hi, tuple(i for i, n in enumerate(src_words) if n >= lo and (hi is None or n <= hi)))
              for lo, hi in bounds]
    # words of 0 (an empty source line) join the first group
    empty = tuple(i for i, n in enumerate(src_words) if n < 1)
    groups[0] = Group(groups[0].low, groups[0].high, tuple(sorted(empty + groups[0].indices)))
    groups = [g for g in groups if g.indices]
    while len(groups) > 1:
        small = [k for k, g in enumerate(groups) if len(g.indices) < min_group]
        if not small:
            break
        k = small[0]
        j = k + 1 if k < len(groups) / 2 else k - 1
        j = min(max(j, 0), len(groups) - 1)
        a, b = sorted((k, j))
        merged = Group(groups[a].low, groups[b].high, tuple(sorted(groups[a].indices + groups[b].indices)))
        groups[a:b + 1] = [merged]
    return groups


def training_length_groups(src_words: Sequence[int], trained_words: int | None) -> list[Group]:
    """The test sentences within the training data's length limit (at most ``trained_words`` source words) and
    those beyond it; [] without a limit or when either side would be empty."""
    if trained_words is None:
        return []
    within = tuple(i for i, n in enumerate(src_words) if n <= trained_words)
    beyond = tuple(i for i, n in enumerate(src_words) if n > trained_words)
    if not within or not beyond:
        return []
    return [Group(1, trained_words, within, "the training lengths"),
            Group(trained_words + 1, None, beyond, "longer than any training source")]


def is_cut_short(hyp_words: int, ref_words: int) -> bool:
    """Whether an output of ``hyp_words`` has fewer than a third of its reference's ``ref_words`` (references of
    :data:`CUT_SHORT_MIN_REF` words or more)."""
    return ref_words >= CUT_SHORT_MIN_REF and 3 * hyp_words < ref_words


def cut_short(hyp_tok: Sequence[str], ref_tok: Sequence[str]) -> tuple[int, int]:
    """``(outputs with fewer than a third of their reference's words, those of them with one word)``
    (:func:`is_cut_short`)."""
    lengths = [(len(h.split()), len(r.split())) for h, r in zip(hyp_tok, ref_tok)]
    short = [n for n, m in lengths if is_cut_short(n, m)]
    return len(short), short.count(1)


#: per system, per seed: the tokenized test translation (one line per test sentence)
Translations = Mapping[str, Mapping[int, Sequence[str]]]
#: per system, per seed: the tokenized BLEU of each length group
GroupBleus = Mapping[str, Mapping[int, Sequence[float]]]


def _per_input(run: Mapping[str, Any]) -> dict[str, Any] | None:
    return ((run.get("stress") or {}).get("per_input") or {}).get(str(K))


def source_words(systems: Sequence[Any], sentences: int) -> list[int] | None:
    """The source length of each test sentence from the first run whose K = 1 counts have ``source_words`` for all
    ``sentences``; None when no run has them."""
    for s in systems:
        for run in s.runs:
            counts = _per_input(run) or {}
            words = counts.get("source_words")
            if words is not None and len(words) == sentences:
                return [int(n) for n in words]
    return None


def _subset(counts: Mapping[str, Sequence[float]], idx: Sequence[int]) -> dict[str, list[float]]:
    return {key: [values[i] for i in idx] for key, values in counts.items()
            if isinstance(values, (list, tuple)) and len(values) > max(idx, default=-1)}


def has_length_counts(systems: Sequence[Any]) -> bool:
    """Whether any finished run of ``systems`` kept per-input counts at K = 1 (else the section is empty)."""
    return any(_per_input(r) is not None for s in systems for r in s.runs)


def _group_bleus(hyps: Translations, groups: Sequence[Group], ref_tok: Sequence[str]) -> GroupBleus:
    """Per system and seed, the tokenized BLEU of each group, computed once for both tables."""
    from scanmt.metrics.bleu import tokenized_bleu

    return {name: {seed: [tokenized_bleu([h[i] for i in g.indices], [ref_tok[i] for i in g.indices]).score
                          for g in groups] for seed, h in by_seed.items()} for name, by_seed in hyps.items()}


def _rate(counts: Sequence[Mapping[str, Sequence[float]]], metric: str) -> float | None:
    """``metric``'s rate (:data:`scanmt.metrics.paired.RATES`) pooled over ``counts``; None without its counts."""
    from scanmt.metrics.paired import RATES

    num, den = RATES[metric]
    if not counts or any(num not in c or den not in c for c in counts):
        return None
    total = sum(sum(c[den]) for c in counts)
    return 100.0 * sum(sum(c[num]) for c in counts) / total if total else None


def _num(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}"


def _ratio_cell(mine: float | None, theirs: float | None, t: Any) -> str:
    """``11.40 (×0.85, p 0.003 †)``: the system's rate, its ratio to the baseline's and the paired p-value."""
    from scanmt.metrics.paired import format_p

    if mine is None:
        return "–"
    ratio = f"×{mine / theirs:.2f}" if theirs else "× –"
    return f"{mine:.2f} ({ratio}, p {format_p(t.p_lower, significant_below=0.05)})" if t is not None else f"{mine:.2f}"


def _baseline_rows(base: Any, groups: Sequence[Group], bleus: GroupBleus, ref_tok: Sequence[str]) -> list[str]:
    rows = []
    for k, g in enumerate(groups):
        counts = [_subset(c, g.indices) for r in base.runs if (c := _per_input(r)) is not None]
        scores = [by_group[k] for by_group in (bleus.get(base.name) or {}).values()]
        words = sum(len(ref_tok[i].split()) for i in g.indices)
        rows.append(f"| {g.label} | {len(g.indices)} | {words / len(g.indices):.1f} | "
                    f"{_num(sum(scores) / len(scores) if scores else None)} | "
                    f"{_num(_rate(counts, 'REP'))} | {_num(_rate(counts, 'DROP'))} |")
    return rows


def _system_rows(s: Any, base: Any, groups: Sequence[Group], bleus: GroupBleus) -> tuple[list[str], int]:
    """One system's rows against ``base``, one per group, and the number of seeds paired."""
    from scanmt.metrics.paired import paired_rates

    seeds = [r["seed"] for r in sorted(s.runs, key=lambda r: r["seed"])
             if _per_input(r) is not None and _per_input(base.seed(r["seed"]) or {}) is not None]
    mine_b, base_b = bleus.get(s.name) or {}, bleus.get(base.name) or {}
    both = [k for k in mine_b if k in base_b]
    rows = []
    for j, g in enumerate(groups):
        pairs = [(_subset(_per_input(s.seed(k)), g.indices), _subset(_per_input(base.seed(k)), g.indices))
                 for k in seeds]
        tests = paired_rates(pairs) if pairs else {}
        d_bleu = [mine_b[k][j] - base_b[k][j] for k in both]
        cells = [f"{sum(d_bleu) / len(d_bleu):+.2f}" if d_bleu else "–"]
        for metric in ("REP", "DROP"):
            t = tests.get(metric)
            cells += [_num(t.b if t else None), _ratio_cell(t.a if t else None, t.b if t else None, t)]
        rows.append(f"| {g.label} | {len(g.indices)} | " + " | ".join(cells) + " |")
    return rows, len(seeds)


def _cut_short_line(systems: Sequence[Any], hyps: Translations, ref_tok: Sequence[str]) -> list[str]:
    """The sentence counting each system's cut-short outputs per seed (module docstring); [] without translations."""
    parts = []
    for s in systems:
        by_seed = hyps.get(s.name) or {}
        counts = [cut_short(by_seed[k], ref_tok) for k in sorted(by_seed)]
        if counts:
            parts.append(f"{md_escape(s.label)} {' / '.join(str(c) for c, _ in counts)} "
                         f"(one word: {' / '.join(str(o) for _, o in counts)})")
    if not parts:
        return []
    return ["", f"Cut-short outputs, per seed: fewer than a third of the reference's words (references of "
                f"{CUT_SHORT_MIN_REF} words or more), and of those the outputs of one word: " + "; ".join(parts) + "."]


def length_section(systems: Sequence[Any], baselines: Mapping[str, str], baseline: str, src_words: Sequence[int],
                   hyps: Translations, ref_tok: Sequence[str], trained_words: int | None = None) -> list[str]:
    """Markdown lines: the grid baseline's BLEU, REP and DROP by source length, then each other system's against
    its own baseline, then each system's cut-short outputs (module docstring); [] when no run has a stress test at
    K = 1.

    Args:
        systems: :class:`~scanmt.experiments.report.collection.SystemResults` of the grid.
        baselines: each system's baseline (:mod:`scanmt.experiments.baselines`).
        baseline: the grid's baseline, whose error rates the first table shows.
        src_words: per test sentence, its number of source words (:func:`source_words`).
        hyps: per system and seed, the tokenized test translation.
        ref_tok: the tokenized reference, one line per test sentence.
        trained_words: the training pairs' length limit in source words (``prepare --max-train-words``); None:
            no limit, no rows for it.
    """
    if not has_length_counts(systems):
        return []
    groups = length_groups(src_words) + training_length_groups(src_words, trained_words)
    bleus = _group_bleus(hyps, groups, ref_tok)
    by_name = {s.name: s for s in systems}
    base = by_name[baseline]
    L = ["", "## By source length", "",
         f"The test sentences grouped by their number of source words (groups of fewer than {MIN_GROUP} joined to a "
         "neighbour). BLEU: tokenized BLEU of each run's test translation on the group, mean over seeds. REP and DROP: "
         "the group's rates from each run's stress test at K = 1 (the test set, one input per sentence), pooled over "
         "seeds; a system's cell gives its rate, its ratio to its baseline's and the paired bootstrap's one-sided p "
         "that it is lower († below 0.05; `scanmt.experiments.report.lengths`).", "",
         f"**{md_escape(base.label)}**, the baseline:", "",
         "| source words | sentences | reference words per sentence | BLEU | REP ↓ | DROP ↓ |",
         "| --- | ---: | ---: | ---: | ---: | ---: |", *_baseline_rows(base, groups, bleus, ref_tok)]
    for s in systems:
        other = by_name.get(baselines.get(s.name, baseline))
        if other is None or other.name == s.name or not s.runs:
            continue
        rows, seeds = _system_rows(s, other, groups, bleus)
        if not seeds:
            continue
        L += ["", f"**{md_escape(s.label)}** against {md_escape(other.label)} ({seeds} seed{'s' if seeds > 1 else ''}):",
              "", "| source words | sentences | Δ BLEU | REP of the baseline | REP ↓ | DROP of the baseline | DROP ↓ |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: |", *rows]
    return L + _cut_short_line(systems, hyps, ref_tok) + [""]
