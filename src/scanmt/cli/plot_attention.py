"""``scanmt plot-attention``: draw attention maps (paper Figure 2 style), systems side by side.

``--attention`` takes one ``.npz`` file per system (from ``scanmt translate
--attention-out`` on the same test set); each figure shows the same sentence
for every system.  ``--index N`` draws sentence N (0-based) to ``--out``;
``--sample K`` draws K random sentences to ``OUT_STEM.N.png`` beside ``--out``.
"""

from __future__ import annotations

import argparse
import logging
import random
from pathlib import Path

from scanmt.errors import ConfigError, DataError
from scanmt.viz.attention_map import DPI_RANGE, check_dpi

NAME = "plot-attention"
HELP = "draw attention maps (source on x, output on y, white = 0), several systems side by side"
DESCRIPTION = """\
Draw the attention of one or more systems for the same sentence, side by side, in the style of
Malaviya et al. (2018) Figure 2: source subwords on the x axis, output subwords on the y axis,
a grey scale with white for exactly zero. No display is needed.

  scanmt plot-attention --attention a.npz b.npz --names softmax csparsemax --index 12 --out map.png
  scanmt plot-attention --attention a.npz --sample 5 --out maps.png     # maps.N.png for 5 random sentences
"""

log = logging.getLogger(__name__)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--attention",
        type=Path,
        nargs="+",
        required=True,
        metavar="FILE",
        help="attention .npz file(s), one per system, all for the same test set",
    )
    p.add_argument("--names", nargs="+", metavar="NAME", help="system names for the panels (default: the file names)")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--index", type=int, metavar="N", help="the sentence to draw (0-based line number)")
    which.add_argument("--sample", type=int, metavar="K", help="draw K randomly chosen sentences")
    p.add_argument(
        "--out",
        type=Path,
        required=True,
        metavar="PNG",
        help="output PNG; with --sample, files are named OUT_STEM.N.png in the same directory",
    )
    p.add_argument("--seed", type=int, default=1, help="random seed for --sample")
    p.add_argument(
        "--max-source-len",
        type=int,
        default=40,
        help="--sample only picks sentences with at most this many source tokens (readability)",
    )
    p.add_argument("--hide-specials", action="store_true", help="leave out the <sink> column and the final </s> row")
    p.add_argument("--dpi", type=_dpi, default=100,
                   help=f"resolution of the PNG, from {DPI_RANGE[0]} to {DPI_RANGE[1]} dots per inch")


def _dpi(text: str) -> int:
    """An ``argparse`` type: a whole number in :data:`~scanmt.viz.attention_map.DPI_RANGE`."""
    try:
        return check_dpi(int(text))
    except (ValueError, ConfigError) as exc:
        message = str(exc) if isinstance(exc, ConfigError) else f"expected a whole number, got {text!r}"
        raise argparse.ArgumentTypeError(message.replace("--dpi ", "")) from None


def _panel(name: str, sent, hide_specials: bool):
    from scanmt.metrics.aer import strip_specials
    from scanmt.viz.attention_map import Panel

    a, src, hyp = (sent.attention, sent.src, sent.hyp)
    if hide_specials:
        a, src, hyp = strip_specials(a, src, hyp, sink=sent.has_sink)
    return Panel(name=name, attention=a, src=list(src), hyp=list(hyp))


def run(args: argparse.Namespace) -> int:
    from scanmt.data.attention_file import AttentionFile
    from scanmt.viz.attention_map import plot_attention_maps

    if args.out.is_dir():
        raise ConfigError(f"--out {args.out}: is a folder; give the name of a PNG file to write")
    names = args.names or [p.stem for p in args.attention]
    if len(names) != len(args.attention):
        raise ConfigError(f"--names gives {len(names)} names for {len(args.attention)} attention files")
    files = [AttentionFile(p) for p in args.attention]
    n = len(files[0])
    for f in files[1:]:
        if len(f) != n:
            raise DataError(f"{f.path} has {len(f)} sentences but {files[0].path} has {n}: not the same test set")
    if args.index is not None:
        indices = [args.index]
        outs = [args.out]
    else:
        if args.sample < 1:
            raise ConfigError(f"--sample must be >= 1, got {args.sample}")
        short = [i for i in range(n) if len(files[0].source(i)) <= args.max_source_len
                 and all(f.has(i) for f in files)]  # (a partial file, restored from an archive, lacks some)
        if not short:
            raise DataError(f"{files[0].path}: no sentence has at most {args.max_source_len} source tokens"
                            + ("" if all(f.rows is None for f in files) else " and its attention in every file"))
        indices = sorted(random.Random(args.seed).sample(short, min(args.sample, len(short))))
        outs = [args.out.with_name(f"{args.out.stem}.{i}{args.out.suffix or '.png'}") for i in indices]
    written = []
    for i, out in zip(indices, outs):
        sents = [f[i] for f in files]  # DataError names the file for an index out of range
        srcs = {tuple(s.words) for s in sents}
        if len(srcs) > 1:
            log.warning("sentence %d: the systems' source tokens differ (different subword models?)", i)
        panels = [_panel(name, s, args.hide_specials) for name, s in zip(names, sents)]
        size = plot_attention_maps(panels, out, title=f"sentence {i}", dpi=args.dpi)
        written.append((i, out, size))
    print(f"scanmt plot-attention: {len(written)} figure(s), {len(files)} system(s): {', '.join(names)}")
    w = max(len(str(o)) for _, o, _ in written)
    print(f"  {'sentence':>8}  {'file':<{w}}  pixels")
    for i, out, (pw, ph) in written:
        print(f"  {i:>8}  {str(out):<{w}}  {pw}x{ph}")
    return 0
