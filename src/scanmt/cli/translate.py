"""``scanmt translate``: translate a file with a trained checkpoint."""

from __future__ import annotations

import argparse
import sys

from scanmt.api.requests import request_from_namespace
from scanmt.api.translate import TranslateRequest, translate_file
from scanmt.io import is_stdio

NAME = "translate"
HELP = "translate raw text with a checkpoint (beam search or greedy)"
DESCRIPTION = """Translate a file of raw sentences (one per line) with a trained checkpoint.

  scanmt translate --model runs/softmax/best.pt --input test.de --output test.hyp.en --beam 5
  scanmt translate ... --attention-out test.attn.npz    # attention matrices for plots and metrics
  scanmt translate ... --search-stats test.search.json  # output support and exact searches (sparse outputs)
  sacremoses ... | scanmt translate --model best.pt --input - --output - > out.en   # a pipe

The output is detokenized text, one line per input line (an empty line stays empty), written
atomically to a file (a device or pipe, such as /dev/stdout, is written directly)."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options; their ranges are checked by :class:`TranslateRequest` (the same for the API)."""
    p.add_argument("--model", required=True, help="checkpoint (best.pt or last.pt of a run)")
    p.add_argument("--input", required=True,
                   help="raw source sentences, one per line (UTF-8, .gz allowed; - for standard input)")
    p.add_argument("--output", required=True,
                   help="where to write the detokenized translations (- for standard output)")
    p.add_argument("--beam", type=int, default=None,
                   help="beam size; 1 = greedy (default: the checkpoint's decode.beam)")
    p.add_argument("--max-len", type=int, default=None, metavar="N",
                   help="cut source sentences longer than N subwords to their first N, with a warning that counts "
                        "them (default: translate every sentence in full)")
    p.add_argument("--length-alpha", type=float, default=None,
                   help="Wu et al. length penalty alpha, lp = ((5+|Y|)/6)^alpha (default: the checkpoint's)")
    p.add_argument("--coverage-beta", type=float, default=None,
                   help="coverage penalty weight beta, cp = beta * sum_j log max(eps, min(1, sum_t a_tj)); "
                        "0 disables (default: the checkpoint's)")
    p.add_argument("--coverage-eps", type=float, default=None, help="eps of the coverage penalty (default: the checkpoint's)")
    p.add_argument("--penalty-mode", choices=("rescore", "step"), default=None,
                   help="penalties only rank finished hypotheses (rescore) or rank the beam at every step (step)")
    p.add_argument("--penalties", metavar="FILE",
                   help="length/coverage penalty settings written by `scanmt tune-penalties` (the options above "
                        "override it)")
    p.add_argument("--min-output-len", type=int, default=None, metavar="N",
                   help="no </s> before N output tokens (default: the checkpoint's decode.min_len, 1 unless trained "
                        "with another; 0 lets a non-empty source get an empty translation, OpenNMT-py's default)")
    p.add_argument("--batch-size", type=int, default=None,
                   help="sentences per decoding batch (default: the checkpoint's decode.batch_size)")
    p.add_argument("--attention-out", help="write attention matrices (.npz, one entry per sentence)")
    p.add_argument("--tokenized-out", help="also write the tokenized output (for tokenized BLEU, REP)")
    p.add_argument("--fertility", metavar="FILE",
                   help="fertility bounds for a constrained model, one line per input sentence with one positive "
                        "number per source subword (overrides the checkpoint's fertility strategy)")
    p.add_argument("--force-target", metavar="FILE",
                   help="forced decoding of these raw target sentences instead of search: --output gets "
                        "log P(target|source) per line, --attention-out the attention (for AER/SAER); the summary "
                        "gives the target file's perplexity, as validation computes it")
    p.add_argument("--max-source-len", type=int, default=None, metavar="N",
                   help="refuse (before any decoding, naming the line) a source sentence of more than N subwords, "
                        "as decoding memory grows with the square of the length (default: the checkpoint's "
                        "decode.max_source_len, 1000 unless trained with another)")
    p.add_argument("--search-stats", metavar="FILE",
                   help="also write what the searches did as JSON (- for standard output): the model's output layer, "
                        "the beam, sentences searched (empty lines left out), mean_support (words of nonzero "
                        "probability per output step, </s> included; the vocabulary size for softmax), exact and "
                        "exact_share (searches that provably found the best output), forced (outputs ended by a "
                        "zero-probability </s>); not with --force-target")
    p.add_argument("--device", default="cpu", help="cpu or cuda[:N]")


def request_from_args(args: argparse.Namespace) -> TranslateRequest:
    return request_from_namespace(TranslateRequest, args)


def run(args: argparse.Namespace) -> int:
    request = request_from_args(args)
    result = translate_file(request)
    # the summary goes to standard error when a translation goes to standard output
    to = sys.stderr if any(is_stdio(path or "") for path in (request.output, request.tokenized_out,
                                                             request.search_stats)) else sys.stdout
    print(result.summary(request), file=to)
    return 0
