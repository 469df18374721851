"""``scanmt evaluate``: score any system's output with every metric the papers report.

Which metrics, their inputs and how each is computed: :mod:`scanmt.api.evaluate`.
This module parses the options and prints the table.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from scanmt.api.evaluate import METRICS, EvaluateRequest, json_written, score
from scanmt.api.requests import request_from_namespace

NAME = "evaluate"
HELP = "score a translation: BLEU, METEOR, REP, DROP, AER/SAER and attention statistics"
DESCRIPTION = """\
Score any system's output against a reference; prints a table (and JSON with --json).

  scanmt evaluate --hyp test.hyp.en --ref test.en --src test.de --align-model DATA/align --json m.json
  scanmt evaluate --hyp a.hyp.en --hyp2 b.hyp.en --ref test.en        # paired bootstrap a vs b
  scanmt evaluate --attention rwth.attn.npz --gold-align test.talp --gold-one-indexed   # AER/SAER

Text metrics: bleu (sacrebleu, detokenized, cased), tok-bleu (tokenized: Moses, MeCab for
Japanese; lowercased, like multi-bleu -lc), meteor (nltk, WordNet synonyms), rep (REP-score), drop (DROP-score, needs --src
and --align-model). Attention metrics need --attention: attn-stats, and aer/saer with --gold-align
(attention from forced decoding of the gold targets). Metrics whose inputs are given run by default.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("text")
    g.add_argument("--hyp", type=Path, metavar="FILE", help="system output, one sentence per line")
    g.add_argument("--ref", type=Path, metavar="FILE", help="reference translations, line-aligned with --hyp")
    g.add_argument("--src", type=Path, metavar="FILE", help="source sentences (needed for drop)")
    g.add_argument("--hyp2", type=Path, metavar="FILE", help="a second system: paired bootstrap of BLEU against --hyp")
    g.add_argument(
        "--tokenized",
        action="store_true",
        help="--src/--hyp/--ref/--hyp2 are already tokenized (they are detokenized for sacrebleu BLEU); "
        "by default they are detokenized text and are tokenized here",
    )
    g.add_argument("--src-lang", default="de", metavar="LANG", help="source language (its tokenizer: MeCab for ja, Moses rules otherwise)")
    g.add_argument("--tgt-lang", default="en", metavar="LANG", help="target language (its tokenizer: MeCab for ja, Moses rules otherwise)")
    g.add_argument(
        "--align-model",
        type=Path,
        metavar="DIR",
        help="word-level aligner from `scanmt align` (ALIGN_DIR or ALIGN_DIR/word), used for drop",
    )
    g.add_argument(
        "--drop-samples",
        type=int,
        default=1,
        metavar="K",
        help="drop: align source-reference and source-output K times each and report the mean DROP over the "
        "K×K pairings with its standard deviation. eflomal samples at random and cannot be seeded: on 1,000 "
        "Multi30k test sentences one alignment varies by about 0.1 DROP points. Each sample costs one alignment "
        "of each side (seconds per 1,000 sentences)",
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


def request_from_args(args: argparse.Namespace) -> EvaluateRequest:
    return request_from_namespace(EvaluateRequest, args)


def run(args: argparse.Namespace) -> int:
    request = request_from_args(args)
    result = score(request)
    print(result.summary())  # before the JSON is written, as a failed write leaves the table on screen
    if request.json is not None:
        result.write_json(request.json)
        print(json_written(request.json))
    return 0
