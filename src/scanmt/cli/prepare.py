"""``scanmt prepare``: tokenize, learn joint BPE, write vocabulary and encoded splits."""

from __future__ import annotations

import argparse
from pathlib import Path

from scanmt.cli import positive_int
from scanmt.data import multi30k
from scanmt.data.prepare import SplitFiles, prepare
from scanmt.errors import DataError

NAME = "prepare"
HELP = "prepare parallel data: Moses tokenization, joint BPE (sentencepiece), vocabulary"
DESCRIPTION = """Prepare a parallel corpus for training.

Multi30k by name:   scanmt prepare --corpus multi30k --pair de-en --out runs/data/multi30k-de-en
Your own files:     scanmt prepare --train a.de a.en --valid b.de b.en --test c.de c.en --pair de-en --out DIR

Multi30k files are looked up in --mirror, $SCANMT_MULTI30K and ../shared/data/multi30k
before anything is downloaded from github.com/multi30k/dataset."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--corpus", choices=["multi30k"], help="a known corpus to fetch by name")
    p.add_argument("--pair", required=True, help="language pair SRC-TGT, e.g. de-en")
    p.add_argument("--mirror", help="local directory holding Multi30k's {split}.{lang}.gz files")
    p.add_argument("--train", nargs=2, metavar=("SRC", "TGT"), help="raw training files (one sentence per line)")
    p.add_argument("--valid", nargs=2, metavar=("SRC", "TGT"), help="raw validation files")
    p.add_argument("--test", nargs=2, metavar=("SRC", "TGT"), help="raw test files")
    p.add_argument("--out", required=True,
                   help="output folder for the prepared data: new, empty, or an earlier preparation")
    p.add_argument("--vocab-size", type=positive_int, default=8000, help="joint BPE vocabulary size")
    p.add_argument("--force", action="store_true",
                   help="replace an earlier preparation in --out made with other settings (only its own files: "
                        "anything else there is kept)")


def parse_pair(pair: str) -> tuple[str, str]:
    parts = pair.split("-")
    if len(parts) != 2 or not all(parts):
        raise DataError(f"--pair {pair!r}: expected SRC-TGT such as de-en")
    return parts[0], parts[1]


def multi30k_splits(src: str, tgt: str, mirror: str | None) -> dict[str, SplitFiles]:
    return {
        name: SplitFiles(multi30k.locate(upstream, src, mirror), multi30k.locate(upstream, tgt, mirror))
        for name, upstream in multi30k.prepared_splits(src, tgt).items()
    }


def run(args: argparse.Namespace) -> int:
    src, tgt = parse_pair(args.pair)
    if args.corpus == "multi30k":
        splits = multi30k_splits(src, tgt, args.mirror)
    else:
        if not (args.train and args.valid):
            raise DataError("give --corpus multi30k, or at least --train SRC TGT and --valid SRC TGT")
        splits = {"train": SplitFiles(Path(args.train[0]), Path(args.train[1])),
                  "valid": SplitFiles(Path(args.valid[0]), Path(args.valid[1]))}
        if args.test:
            splits["test"] = SplitFiles(Path(args.test[0]), Path(args.test[1]))
    meta = prepare(splits, src, tgt, args.out, vocab_size=args.vocab_size, force=args.force)
    print(f"prepared {src}->{tgt} data in {args.out}")
    print(f"  vocabulary: {meta['vocab']} symbols (joint BPE, {meta['vocab_size']} pieces)")
    for name, n in meta["sizes"].items():
        print(f"  {name:10s} {n:7d} sentence pairs")
    return 0
