"""``scanmt stress``: a stress test, inputs of K test sentences joined into one, models side by side."""

from __future__ import annotations

import argparse
from pathlib import Path

from scanmt.api.requests import request_from_namespace
from scanmt.api.stress import StressRequest, remeasure_boundary, stress

NAME = "stress"
HELP = ("stress test: translate K test sentences joined into one input; BLEU, REP, DROP, dropped sentences, "
        "and whether the model ends after the first sentence")
DESCRIPTION = """\
A stress test: the test set's lines are joined K at a time (source lines i..i+K-1 joined by a
space into one input, the references alike; the last incomplete group is left out, so every input holds
exactly K sentences), each model translates the joined inputs, and each output is scored for each K:

  BLEU      sacreBLEU on detokenized text, as `scanmt evaluate` (bleu)
  REP       REP-score on Moses-tokenized text, as `scanmt evaluate` (rep)
  DROP      DROP-score (% source words dropped), one eflomal alignment per side, as `scanmt evaluate` (drop)
  len       output words / reference words (Moses-tokenized)
  dropS%    % of joined inputs in which a whole sentence was dropped: one of its K source sentences has
            fewer than 20% of its words linked to any output word (the source-output alignment of DROP)
  P.@1      (K >= 2) whether the model stops after the first sentence's content: it reads the joined
            reference teacher-forced, and at the step where the reference closes its first sentence
            gives that full stop (! ?) this probability (median). A model that writes one sentence
            per joined input decides here: close the sentence (and end), or go on ("..., while ...")
  stop@1%   (K >= 2) one step later, after that full stop, where the reference goes on: % of joined
            inputs where the model gives </s> 0.5 or more (more than all continuations together)
  P</s>@1   (K >= 2) the median of that probability (label smoothing eps caps it near 1 - eps). A
            search that never writes a full stop before the end rarely reaches this step, so a high
            value need not mean an early stop; P.@1 is the decision

DROP and dropS% need --align-model; without it they are n/a. Prints a table (rows K, columns model x
metric) and writes into --out: stress.json (every number, the command line), stress.png (one panel per
metric, one line per model), the joined inputs kK.src.LANG / kK.ref.LANG and each model's outputs
NAME.kK.hyp.LANG (re-check with `scanmt evaluate --hyp ... --ref ... --src ...`).

  scanmt stress --model runs/softmax/best.pt runs/csparsemax/best.pt --src DATA/test.raw.de \\
      --ref DATA/test.raw.en --k 1 2 3 4 --align-model DATA/align --out runs/stress

With --boundary-only, an earlier stress output gets its boundary columns (P.@1, stop@1%, P</s>@1)
measured again with this version, from the models, test set and K values its stress.json records; its
translations and other scores are kept (for stress tests run before a boundary measure existed). In a
grid run's stress folder (RUN/stress), the run's metrics.json follows, for the report and the archive:

  scanmt stress --boundary-only --out runs/stress"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options; their values are checked by :class:`StressRequest` (the same for the API)."""
    p.add_argument("--model", nargs="+", default=[], metavar="CKPT",
                   help="checkpoints to compare (best.pt of runs), one or more (required, except with --boundary-only)")
    p.add_argument("--src", type=Path, metavar="FILE",
                   help="raw source sentences of a test set, one per line (required, except with --boundary-only)")
    p.add_argument("--ref", type=Path, metavar="FILE",
                   help="raw reference translations, line by line with --src (the same number of lines; "
                        "required, except with --boundary-only)")
    p.add_argument("--out", type=Path, required=True, metavar="DIR",
                   help="folder for stress.json, stress.png, the joined inputs and the outputs: new, empty, or "
                        "an earlier stress output (its files are replaced)")
    p.add_argument("--k", nargs="+", type=int, default=[1, 2, 3, 4], metavar="K",
                   help="sentences joined into one input, one test per value (each >= 1, at most the test set's "
                        "lines; 1 = the test set itself)")
    p.add_argument("--names", nargs="+", default=[], metavar="NAME",
                   help="labels of the models, one per --model (letters, digits, . _ + -) (default: the run folder "
                        "of RUN/best.pt, with the folder above it where two run folders share a name, as a grid's "
                        "SYSTEM/seed1 do: SYSTEM-seed1; else the file name without .pt)")
    p.add_argument("--beam", type=int, default=None,
                   help="beam size; 1 = greedy (default: each checkpoint's decode.beam)")
    p.add_argument("--batch-size", type=int, default=None,
                   help="sentences per decoding batch (default: each checkpoint's decode.batch_size)")
    p.add_argument("--align-model", type=Path, metavar="DIR",
                   help="word-level aligner from `scanmt align` (ALIGN_DIR or ALIGN_DIR/word), for DROP and dropped "
                        "sentences (without it both are n/a)")
    p.add_argument("--max-source-len", type=int, default=None, metavar="N",
                   help="refuse a joined input of more than N subwords (default: each checkpoint's "
                        "decode.max_source_len, 1000 unless trained with another)")
    p.add_argument("--device", default="cpu", help="cpu or cuda[:N]")
    p.add_argument("--boundary-only", action="store_true",
                   help="measure only the boundary columns again (P.@1, stop@1%%, P</s>@1) in the earlier stress "
                        "output --out, with the models, test set and K its stress.json records, and rewrite its "
                        "stress.json and stress.png; takes --out, --batch-size and --device only")


def request_from_args(args: argparse.Namespace) -> StressRequest:
    return request_from_namespace(StressRequest, args)


def run(args: argparse.Namespace) -> int:
    request = request_from_args(args)
    if not request.boundary_only:
        print(stress(request).summary(request))
        return 0
    from scanmt.experiments.stress_refresh import finished_run_of_stress, refresh_stress_metrics

    with finished_run_of_stress(request.out) as grid_run:
        print(remeasure_boundary(request.out, device=request.device, batch_size=request.batch_size).summary())
        if grid_run is not None:
            print(f"and the grid run's {refresh_stress_metrics(grid_run)} (its stress numbers, which "
                  "`scanmt experiment report` reads)")
    return 0
