"""Does a model end its output where it should?  P(</s>) on teacher-forced references.

A sparse output layer may leave a sentence unable to end: teacher-forced references against over-long outputs.

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

The other way round, ``--joined K``: does a model end a joined input after its first sentence?

    python scripts/eos_support.py --data runs/table1/shared/data --split test --joined 2 \
        runs/table1/runs/softmax/seed2 runs/table1/runs/softmax-paper-recipe/seed1

The coverage stress test (``scanmt stress``) joins K test sentences into one input.  A model trained on single
captions may have learned "one caption, then stop": its output ends after about one sentence, and DROP counts
the rest as dropped.  The model reads each joined reference (the split's ``SPLIT.raw.*`` joined K at a time, as
the stress test joins them) teacher-forced, and the script reports the probability of ``</s>`` at the step
after the first reference sentence's last subword, where the reference goes on with the second sentence: its
median, the share of joined inputs where ``</s>`` is the most probable word there (greedy search would end the
output), where it takes 0.5 or more (ending outweighs every continuation together) and 0.99 or more (every
continuation then has at most 0.01; a model trained with label smoothing ε keeps it below about 1 − ε, so for
one smoothed with 0.1 this share is 0 whatever it does); and its median at the joined reference's end, where
``</s>`` is right.  A model that writes one sentence per joined input decides one step earlier whether to stop
after the first sentence's content, so the script also reports the probability of the full stop (``!``, ``?``)
with which the reference closes its first sentence, at that step.  docs/results.md, section 6d.
The measure is :mod:`scanmt.decoding.boundary`, which ``scanmt stress`` also reports for every K >= 2 (its
columns ``stop@1%`` and ``P</s>@1``).

A model with fertility-bounded attention takes its bounds from its checkpoint's fertility provider, as
``scanmt translate`` does.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import torch

from scanmt.config import Config
from scanmt.data.dataset import ParallelData
from scanmt.data.vocab import EOS_ID, PAD_ID
from scanmt.decoding.boundary import STOP_PROBABILITY, boundary_eos, share_at_least
from scanmt.decoding.translator import Translator
from scanmt.io import read_lines
from scanmt.metrics.stress import join_groups
from scanmt.model.output import output_probs


def eos_at_reference_end(run: Path, data_dir: Path, split: str, batch: int) -> tuple[Config, list[float], float, list[int]]:
    """``(the run's config, P(</s>) at each reference's end by line, share of earlier steps with P(</s>) = 0, lines
    where it is 0 at the end)``."""
    tr = Translator.from_checkpoint(run / "best.pt")
    cfg, model = tr.config, tr.model
    s, t = cfg.data.src_lang, cfg.data.tgt_lang
    data = ParallelData.from_files(data_dir / f"{split}.bpe.{s}", data_dir / f"{split}.bpe.{t}", tr.pipeline.vocab,
                                   max_len=0)
    if model.constrained:
        data = data.with_fertility(tr.source_bounds([ln.split() for ln in read_lines(data_dir / f"{split}.bpe.{s}")]))
    at_end: dict[int, float] = {}
    zero_before = steps_before = 0
    with torch.no_grad():
        for i in range(0, len(data), batch):
            b = data.make_batch(list(range(i, min(i + batch, len(data)))))
            logits = model(b.src, b.src_len, b.tgt_in, b.fertility).logits.float()
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


def report_boundary(run: Path, data_dir: Path, split: str, k: int) -> None:
    """Print :func:`scanmt.decoding.boundary.boundary_eos` of ``run``'s model on the split joined ``k`` at a time."""
    tr = Translator.from_checkpoint(run / "best.pt")
    cfg = tr.config
    src = read_lines(data_dir / f"{split}.raw.{cfg.data.src_lang}", what="source")
    ref = read_lines(data_dir / f"{split}.raw.{cfg.data.tgt_lang}", what="reference")
    n = len(ref) // k
    b = boundary_eos(tr, join_groups(src, k), join_groups(ref, k), [ref[g * k] for g in range(n)])
    measured = len(b.measured)
    print(f"{run} ({cfg.model.attention.transform}, label smoothing {cfg.train.label_smoothing:g}, optimizer "
          f"{cfg.train.optimizer}), {split}, "
          f"K = {k}: {measured} joined inputs" + (f" ({b.left_out} left out)" if b.left_out else ""))
    if not measured:
        return
    print(f"  P(</s>) after the first sentence: median {b.median:.3f}, mean {statistics.mean(b.measured):.3f}; "
          f"</s> the most probable word there in {b.argmax_share:.1f} %, with P >= {STOP_PROBABILITY:g} in "
          f"{b.stop_share:.1f} % and P >= 0.99 in {share_at_least(b.p_eos, 0.99):.1f} %")
    print(f"  P(</s>) at the joined reference's end: median {b.median_at_end:.3f}")
    closed = [p for p in b.p_close if p is not None]
    if closed:
        print(f"  P(full stop) closing the first sentence, one step earlier ({len(closed)} inputs whose first sentence "
              f"ends with . ! ?): median {b.median_close:.3f}, mean {statistics.mean(closed):.3f}; the most probable "
              f"word there in {b.close_argmax_share:.1f} %, with P >= 0.5 in {share_at_least(b.p_close, 0.5):.1f} %")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path, help="run folders (best.pt and SPLIT.hyp.tok.en in each)")
    ap.add_argument("--data", type=Path, required=True, help="the prepared data folder the runs were trained on")
    ap.add_argument("--split", default="test2017", help="the prepared split to read (SPLIT.bpe.*, SPLIT.tok.TGT)")
    ap.add_argument("--long", type=float, default=1.5, help="an output is over-long above this times its reference")
    ap.add_argument("--batch", type=int, default=100, help="sentences per teacher-forced batch")
    ap.add_argument("--joined", type=int, metavar="K", help="P(</s>) after the first sentence of the split's sentences "
                    "joined K at a time, as `scanmt stress --k K` joins them (K >= 2) [P(</s>) at the reference's end]")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.joined is not None:
        if args.joined < 2:
            raise SystemExit(f"--joined {args.joined}: a joined input needs at least 2 sentences for a boundary")
        for run in args.runs:
            report_boundary(run, args.data, args.split, args.joined)
        return
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
