"""DROP by the Japanese source word's part of speech: which words do the systems drop? (docs/kftt.md)

DROP (``scanmt evaluate --metrics drop``) counts a source word as dropped when the aligner links it to the
reference and to no output word.  A Japanese source has many words that English has no word for (case
particles, the copula, punctuation), whose links to the reference are few and uncertain; this script splits
DROP by UniDic's part of speech (MeCab through fugashi, the toolkit's Japanese words,
:meth:`scanmt.data.japanese.JapaneseWords.tagged`), so that the drops of content words (nouns, names,
numbers, verbs, adjectives, adverbs) can be told from those of function words.  Each output is aligned
``--samples`` times and the reference ``--samples`` times (eflomal samples at random), and every count is the
mean over the K x K pairings, as ``scanmt evaluate`` averages DROP.  The references' alignments are shared by
the systems, so their differences are paired.

    python scripts/drop_by_pos.py --src test.raw.ja --ref test.raw.en --hyp softmax.hyp.en csparsemax.hyp.en \\
        --names softmax csparsemax --align-model DATA/align --samples 2 [--json OUT.json]

With ``--fertility FILE --pieces SPLIT.bpe.ja`` (a constrained model's bounds of that split's subwords, such
as the fertility cache of a prepared folder), DROP is also split by each word's attention budget, the sum
of its subwords' bounds: do the bounds keep the words they give much attention from being dropped?

Per class: the source words, the share of them the reference alignment links (only those can be dropped),
each system's dropped words and DROP within the class (dropped / the class's words, in %), and the last
system's against the first's, with the two-sided p-value of a paired bootstrap over the sentences.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from scanmt.api.evaluate_text import identical_outputs, link_pairings, link_samples, load_word_aligner
from scanmt.data.fertility import read_fertility
from scanmt.data.japanese import JapaneseWords
from scanmt.data.subword import word_index
from scanmt.data.tokenize import tokenize
from scanmt.errors import ScanmtError
from scanmt.io import atomic_open, check_parallel, read_lines
from scanmt.metrics.drop import aligned_and_dropped
from scanmt.metrics.paired import format_p, paired_bootstrap_rate

#: word classes by UniDic part of speech (its first two levels; the first match wins), content words first
CLASSES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("proper noun", ("名詞-固有名詞",)),
    ("numeral", ("名詞-数詞",)),
    ("noun", ("名詞", "代名詞")),
    ("verb", ("動詞",)),
    ("adjective", ("形容詞", "形状詞")),
    ("adverb", ("副詞",)),
    ("particle", ("助詞",)),
    ("auxiliary", ("助動詞",)),
    ("affix", ("接尾辞", "接頭辞")),
    ("punctuation", ("補助記号", "記号", "空白")),
    ("other", ()),
)
CONTENT = ("proper noun", "numeral", "noun", "verb", "adjective", "adverb")
#: word classes by attention budget: the sum of the fertility bounds of the word's subwords (``--fertility``;
#: with ``predicted`` + 1, a one-subword word's bound is its predicted fertility plus 1), upper limits
BUDGETS: tuple[tuple[str, float], ...] = (("budget < 1.5", 1.5), ("budget 1.5-2", 2.0), ("budget 2-3", 3.0),
                                          ("budget 3-5", 5.0), ("budget >= 5", float("inf")))


def word_class(pos: str) -> str:
    """The class of a UniDic part of speech (``名詞-固有名詞`` -> ``proper noun``); ``other`` for the rest
    (adnominals such as この, conjunctions, interjections)."""
    for name, prefixes in CLASSES:
        if any(pos == p or pos.startswith(p + "-") for p in prefixes):
            return name
    return "other"


def budget_class(budget: float) -> str:
    """The :data:`BUDGETS` class of a word whose subwords' bounds sum to ``budget``."""
    return next(name for name, upper in BUDGETS if budget < upper)


def word_budgets(pieces: list[str], bounds: list[float]) -> list[float]:
    """Per tokenized word, the sum of its subwords' bounds (``pieces``: one line of a prepared ``.bpe`` file,
    split; :func:`scanmt.data.subword.word_index` maps pieces to words)."""
    out: list[float] = []
    for w, b in zip(word_index(pieces), bounds):
        if w == len(out):
            out.append(0.0)
        out[w] += b
    return out


def counts_by_class(classes: list[list[str]], ref_samples, hyp_samples, same: list[bool],
                    names: tuple[str, ...] = tuple(name for name, _ in CLASSES)) -> dict[str, dict]:
    """Mean over the K x K pairings (:func:`scanmt.api.evaluate_text.link_pairings`) of each class's
    reference-aligned and dropped source words.

    Args:
        classes: per sentence, the class of each source word.
        ref_samples, hyp_samples: K source-reference and K source-output alignments (per sentence, links).
        same: per sentence, whether the output equals the reference (it takes the reference's links).

    Returns:
        ``{class: {"words": n, "aligned": mean, "dropped": mean, "sentence_words": [...],
        "sentence_dropped": [...]}}`` for every class of ``names`` (default: those of :data:`CLASSES`), the last
        two per sentence.
    """
    lens = [len(c) for c in classes]
    sentence_words = {name: [c.count(name) for c in classes] for name in names}
    aligned = dict.fromkeys(names, 0.0)
    dropped = {name: [0.0] * len(classes) for name in names}
    pairings = 0
    for ref_links, hyp_links in link_pairings(ref_samples, hyp_samples, same):
        pairings += 1
        for k, (sentence, (in_ref, gone)) in enumerate(zip(classes, aligned_and_dropped(ref_links, hyp_links, lens))):
            for i in in_ref:
                aligned[sentence[i]] += 1
            for i in gone:
                dropped[sentence[i]][k] += 1
    return {name: {"words": sum(sentence_words[name]), "aligned": aligned[name] / pairings,
                   "dropped": sum(dropped[name]) / pairings, "sentence_words": sentence_words[name],
                   "sentence_dropped": [d / pairings for d in dropped[name]]} for name in names}


def _groups(per_class: dict[str, dict]) -> dict[str, dict]:
    """The classes, then (parts of speech) the content and function words together, then all."""
    def total(names):
        out = {k: sum(per_class[n][k] for n in names) for k in ("words", "aligned", "dropped")}
        for k in ("sentence_words", "sentence_dropped"):
            out[k] = [sum(x) for x in zip(*(per_class[n][k] for n in names))]
        return out
    if not set(CONTENT) <= set(per_class):  # classes other than parts of speech
        return {**per_class, "all": total(list(per_class))}
    function = [n for n in per_class if n not in CONTENT]
    return {**per_class, "content words": total(CONTENT), "function words": total(function),
            "all": total(list(per_class))}


def table(names: list[str], results: list[dict[str, dict]], samples: int = 1000) -> str:
    """The Markdown table of :func:`counts_by_class` for each system (``results``, in the order of ``names``);
    with two or more, the last system's drops against the first's and the two-sided p-value of a paired
    bootstrap over the sentences (:func:`scanmt.metrics.paired.paired_bootstrap_rate`, ``samples`` resamples)."""
    ratio = f" | {names[-1]} / {names[0]} (p)" if len(names) > 1 else ""
    head = "| class | words | ref-aligned | " + " | ".join(f"{n}: dropped (DROP %)" for n in names) + ratio + " |"
    lines = [head, "| --- " + "| ---: " * (len(names) + 2 + bool(ratio)) + "|"]
    groups = [_groups(r) for r in results]
    for cls in groups[0]:
        first, last = groups[0][cls], groups[-1][cls]
        if not first["words"]:
            continue
        cells = [f"{g[cls]['dropped']:.1f} ({100 * g[cls]['dropped'] / first['words']:.2f})" for g in groups]
        if ratio:
            test = paired_bootstrap_rate(last["sentence_dropped"], first["sentence_dropped"], first["sentence_words"],
                                         samples=samples)
            share = f"{last['dropped'] / first['dropped']:.2f}×" if first["dropped"] else "–"
            cells.append(f"{share} ({format_p(test.p_two_sided)})")
        lines.append(f"| {cls} | {first['words']:,} | {100 * first['aligned'] / first['words']:.1f} % | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--src", type=Path, required=True, help="the raw Japanese source, one sentence per line")
    ap.add_argument("--ref", type=Path, required=True, help="the raw reference, as many lines")
    ap.add_argument("--hyp", type=Path, nargs="+", required=True, help="each system's raw output, as many lines")
    ap.add_argument("--names", nargs="+", help="a name per --hyp (default: the file names)")
    ap.add_argument("--tgt-lang", default="en", help="the outputs' language (default en)")
    ap.add_argument("--align-model", type=Path, required=True,
                    help="the word aligner of the corpus (a prepared folder's align/, as for scanmt evaluate)")
    ap.add_argument("--samples", type=int, default=2, help="alignments of each side (default 2; K x K pairings)")
    ap.add_argument("--fertility", type=Path, help="also split DROP by each word's attention budget: the fertility "
                    "bounds of the source's subwords (a scanmt fertility file, one number per piece of --pieces)")
    ap.add_argument("--pieces", type=Path, help="with --fertility: the source's subwords (a prepared SPLIT.bpe.ja)")
    ap.add_argument("--json", type=Path, help="also write the counts as JSON")
    args = ap.parse_args(argv)
    names = args.names or [h.name for h in args.hyp]
    if len(names) != len(args.hyp):
        ap.error(f"--names gives {len(names)} names for {len(args.hyp)} --hyp files")
    if args.samples < 1:
        ap.error(f"--samples must be at least 1, not {args.samples}")
    if (args.fertility is None) != (args.pieces is None):
        ap.error("--fertility and --pieces go together")
    try:
        src_raw, ref_raw = read_lines(args.src), read_lines(args.ref)
        check_parallel(src_raw, ref_raw, args.src, args.ref)
        hyps = [read_lines(h, allow_empty=True) for h in args.hyp]
        for h, lines in zip(args.hyp, hyps):
            check_parallel(src_raw, lines, args.src, h)
        aligner, _ = load_word_aligner(args.align_model, "ja", args.tgt_lang)
    except ScanmtError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    ja = JapaneseWords()
    tagged = [ja.tagged(line) for line in src_raw]
    src = [[w for w, _ in t] for t in tagged]
    for n, (words, line) in enumerate(zip(src, src_raw), 1):
        if words != tokenize(line, "ja").split():  # the words DROP counts (scanmt.data.tokenize)
            print(f"error: {args.src}:{n}: the tagged words differ from the toolkit's Japanese words", file=sys.stderr)
            return 2
    groupings = {"part of speech": ([[word_class(p) for _, p in t] for t in tagged], tuple(n for n, _ in CLASSES))}
    if args.fertility is not None:
        try:
            pieces = [line.split() for line in read_lines(args.pieces, allow_empty=True, what="subword file")]
            check_parallel(src_raw, pieces, args.src, args.pieces)
            bounds = read_fertility(args.fertility, src_lens=[len(x) for x in pieces], src_path=args.pieces)
        except ScanmtError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        budgets = [word_budgets(x, list(b)) for x, b in zip(pieces, bounds)]
        for n, (b, words) in enumerate(zip(budgets, src), 1):
            if len(b) != len(words):
                print(f"error: {args.pieces}:{n}: {len(b)} words of subwords, but the source line has {len(words)} "
                      "words: not the same sentence", file=sys.stderr)
                return 2
        groupings["attention budget"] = ([[budget_class(x) for x in b] for b in budgets], tuple(n for n, _ in BUDGETS))
    ref_tok = [tokenize(r, args.tgt_lang) for r in ref_raw]
    ref_samples = link_samples(aligner, src, ref_tok, args.samples)
    results: dict[str, list] = {g: [] for g in groupings}
    for lines in hyps:
        hyp_tok = [tokenize(h, args.tgt_lang) if h.strip() else "" for h in lines]
        same = identical_outputs(hyp_tok, ref_tok)
        hyp_samples = link_samples(aligner, src, hyp_tok, args.samples, None, same)
        for g, (classes, class_names) in groupings.items():
            results[g].append(counts_by_class(classes, ref_samples, hyp_samples, same, class_names))
    for g in groupings:
        print(f"DROP by {g} ({args.samples} x {args.samples} alignment pairings)\n\n{table(names, results[g])}\n")
    if args.json:
        with atomic_open(args.json) as fh:
            json.dump({"samples": args.samples, "groupings": {g: dict(zip(names, r)) for g, r in results.items()}},
                      fh, indent=1, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
