"""``scanmt translate``: translate a file with a trained checkpoint."""

from __future__ import annotations

import argparse
import sys
import time

from scanmt.cli import positive_int
from scanmt.data.attention_file import save_attention
from scanmt.errors import ConfigError
from scanmt.io import is_stdio, read_lines, write_lines

NAME = "translate"
HELP = "translate raw text with a checkpoint (beam search or greedy)"
DESCRIPTION = """Translate a file of raw sentences (one per line) with a trained checkpoint.

  scanmt translate --model runs/softmax/best.pt --input test.de --output test.hyp.en --beam 5
  scanmt translate ... --attention-out test.attn.npz    # attention matrices for plots and metrics
  sacremoses ... | scanmt translate --model best.pt --input - --output - > out.en   # a pipe

The output is detokenized text, one line per input line (an empty line stays empty), written
atomically to a file (a device or pipe, such as /dev/stdout, is written directly)."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="checkpoint (best.pt or last.pt of a run)")
    p.add_argument("--input", required=True,
                   help="raw source sentences, one per line (UTF-8, .gz allowed; - for standard input)")
    p.add_argument("--output", required=True,
                   help="where to write the detokenized translations (- for standard output)")
    p.add_argument("--beam", type=positive_int, default=None,
                   help="beam size; 1 = greedy (default: the checkpoint's decode.beam)")
    p.add_argument("--max-len", type=positive_int, default=None, metavar="N",
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
    p.add_argument("--batch-size", type=positive_int, default=None,
                   help="sentences per decoding batch (default: the checkpoint's decode.batch_size)")
    p.add_argument("--attention-out", help="write attention matrices (.npz, one entry per sentence)")
    p.add_argument("--tokenized-out", help="also write the Moses-tokenized output (for tokenized BLEU, REP)")
    p.add_argument("--fertility", metavar="FILE",
                   help="fertility bounds for a constrained model, one line per input sentence with one positive "
                        "number per source subword (overrides the checkpoint's fertility strategy)")
    p.add_argument("--force-target", metavar="FILE",
                   help="forced decoding of these raw target sentences instead of search: --output gets "
                        "log P(target|source) per line, --attention-out the attention (for AER/SAER)")
    p.add_argument("--device", default="cpu", help="cpu or cuda[:N]")


def run(args: argparse.Namespace) -> int:
    from scanmt.decoding.translator import Translator

    check_stdio(args)
    lines = read_lines(args.input, what="input file", allow_empty=not args.force_target)
    tr = Translator.from_checkpoint(args.model, device=args.device)
    if args.penalties:
        from scanmt.cli.tune_penalties import load_penalties

        for k, v in load_penalties(args.penalties).items():
            setattr(tr.decode, k, v)
    for key in ("length_alpha", "coverage_beta", "coverage_eps", "penalty_mode"):
        if getattr(args, key) is not None:
            setattr(tr.decode, key, getattr(args, key))
    from scanmt.config import check_penalty_config

    check_penalty_config(tr.decode)
    if args.batch_size:
        tr.decode.batch_size = args.batch_size
    beam = tr.decode.beam if args.beam is None else args.beam
    fertility = None
    if args.fertility:
        from scanmt.data.fertility import read_fertility

        lens = [len(p) for p in tr.pipeline.source_pieces_all(lines)]
        fertility = read_fertility(args.fertility, src_lens=lens, src_path=args.input)
    t0 = time.time()
    if args.force_target:
        from scanmt.io import check_parallel

        targets = read_lines(args.force_target, what="target file")
        check_parallel(lines, targets, args.input, args.force_target)
        out = tr.force(lines, targets, progress=True)
        write_lines(args.output, [f"{t.hypothesis.log_prob:.4f}" for t in out])
        beam = 0
    else:
        out = tr.translate_lines(lines, beam=beam, progress=True, source=source_name(args.input), fertility=fertility,
                                 max_len=args.max_len)
        write_lines(args.output, [t.text for t in out])
    dt = time.time() - t0
    if args.tokenized_out:
        write_lines(args.tokenized_out, [tr.pipeline.tokenized_target(t.pieces) for t in out])
    if args.attention_out:
        sents = [t.sentence_attention() for t in out]
        save_attention(args.attention_out, sents, {"transform": tr.model.cfg.attention.transform, "sink": tr.model.sink})
    report(args, tr, out, beam, dt)
    return 0


def source_name(path: str) -> str:
    return "<stdin>" if is_stdio(path) else path


def check_stdio(args: argparse.Namespace) -> None:
    """At most one file read from standard input and one written to standard output (not the binary attention)."""
    if args.attention_out and is_stdio(args.attention_out):
        raise ConfigError("--attention-out -: the attention file is binary (.npz); give a file name")
    for kind, options in (("input", ("input", "force_target", "fertility")), ("output", ("output", "tokenized_out"))):
        named = [f"--{o.replace('_', '-')}" for o in options if is_stdio(getattr(args, o) or "")]
        if len(named) > 1:
            raise ConfigError(f"{' and '.join(named)} are all -: only one of them can be standard {kind}")


def report(args: argparse.Namespace, tr, out: list, beam: int, dt: float) -> None:
    """The summary, on standard error when a translation goes to standard output."""
    to = sys.stderr if is_stdio(args.output) or is_stdio(args.tokenized_out or "") else sys.stdout
    n_tok = sum(len(t.pieces) + 1 for t in out)
    print(f"translated {len(out)} sentences from {source_name(args.input)} -> {args.output}", file=to)
    mode = "forced (log-probabilities written)" if args.force_target else ("greedy" if beam <= 1 else f"beam {beam}")
    d = tr.decode
    pen = "" if beam <= 1 or args.force_target else (
        f", length alpha {d.length_alpha:g}, coverage beta {d.coverage_beta:g} (eps {d.coverage_eps:g}), "
        f"penalties: {d.penalty_mode}"
    )
    print(f"  decoding: {mode}{pen}", file=to)
    print(f"  time: {dt:.1f} s, {len(out) / max(dt, 1e-9):.1f} sentences/s, {n_tok / max(dt, 1e-9):.0f} tokens/s", file=to)
    if args.attention_out:
        print(f"  attention: {args.attention_out}", file=to)
