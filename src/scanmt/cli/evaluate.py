"""``scanmt evaluate``: score any system's output with every metric the papers report.

Text metrics (need ``--hyp`` and ``--ref``, one sentence per line, detokenized
unless ``--tokenized``):

- ``bleu``: sacrebleu on detokenized cased text, with its signature;
- ``tok-bleu``: the paper's BLEU on Moses-tokenized, lowercased text (≈ ``multi-bleu.perl -lc``);
- ``meteor``: nltk METEOR with WordNet synonyms (mean of sentence scores);
- ``rep``: REP-score (repeated bigrams and words) on tokenized text;
- ``drop``: DROP-score (needs ``--src`` and ``--align-model``: a word-level
  ``scanmt align`` model);
- with ``--hyp2``: paired bootstrap resampling of BLEU, system 2 vs. ``--hyp``.

Attention metrics (need ``--attention``, from ``scanmt translate --attention-out``):

- ``attn-stats``: exact-zero share, attended tokens per step, cumulative
  attention vs. fertility, never-attended source tokens;
- ``aer``, ``saer``: with ``--gold-align``; the attention file must come from
  forced decoding of the gold target sentences.

Every metric is selected automatically when its inputs are given; ``--metrics``
restricts (or insists on) a list.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path
from typing import Any

from scanmt.errors import ConfigError, DataError
from scanmt.io import atomic_open, read_lines

NAME = "evaluate"
HELP = "score a translation: BLEU, METEOR, REP, DROP, AER/SAER and attention statistics"
DESCRIPTION = """\
Score any system's output against a reference; prints a table (and JSON with --json).

  scanmt evaluate --hyp test.hyp.en --ref test.en --src test.de --align-model DATA/align --json m.json
  scanmt evaluate --hyp a.hyp.en --hyp2 b.hyp.en --ref test.en        # paired bootstrap a vs b
  scanmt evaluate --attention rwth.attn.npz --gold-align test.talp --gold-one-indexed   # AER/SAER

Text metrics: bleu (sacrebleu, detokenized, cased), tok-bleu (Moses-tokenized, lowercased, like
multi-bleu -lc), meteor (nltk, WordNet synonyms), rep (REP-score), drop (DROP-score, needs --src
and --align-model). Attention metrics need --attention: attn-stats, and aer/saer with --gold-align
(attention from forced decoding of the gold targets). Metrics whose inputs are given run by default.
"""

log = logging.getLogger(__name__)

TEXT_METRICS = ("bleu", "tok-bleu", "meteor", "rep", "drop")
ATTN_METRICS = ("attn-stats", "aer", "saer")
METRICS = TEXT_METRICS + ATTN_METRICS


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("text")
    g.add_argument("--hyp", type=Path, metavar="FILE", help="system output, one sentence per line")
    g.add_argument("--ref", type=Path, metavar="FILE", help="reference translations, line-aligned with --hyp")
    g.add_argument("--src", type=Path, metavar="FILE", help="source sentences (needed for drop)")
    g.add_argument("--hyp2", type=Path, metavar="FILE", help="a second system: paired bootstrap of BLEU against --hyp")
    g.add_argument(
        "--tokenized",
        action="store_true",
        help="--src/--hyp/--ref/--hyp2 are already Moses-tokenized (they are detokenized for sacrebleu BLEU); "
        "by default they are detokenized text and are tokenized here",
    )
    g.add_argument("--src-lang", default="de", metavar="LANG", help="source language (Moses tokenizer rules)")
    g.add_argument("--tgt-lang", default="en", metavar="LANG", help="target language (Moses tokenizer rules)")
    g.add_argument(
        "--align-model",
        type=Path,
        metavar="DIR",
        help="word-level aligner from `scanmt align` (ALIGN_DIR or ALIGN_DIR/word), used for drop",
    )
    g.add_argument("--bootstrap-samples", type=int, default=1000, metavar="N", help="resamples for the paired bootstrap (--hyp2)")
    g.add_argument("--no-synonyms", action="store_true", help="METEOR without WordNet synonyms even if available")
    a = p.add_argument_group("attention")
    a.add_argument("--attention", type=Path, metavar="FILE", help="attention .npz from `scanmt translate --attention-out`")
    a.add_argument(
        "--gold-align",
        type=Path,
        metavar="FILE",
        help="gold word alignments for aer/saer, one line per sentence: 'i-j' sure, 'ipj' possible, "
        "source index first (Pharaoh or talp format)",
    )
    a.add_argument(
        "--gold-one-indexed",
        action="store_true",
        help="the --gold-align indices start at 1 (talp files such as RWTH De-En); default 0 (Pharaoh)",
    )
    a.add_argument(
        "--unattended-threshold",
        type=float,
        metavar="X",
        default=0.1,
        help="attn-stats: a source token whose total attention is below this counts as never attended",
    )
    p.add_argument(
        "--metrics",
        nargs="+",
        choices=METRICS,
        metavar="M",
        help=f"metrics to compute, from: {', '.join(METRICS)}; default: every metric whose inputs are given",
    )
    p.add_argument("--json", type=Path, metavar="OUT", help="also write the results as JSON to OUT")


# --------------------------------------------------------------------------- inputs


def read_hypotheses(path: Path, n_ref: int, ref_path: Path) -> list[str]:
    """Read a system output: empty lines are allowed (empty translations), but not an
    extra trailing blank line, and the line count must match the reference."""
    lines = read_lines(path, allow_empty=True, what="hypothesis file")
    if len(lines) == n_ref + 1 and not lines[-1].strip():
        raise DataError(f"{path}:{len(lines)}: hypothesis file ends with a blank line (an extra trailing newline?)")
    check_line_counts(path, len(lines), ref_path, n_ref)
    return lines


def check_line_counts(path: Path, n: int, ref_path: Path, n_ref: int) -> None:
    """Raise :class:`DataError` naming the first line that has no partner."""
    if n > n_ref:
        raise DataError(f"{path}:{n_ref + 1}: {path} has {n} lines but {ref_path} has only {n_ref}")
    if n < n_ref:
        raise DataError(f"{ref_path}:{n + 1}: {ref_path} has {n_ref} lines but {path} has only {n}")


def _select_metrics(args: argparse.Namespace) -> list[str]:
    has_text = args.hyp is not None and args.ref is not None
    if (args.hyp is None) != (args.ref is None):
        raise ConfigError("--hyp and --ref go together")
    available = {
        "bleu": has_text,
        "tok-bleu": has_text,
        "meteor": has_text,
        "rep": has_text,
        "drop": has_text and args.src is not None and args.align_model is not None,
        "attn-stats": args.attention is not None,
        "aer": args.attention is not None and args.gold_align is not None,
        "saer": args.attention is not None and args.gold_align is not None,
    }
    needs = {
        "drop": "--hyp, --ref, --src and --align-model",
        "attn-stats": "--attention",
        "aer": "--attention and --gold-align",
        "saer": "--attention and --gold-align",
    }
    if args.metrics:
        for m in args.metrics:
            if not available[m]:
                raise ConfigError(f"metric {m} needs {needs.get(m, '--hyp and --ref')}")
        return list(dict.fromkeys(args.metrics))
    chosen = [m for m in METRICS if available[m]]
    if not chosen:
        raise ConfigError("nothing to evaluate: give --hyp and --ref, and/or --attention")
    if args.hyp2 is not None and not has_text:
        raise ConfigError("--hyp2 needs --hyp and --ref")
    return chosen


class Texts:
    """The evaluated corpus in both forms: detokenized (sacrebleu) and tokenized (the rest)."""

    def __init__(self, args: argparse.Namespace):
        from scanmt.data.tokenize import detokenize, tokenize

        self.ref_raw = read_lines(args.ref, what="reference file")
        self.hyp_raw = read_hypotheses(args.hyp, len(self.ref_raw), args.ref)
        self.hyp2_raw = read_hypotheses(args.hyp2, len(self.ref_raw), args.ref) if args.hyp2 else None
        self.src_raw = None
        if args.src is not None:
            self.src_raw = read_lines(args.src, what="source file")
            check_line_counts(args.src, len(self.src_raw), args.ref, len(self.ref_raw))
        lang, slang = args.tgt_lang, args.src_lang
        if args.tokenized:
            conv, tok = (lambda x, lg: detokenize(x, lg)), (lambda x, lg: " ".join(x.split()))
        else:
            conv, tok = (lambda x, lg: x), (lambda x, lg: tokenize(x, lg) if x.strip() else "")
        self.ref = [conv(x, lang) for x in self.ref_raw]
        self.hyp = [conv(x, lang) for x in self.hyp_raw]
        self.hyp2 = [conv(x, lang) for x in self.hyp2_raw] if self.hyp2_raw is not None else None
        self.ref_tok = [tok(x, lang) for x in self.ref_raw]
        self.hyp_tok = [tok(x, lang) for x in self.hyp_raw]
        self.hyp2_tok = [tok(x, lang) for x in self.hyp2_raw] if self.hyp2_raw is not None else None
        self.src_tok = [tok(x, slang) for x in self.src_raw] if self.src_raw is not None else None


# --------------------------------------------------------------------------- metrics


Row = tuple[str, str, str]  # metric, value, note


def _text_metrics(args: argparse.Namespace, metrics: list[str], rows: list[Row], out: dict[str, Any]) -> None:
    from scanmt.metrics import bleu as bleu_mod

    texts = Texts(args)
    out["sentences"] = len(texts.ref)
    if "bleu" in metrics:
        r = bleu_mod.detok_bleu(texts.hyp, texts.ref)
        rows.append(("BLEU (detok, cased)", f"{r.score:.2f}", r.signature))
        out["bleu"] = {"score": r.score, "signature": r.signature, "details": r.details}
    if "tok-bleu" in metrics:
        r = bleu_mod.tokenized_bleu(texts.hyp_tok, texts.ref_tok)
        rows.append(("BLEU (tokenized, lc)", f"{r.score:.2f}", f"Moses-tokenized; {r.signature}"))
        out["tok_bleu"] = {"score": r.score, "signature": r.signature, "details": r.details}
    if texts.hyp2 is not None:
        tokenized = "bleu" not in metrics and "tok-bleu" in metrics
        h1, h2, ref = (texts.hyp_tok, texts.hyp2_tok, texts.ref_tok) if tokenized else (texts.hyp, texts.hyp2, texts.ref)
        b = bleu_mod.paired_bootstrap(h1, h2, ref, tokenized=tokenized, samples=args.bootstrap_samples)
        rows.append(
            ("BLEU --hyp2 (bootstrap)", f"{b.score2:.2f}", f"vs {b.score1:.2f}: p = {b.p_value:.4f} ({b.samples} resamples)")
        )
        out["bootstrap"] = {
            "bleu_hyp": b.score1, "bleu_hyp2": b.score2, "p_value": b.p_value,
            "samples": b.samples, "signature": b.signature, "tokenized": tokenized,
        }
    hyp_words = [x.split() for x in texts.hyp_tok]
    ref_words = [x.split() for x in texts.ref_tok]
    if "meteor" in metrics:
        from scanmt.metrics.meteor import corpus_meteor

        m = corpus_meteor(hyp_words, ref_words, use_synonyms=not args.no_synonyms)
        rows.append(("METEOR", f"{m.score:.2f}", f"nltk, mean of sentences; {m.note}"))
        out["meteor"] = {"score": m.score, "synonyms": m.synonyms, "note": m.note}
    if "rep" in metrics:
        from scanmt.metrics.rep import rep_score

        rep = rep_score(hyp_words, ref_words)
        rows.append(("REP", f"{rep:.2f}", "n=2, λ1=1, λ2=2, per 100 reference words; lower is better"))
        out["rep"] = {"score": rep, "n": 2, "lambda1": 1.0, "lambda2": 2.0}
    if "drop" in metrics:
        _drop(args, texts, rows, out)


def _load_word_aligner(path: Path, src_lang: str, tgt_lang: str):
    from scanmt.data.align import MODEL_FILE, Aligner

    if not (path / MODEL_FILE).exists() and (path / "word" / MODEL_FILE).exists():
        path = path / "word"
    aligner = Aligner.load(path)
    level = aligner.info.get("level")
    if level not in (None, "word"):
        raise ConfigError(f"--align-model {path}: a {level}-level aligner; DROP needs the word-level one (ALIGN_DIR/word)")
    langs = (aligner.info.get("src_lang"), aligner.info.get("tgt_lang"))
    if None not in langs and langs != (src_lang, tgt_lang):
        raise ConfigError(
            f"--align-model {path} aligns {langs[0]}->{langs[1]} but --src-lang/--tgt-lang are {src_lang}->{tgt_lang}"
        )
    return aligner, path


def _align(aligner, src: list[list[str]], tgt: list[list[str]]) -> list[set[tuple[int, int]]]:
    """Align pairs, skipping those with an empty side (no links)."""
    keep = [k for k, (s, t) in enumerate(zip(src, tgt)) if s and t]
    links = aligner.align([src[k] for k in keep], [tgt[k] for k in keep]) if keep else []
    out: list[set[tuple[int, int]]] = [set() for _ in src]
    for k, ls in zip(keep, links):
        out[k] = set(ls)
    return out


def _drop(args: argparse.Namespace, texts: Texts, rows: list[Row], out: dict[str, Any]) -> None:
    from scanmt.metrics.drop import drop_score

    aligner, path = _load_word_aligner(args.align_model, args.src_lang, args.tgt_lang)
    src = [x.split() for x in texts.src_tok]
    ref_links = _align(aligner, src, [x.split() for x in texts.ref_tok])
    # eflomal is not deterministic: a hypothesis identical to its reference reuses the reference's links
    same = [h == r for h, r in zip(texts.hyp_tok, texts.ref_tok)]
    hyp_links = _align(aligner, src, [[] if eq else x.split() for x, eq in zip(texts.hyp_tok, same)])
    hyp_links = [set(r) if eq else h for h, r, eq in zip(hyp_links, ref_links, same)]
    d = drop_score(ref_links, hyp_links, [len(s) for s in src])
    rows.append(
        ("DROP", f"{d.score:.2f}", f"% of {d.source_words} source words; {d.score_of_aligned:.2f}% of ref-aligned; lower is better")
    )
    out["drop"] = {
        "score": d.score, "score_of_ref_aligned": d.score_of_aligned, "dropped": d.dropped,
        "source_words": d.source_words, "ref_aligned": d.ref_aligned, "align_model": str(path),
    }


def _attention_metrics(args: argparse.Namespace, metrics: list[str], rows: list[Row], out: dict[str, Any]) -> None:
    from scanmt.data.attention_file import AttentionFile

    att = AttentionFile(args.attention)
    sents = list(att)
    out["attention_file"] = str(args.attention)
    if "attn-stats" in metrics:
        from scanmt.metrics.attention_stats import attention_stats

        st = attention_stats(
            [s.attention for s in sents],
            sink=[s.has_sink for s in sents],
            fertilities=[s.fertility for s in sents],
            threshold=args.unattended_threshold,
        )
        rows.append(("attention: exact zeros", f"{100 * st.zero_fraction:.2f}%", f"of {st.steps} steps x source tokens"))
        rows.append(("attention: attended/step", f"{st.mean_attended:.2f}", "source tokens with non-zero weight"))
        rows.append(("attention: one-hot steps", f"{100 * st.one_hot_share:.2f}%",
                     "steps whose largest weight is above 0.999"))
        rows.append(("attention: max weight", f"{st.mean_max_weight:.3f}", "largest weight per step, mean"))
        rows.append(("attention: max cumulative", f"{st.mean_max_cumulative:.2f}", "per sentence, most-attended token, mean"))
        if st.max_fertility_ratio is not None:
            rows.append(
                ("attention: max cum./fertility", f"{st.max_fertility_ratio:.3f}",
                 f"corpus max (<= 1 when constraints hold); per-sentence mean {st.mean_max_fertility_ratio:.3f}")
            )
        else:
            rows.append(("attention: max cum./fertility", "n/a", "no fertility stored in the attention file"))
        rows.append(
            ("attention: never attended", f"{100 * st.unattended_share:.2f}%",
             f"source tokens with total attention < {st.threshold:g}")
        )
        out["attention_stats"] = st.as_dict()
    if "aer" in metrics or "saer" in metrics:
        _aer(args, metrics, sents, rows, out)


def _aer(args: argparse.Namespace, metrics: list[str], sents: list, rows: list[Row], out: dict[str, Any]) -> None:
    from scanmt.data.subword import word_index
    from scanmt.metrics.aer import aer, hard_alignment, saer, strip_specials, word_attention
    from scanmt.data.links import read_links

    hard, soft, src_lens, tgt_lens = [], [], [], []
    for s in sents:
        a, src, hyp = strip_specials(s.attention, s.src, s.hyp, sink=s.has_sink)
        si, ti = word_index(src), word_index(hyp)
        src_lens.append(si[-1] + 1 if si else 0)
        tgt_lens.append(ti[-1] + 1 if ti else 0)
        hard.append(hard_alignment(a, si, ti))
        soft.append(word_attention(a, si, ti))
    lines = read_lines(args.gold_align, allow_empty=True, what="gold alignment file")
    if len(lines) != len(sents):
        raise DataError(
            f"{args.gold_align} has {len(lines)} lines but {args.attention} has {len(sents)} sentences "
            "(the attention must come from forced decoding of the gold set)"
        )
    gold = read_links(args.gold_align, one_indexed=args.gold_one_indexed, src_lens=src_lens, tgt_lens=tgt_lens)
    base = "1-indexed" if args.gold_one_indexed else "0-indexed"
    if "aer" in metrics:
        v = aer(hard, gold)
        rows.append(("AER", f"{v:.2f}", f"argmax attention per output token, words; gold {base}"))
        out["aer"] = {"score": v, "links": sum(map(len, hard))}
    if "saer" in metrics:
        v = saer(soft, gold)
        rows.append(("SAER", f"{v:.2f}", "soft attention projected to words (Tu et al. 2016)"))
        out["saer"] = {"score": v}


# --------------------------------------------------------------------------- output


def format_table(rows: list[Row]) -> str:
    """Rows ``(metric, value, note)`` as an aligned plain-text table."""
    w0 = max([len("metric")] + [len(r[0]) for r in rows])
    w1 = max([len("value")] + [len(r[1]) for r in rows])
    lines = [f"{'metric':<{w0}}  {'value':>{w1}}  note", f"{'-' * w0}  {'-' * w1}  {'-' * 4}"]
    lines += [f"{m:<{w0}}  {v:>{w1}}  {n}" for m, v, n in rows]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    metrics = _select_metrics(args)
    t0 = time.perf_counter()
    rows: list[Row] = []
    results: dict[str, Any] = {
        "inputs": {
            k: (str(v) if v is not None else None)
            for k, v in (("hyp", args.hyp), ("ref", args.ref), ("src", args.src), ("hyp2", args.hyp2),
                         ("attention", args.attention), ("gold_align", args.gold_align),
                         ("align_model", args.align_model))
        },
        "tokenized_input": args.tokenized,
        "languages": [args.src_lang, args.tgt_lang],
        "metrics": metrics,
    }
    if any(m in TEXT_METRICS for m in metrics) or args.hyp2 is not None:
        _text_metrics(args, metrics, rows, results)
    if any(m in ATTN_METRICS for m in metrics):
        _attention_metrics(args, metrics, rows, results)
    results["seconds"] = time.perf_counter() - t0
    title = f"scanmt evaluate: {args.hyp or args.attention}"
    if "sentences" in results:
        title += f" ({results['sentences']} sentences)"
    print(title)
    print(format_table(rows))
    if args.json is not None:
        with atomic_open(args.json) as fh:
            json.dump(results, fh, indent=2, ensure_ascii=False)
            fh.write("\n")
        print(f"results written to {args.json}")
    return 0
