"""``scanmt prepare``: tokenize, learn joint BPE, write vocabulary and encoded splits."""

from __future__ import annotations

import argparse

from scanmt.api.prepare import PrepareRequest, prepare
from scanmt.api.prepare import multi30k_splits, parse_pair  # noqa: F401 - this module's names before the API
from scanmt.api.requests import request_from_namespace
from scanmt.cli import positive_int

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


def request_from_args(args: argparse.Namespace) -> PrepareRequest:
    return request_from_namespace(PrepareRequest, args)


def run(args: argparse.Namespace) -> int:
    r = prepare(request_from_args(args))
    print(f"prepared {r.src_lang}->{r.tgt_lang} data in {r.out}")
    print(f"  vocabulary: {r.vocab} symbols (joint BPE, {r.vocab_size} pieces)")
    for name, n in r.sizes.items():
        print(f"  {name:10s} {n:7d} sentence pairs")
    return 0
