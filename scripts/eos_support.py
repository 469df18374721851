"""Does a sparse output layer leave a sentence unable to end?  Teacher-forced references against over-long outputs.

    python scripts/eos_support.py --data runs/sparse-seq2seq/shared/data --split test2017 \
        runs/sparse-seq2seq/runs/softmax/seed1 runs/sparse-seq2seq/runs/softmax-out15/seed1

For each run folder (its ``best.pt`` and its ``SPLIT.hyp.tok.en``), the model reads the split's references
teacher-forced, and the script reports:

* at the reference's last step, where the next reference token is ``</s>``: the median probability of
  ``</s>`` and the share of sentences where it is exactly 0 (a sparse output, ``model.output: entmax15`` or
  another, gives most words exactly zero; a softmax output never does), and the share of the earlier steps
  where ``</s>`` is exactly 0;
* the run's over-long outputs (tokenized hypotheses longer than ``--long`` times their reference), split by
  whether ``</s>`` had zero probability at the reference's end.

Where the output cannot end a sentence at the reference's length, the search has to go on, and the output runs
long.  REP (the paper's repetition score) counts such tails.  docs/results.md, section 6c, has the numbers.
Models with fertility-bounded attention need fertility for their source and are not supported here.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import torch

from scanmt.config import Config
from scanmt.data.dataset import ParallelData
from scanmt.data.pipeline import TextPipeline
from scanmt.data.vocab import EOS_ID, PAD_ID
from scanmt.io import read_lines
from scanmt.model.build import build_model
from scanmt.model.checkpoint import load_checkpoint
from scanmt.model.output import output_probs


def eos_at_reference_end(run: Path, data_dir: Path, split: str, batch: int) -> tuple[Config, list[float], float, list[int]]:
    """``(the run's config, P(</s>) at each reference's end by line, share of earlier steps with P(</s>) = 0, lines
    where it is 0 at the end)``."""
    ckpt = load_checkpoint(run / "best.pt")
    cfg = Config.from_dict(ckpt["config"])
    s, t = cfg.data.src_lang, cfg.data.tgt_lang
    pipeline = TextPipeline.from_data_dir(data_dir, s, t)
    data = ParallelData.from_files(data_dir / f"{split}.bpe.{s}", data_dir / f"{split}.bpe.{t}", pipeline.vocab, max_len=0)
    model = build_model(cfg, len(pipeline.vocab))
    model.load_state_dict(ckpt["model"])
    model.eval()
    if model.constrained:
        raise SystemExit(f"{run}: fertility-bounded attention (model.attention.transform="
                         f"{cfg.model.attention.transform}) needs fertility for its source; not supported here")
    at_end: dict[int, float] = {}
    zero_before = steps_before = 0
    with torch.no_grad():
        for i in range(0, len(data), batch):
            b = data.make_batch(list(range(i, min(i + batch, len(data)))))
            logits = model(b.src, b.src_len, b.tgt_in, None).logits.float()
            p_eos = output_probs(logits, cfg.model.output, cfg.model.output_alpha)[..., EOS_ID]  # [B, T]
            lengths = (b.tgt_out != PAD_ID).sum(1)
            for r in range(p_eos.shape[0]):
                end = int(lengths[r]) - 1  # tgt_out[r, end] is </s>
                at_end[int(b.index[r])] = float(p_eos[r, end])
                zero_before += int((p_eos[r, :end] == 0).sum())
                steps_before += end
    by_line = [at_end[k] for k in sorted(at_end)]
    zeros = [k for k in sorted(at_end) if at_end[k] == 0.0]
    return cfg, by_line, zero_before / max(1, steps_before), zeros


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path, help="run folders (best.pt and SPLIT.hyp.tok.en in each)")
    ap.add_argument("--data", type=Path, required=True, help="the prepared data folder the runs were trained on")
    ap.add_argument("--split", default="test2017", help="the prepared split to read (SPLIT.bpe.*, SPLIT.tok.TGT)")
    ap.add_argument("--long", type=float, default=1.5, help="an output is over-long above this times its reference")
    ap.add_argument("--batch", type=int, default=100, help="sentences per teacher-forced batch")
    args = ap.parse_args()
    torch.set_num_threads(1)
    for run in args.runs:
        cfg, p_end, zero_before, zeros = eos_at_reference_end(run, args.data, args.split, args.batch)
        output, tgt = cfg.model.output, cfg.data.tgt_lang
        refs = [line.lower().split() for line in read_lines(args.data / f"{args.split}.tok.{tgt}", what="reference")]
        hyps = [line.lower().split() for line in read_lines(run / f"{args.split}.hyp.tok.{tgt}", what="hypotheses")]
        if len(refs) != len(hyps) or len(refs) != len(p_end):
            raise SystemExit(f"{run}: {len(hyps)} hypotheses, {len(refs)} references, {len(p_end)} teacher-forced "
                             "sentences: not the same split")
        long = {i for i, (h, r) in enumerate(zip(hyps, refs)) if len(h) > args.long * len(r)}
        z, n = set(zeros), len(refs)
        print(f"{run} (output {output}), {args.split}, {n} sentences")
        print(f"  P(</s>) at the reference's end: median {statistics.median(p_end):.3f}, exactly 0 in {len(z)} "
              f"({100 * len(z) / n:.1f} %); exactly 0 at {100 * zero_before:.1f} % of the earlier steps")
        print(f"  outputs longer than {args.long:g}x their reference: {len(long)}; where P(</s>) = 0 at the reference's "
              f"end {len(long & z)} of {len(z)} ({100 * len(long & z) / max(1, len(z)):.0f} %), elsewhere "
              f"{len(long - z)} of {n - len(z)} ({100 * len(long - z) / max(1, n - len(z)):.1f} %)")


if __name__ == "__main__":
    main()
