"""How much does a model want to stop before its first word? (docs/results.md, section 6, Fr→En)

For each checkpoint and source file, one decoder step per sentence gives ``log P(</s>)`` as the first
output word. Prints its median and maximum over the sentences, and the number of sentences where
``</s>`` ranks among the ``--beam`` best first words: only there can ``decode.min_len`` 1 change what a
beam of that size returns, compared with ``min_len`` 0 (which lets an empty translation win when
``length_alpha`` is 0).

    python scripts/first_word_eos.py ../grid/table1/runs/softmax/seed1/best.pt=../grid/table1/shared/data/test.raw.de
"""

from __future__ import annotations

import argparse
import statistics

import torch

from scanmt.data.dataset import ParallelData
from scanmt.data.vocab import EOS_ID
from scanmt.decoding.translator import Translator
from scanmt.io import read_lines


def first_step_eos(tr: Translator, lines: list[str], beam: int) -> tuple[list[float], int]:
    """``(log P(</s> first) per sentence, sentences where </s> is among the beam best first words)``."""
    pieces = tr.pipeline.source_pieces_all(lines)
    vocab = tr.pipeline.vocab
    data = ParallelData([vocab.encode(p) for p in pieces], [[] for _ in pieces])
    if tr.model.constrained:
        data = data.with_fertility(tr.source_bounds(pieces))
    logp: list[float] = [0.0] * len(lines)
    in_beam = 0
    with torch.no_grad():
        for positions, batch, fert in tr._batches(data):
            logits = tr.model(batch.src, batch.src_len, batch.tgt_in, fert).logits[:, 0].float()
            lp = torch.log_softmax(logits, -1)
            rank = (lp > lp[:, EOS_ID : EOS_ID + 1]).sum(1)
            in_beam += int((rank < beam).sum())
            for row, p in enumerate(positions):
                logp[p] = float(lp[row, EOS_ID])
    return logp, in_beam


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pairs", nargs="+", metavar="CHECKPOINT=SOURCE", help="a checkpoint and a raw source file")
    ap.add_argument("--beam", type=int, default=5, help="beam size whose first step is checked")
    args = ap.parse_args()
    torch.set_num_threads(1)
    print(f"| checkpoint | source | sentences | median log P(</s> first) | max | </s> among the {args.beam} best first words |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for pair in args.pairs:
        ckpt, _, src = pair.partition("=")
        if not src:
            ap.error(f"{pair!r}: expected CHECKPOINT=SOURCE")
        lines = [ln for ln in read_lines(src, allow_empty=True) if ln.strip()]
        logp, in_beam = first_step_eos(Translator.from_checkpoint(ckpt), lines, args.beam)
        print(f"| {ckpt} | {src} | {len(lines)} | {statistics.median(logp):.2f} | {max(logp):.2f} | {in_beam} |",
              flush=True)


if __name__ == "__main__":
    main()
