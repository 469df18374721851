"""Joint subword vocabulary sizes on a prepared corpus: sequence lengths, coverage and output-layer cost.

    scanmt prepare --corpus kftt --pair ja-en --out /tmp/kftt-probe          # any --vocab-size: only its .tok files are read
    OMP_NUM_THREADS=1 python benchmarks/subword_vocab_size.py --data /tmp/kftt-probe --sizes 8000 16000 32000

For each size, learns the joint sentencepiece BPE model exactly as ``scanmt prepare`` does
(:func:`scanmt.data.subword.train_subword_model` on ``train.tok.{src,tgt}``; timed), encodes the splits and prints:

- subwords per sentence on each side (train, valid, test): the LSTM's steps, which drive its cost;
- the share of the target's words (valid) that are one subword, and of its subwords that are ``<unk>``;
- the NMT vocabulary (what ``prepare`` writes to vocab.txt: the pieces seen in training plus the specials),
  how many of its symbols ever occur on the target side of train, and the decoder's output layer for a
  ``--hidden`` state: its parameters and its multiply-adds per target sentence of valid
  (vocabulary x hidden x target subwords).

docs/japanese.md reports the numbers for KFTT and the size chosen.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from scanmt.data.subword import SubwordModel, train_subword_model
from scanmt.data.vocab import SPECIALS, Vocab
from scanmt.io import read_lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="a prepared folder (its train/valid/test .tok files are used)")
    ap.add_argument("--sizes", type=int, nargs="+", default=[8000, 16000, 32000], help="sentencepiece vocabulary sizes")
    ap.add_argument("--hidden", type=int, default=500, help="decoder state size feeding the output layer (paper: 500)")
    args = ap.parse_args()
    data = Path(args.data)
    meta = json.loads((data / "meta.json").read_text(encoding="utf-8"))
    src, tgt = meta["src_lang"], meta["tgt_lang"]
    splits = [s for s in ("train", "valid", "test") if s in meta["splits"]]
    tok = {(s, lang): read_lines(data / f"{s}.tok.{lang}") for s in splits for lang in (src, tgt)}
    print(f"{data}: {src}->{tgt}, " + ", ".join(f"{s} {len(tok[s, src])}" for s in splits) + " sentences")
    header = ["size", "learn s", *[f"{s} {lang}" for s in splits for lang in (src, tgt)],
              f"1-piece {tgt} words", "unk", "NMT vocab", f"on {tgt} side", "out params", "out MACs/sent"]
    print(" | ".join(header))
    for size in args.sizes:
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            model = train_subword_model([data / f"train.tok.{src}", data / f"train.tok.{tgt}"], Path(tmp) / "spm", size)
            seconds = time.perf_counter() - start
            sp = SubwordModel(model)
        pieces = {key: sp.encode_all(lines) for key, lines in tok.items()}
        lengths = [statistics.fmean(len(p) for p in pieces[s, lang]) for s in splits for lang in (src, tgt)]
        valid_words = [w for line in tok["valid", tgt] for w in line.split()]
        whole = statistics.fmean(len(sp.encode(w)) == 1 for w in valid_words)
        valid_pieces = [p for ps in pieces["valid", tgt] for p in ps]
        unk = statistics.fmean(sp.sp.piece_to_id(p) == sp.sp.unk_id() for p in valid_pieces)
        vocab = Vocab.build(pieces["train", src] + pieces["train", tgt])
        on_target = len({p for ps in pieces["train", tgt] for p in ps})
        out_params = len(vocab) * (args.hidden + 1)
        macs = len(vocab) * args.hidden * statistics.fmean(len(p) + 1 for p in pieces["valid", tgt])  # + </s>
        row = [str(size), f"{seconds:.0f}", *[f"{x:.1f}" for x in lengths], f"{100 * whole:.1f} %", f"{100 * unk:.3f} %",
               str(len(vocab)), f"{on_target + len(SPECIALS)}", f"{out_params / 1e6:.1f} M", f"{macs / 1e6:.0f} M"]
        print(" | ".join(row), flush=True)


if __name__ == "__main__":
    main()
