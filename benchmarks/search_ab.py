"""Beam search of this checkout against another checkout's, side by side in one process: speed and identity.

    git worktree add --detach /tmp/base HEAD~1
    python benchmarks/search_ab.py --base /tmp/base/src/scanmt/decoding/search.py \
        --checkpoints runs/table1/runs/softmax/seed1/best.pt runs/transformer/runs/softmax/seed1/best.pt

A change to ``scanmt.decoding.search`` must keep every output bit for bit (the LSTM's outputs may not
change) and should make decoding faster.  This loads the other checkout's ``search.py`` as a second
module (``--base``; the rest of the package is this checkout's), decodes the first ``--sentences``
validation sentences of each trained checkpoint (its own data, fertilities and decode settings,
``benchmarks/trained.py``) with both in alternating rounds, and prints the median time of each and their
ratio, and whether the two gave the same hypotheses: tokens, the bits of ``log P`` and score, attention,
support, exactness and forced ``</s>``.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import statistics
import sys
import time

import torch

from trained import load_trained

import scanmt.decoding.search as head_search
from scanmt.allocator import tune_malloc


def load_base(path: str):
    spec = importlib.util.spec_from_file_location("base_search", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"--base {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def digest(hyps) -> str:
    h = hashlib.sha256()
    for hyp in hyps:
        h.update(repr((hyp.tokens, float(hyp.log_prob).hex(), float(hyp.score).hex(), hyp.support, hyp.exact,
                       hyp.forced)).encode())
        h.update(hyp.attention.numpy().tobytes())
    return h.hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True, help="the other checkout's scanmt/decoding/search.py")
    ap.add_argument("--checkpoints", nargs="+", required=True, help="trained checkpoints (best.pt of runs)")
    ap.add_argument("--sentences", type=int, default=128, help="validation sentences decoded per round")
    ap.add_argument("--batch-size", type=int, default=64, help="sentences per search call")
    ap.add_argument("--beam", type=int, default=5, help="beam size (the checkpoint's other decode settings)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds")
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    args = ap.parse_args()
    tune_malloc()
    torch.set_num_threads(args.threads)
    base = load_base(args.base)
    print(f"beam {args.beam}, {args.sentences} validation sentences in batches of {args.batch_size}, "
          f"{args.threads} thread(s), {args.rounds} alternating rounds; base: {args.base}")
    print(f"  {'checkpoint':<60} {'base s':>8} {'this s':>8} {'this/base':>10}  outputs")
    for path in args.checkpoints:
        t = load_trained(path)
        model = t.model.eval()
        n = min(args.sentences, len(t.valid))
        starts = range(0, n, args.batch_size)
        batches = [t.valid.make_batch(list(range(i, min(n, i + args.batch_size)))) for i in starts]
        times: dict[str, list[float]] = {"base": [], "this": []}
        digests: dict[str, str] = {}
        for _ in range(args.rounds):
            for name, module in (("base", base), ("this", head_search)):
                settings = module.SearchSettings.of(t.cfg.decode, beam=args.beam)
                hyps = []
                t0 = time.perf_counter()
                with torch.no_grad():
                    for b in batches:
                        hyps += module.search(model, b.src, b.src_len, b.fertility, settings=settings)
                times[name].append(time.perf_counter() - t0)
                digests[name] = digest(hyps)
        b_s, h_s = statistics.median(times["base"]), statistics.median(times["this"])
        same = "identical" if digests["base"] == digests["this"] else "DIFFERENT"
        print(f"  {str(path)[-60:]:<60} {b_s:8.2f} {h_s:8.2f} {h_s / b_s:9.2f}x  {same}")


if __name__ == "__main__":
    main()
