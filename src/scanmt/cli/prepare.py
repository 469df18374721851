"""``scanmt prepare``: tokenize, learn joint BPE, write vocabulary and encoded splits."""

from __future__ import annotations

import argparse

from scanmt.api.prepare import PrepareRequest, prepare
from scanmt.api.prepare import multi30k_splits, parse_pair  # noqa: F401 - this module's names before the API
from scanmt.api.requests import request_from_namespace
from scanmt.cli import positive_int

NAME = "prepare"
HELP = "prepare parallel data: word tokenization (Moses; MeCab for Japanese), joint BPE (sentencepiece), vocabulary"
DESCRIPTION = """Prepare a parallel corpus for training.

Multi30k by name:   scanmt prepare --corpus multi30k --pair de-en --out runs/data/multi30k-de-en
KFTT by name:       scanmt prepare --corpus kftt --pair ja-en --out runs/data/kftt-ja-en
Your own files:     scanmt prepare --train a.de a.en --valid b.de b.en --test c.de c.en --pair de-en --out DIR

Multi30k files are looked up in --mirror, $SCANMT_MULTI30K and ../shared/data/multi30k
before anything is downloaded from github.com/multi30k/dataset.  KFTT (the Kyoto Free
Translation Task, Japanese-English: --pair ja-en or en-ja) is looked up in --mirror,
$SCANMT_KFTT and ../shared/data/kftt ({train,dev,test}.{ja,en}.gz; dev becomes valid) and
never downloaded; it keeps training pairs of 1-40 words on both sides, as the paper did,
and learns 16000 joint subwords (docs/japanese.md).

Words come from the language's tokenizer (scanmt.data.tokenize): MeCab with unidic-lite
for Japanese (ja), Moses for the others."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--corpus", choices=["multi30k", "kftt"],
                   help="a known corpus by name: multi30k (de, en, fr, cs) or kftt (ja-en, en-ja)")
    p.add_argument("--pair", required=True, help="language pair SRC-TGT, e.g. de-en")
    p.add_argument("--mirror", help="local directory holding the corpus's {split}.{lang}.gz files")
    p.add_argument("--train", nargs=2, metavar=("SRC", "TGT"), help="raw training files (one sentence per line)")
    p.add_argument("--valid", nargs=2, metavar=("SRC", "TGT"), help="raw validation files")
    p.add_argument("--test", nargs=2, metavar=("SRC", "TGT"), help="raw test files")
    p.add_argument("--out", required=True,
                   help="output folder for the prepared data: new, empty, or an earlier preparation")
    p.add_argument("--vocab-size", type=positive_int, default=None,
                   help="joint BPE vocabulary size (default: 8000; 16000 for --corpus kftt)")
    p.add_argument("--max-train-words", type=positive_int, default=None, metavar="N",
                   help="keep only training pairs with 1 to N words (tokenized) on both sides, dropping empty lines "
                        "too (default: all pairs; 40 for --corpus kftt)")
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
    if r.train_read is not None:
        print(f"  (train: {r.sizes['train']} of {r.train_read} pairs have 1-{r.max_train_words} words on both sides)")
    return 0
