"""Cross-attention of every head of every decoder layer of a Transformer checkpoint, under forced decoding.

    python scripts/transformer_heads.py CKPT SOURCE TARGET [--limit N] [--json OUT.json]

SOURCE and TARGET are raw parallel text (one sentence per line; for example a prepared split's
``valid.raw.de`` / ``valid.raw.en``).  Each pair is force-decoded on its own (no padding), and the
weights ``p [heads, T, S']`` of every decoder layer's cross-attention are read with forward hooks.
Per layer and head it prints, over all target steps:

* ``support``: source columns with non-zero weight (sink included), mean per step;
* ``one-hot``: share of steps whose largest weight is above 0.999;
* ``max``: the largest weight, mean per step;
* ``sink``: the weight on the sink column, mean per step (constrained models only);
* ``entropy``: in nats, mean per step;
* ``bound``: constrained models only, the share of source words (the sink left out) whose bound ``f_j`` the
  head's cumulative attention has reached (within 1e-4) by the sentence's end: how often the bounds bind at
  all (a head that is not bounded can pass ``f_j``; so can the sum of a bounded head, by at most 1e-4).

The toolkit itself reports only the mean over the last layer's heads (docs/transformer.md section 2);
this script is for looking inside, for example at how sparse the layers below the last are.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict

import torch

from scanmt.decoding.translator import Translator
from scanmt.io import atomic_open, check_parallel, read_lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint", help="a model.arch: transformer checkpoint (best.pt, last.pt)")
    ap.add_argument("source", help="raw source sentences, one per line")
    ap.add_argument("target", help="raw target sentences, one per line, as many as SOURCE")
    ap.add_argument("--limit", type=int, default=300, help="use the first N pairs (0: all; default 300)")
    ap.add_argument("--json", default="", help="also write the table as JSON to this file")
    args = ap.parse_args()
    torch.set_num_threads(1)
    src, tgt = read_lines(args.source), read_lines(args.target)
    check_parallel(src, tgt, args.source, args.target)
    if args.limit:
        src, tgt = src[: args.limit], tgt[: args.limit]
    tr = Translator.from_checkpoint(args.checkpoint)
    layers = getattr(tr.model, "decoder_layers", None)
    if tr.model.cfg.arch != "transformer" or layers is None:
        sys.exit(f"error: {args.checkpoint} is a model.arch={tr.model.cfg.arch} checkpoint, not a transformer")
    sink = tr.model.sink
    sums: dict[tuple[int, int], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    steps, words = 0, 0
    sentence: dict[int, torch.Tensor] = {}  # layer -> the weights [h, T, S'] of the sentence being decoded

    def hook(layer: int):
        def record(mod, inputs, out):
            p = out[1][0].double()  # [h, T, S']
            for h in range(p.size(0)):
                w = p[h]  # [T, S']
                s = sums[(layer, h)]
                s["support"] += float((w > 0).sum())
                s["one-hot"] += float((w.max(-1).values > 0.999).sum())
                s["max"] += float(w.max(-1).values.sum())
                s["sink"] += float(w[:, -1].sum()) if sink else 0.0
                s["entropy"] += float(-(w * torch.log(w.clamp_min(1e-30))).sum())
            sentence[layer] = p
        return record

    for layer in layers:  # materialise the weights of fused softmax layers too (the same softmax, computed explicitly)
        layer.cross.explicit = True
    handles = [layer.cross.register_forward_hook(hook(i)) for i, layer in enumerate(layers)]
    for s_line, t_line in zip(src, tgt):
        if not s_line.strip() or not t_line.strip():
            continue
        sentence.clear()
        out = tr.force([s_line], [t_line])
        steps += out[0].hypothesis.attention.size(0)
        if out[0].fertility is not None:
            bounds = torch.tensor(out[0].fertility, dtype=torch.float64)  # [S], the sink's left out
            words += len(bounds)
            for layer, p in sentence.items():
                reached = (p[:, :, : len(bounds)].sum(1) >= bounds - 1e-4).sum(-1)  # [h]
                for h in range(p.size(0)):
                    sums[(layer, h)]["bound"] += float(reached[h])
    for h in handles:
        h.remove()
    table = {
        f"layer{layer + 1}/head{head + 1}": {k: v / (words if k == "bound" else steps) for k, v in vals.items()}
        for (layer, head), vals in sorted(sums.items())
    }
    keys = ["support", "one-hot", "max", "sink", "entropy"] + (["bound"] if words else [])
    print(f"{args.checkpoint}: {len(src)} pairs, {steps} target steps "
          f"(transform {tr.model.cfg.attention.transform}, layers {tr.model.cfg.transformer.transform_layers})")
    print(f"{'head':<14}" + "".join(f"{k:>10}" for k in keys))
    for name, vals in table.items():
        print(f"{name:<14}" + "".join(f"{vals[k]:>10.3f}" for k in keys))
    if args.json:
        with atomic_open(args.json) as fh:
            json.dump({"checkpoint": args.checkpoint, "pairs": len(src), "steps": steps, "heads": table}, fh, indent=1)


if __name__ == "__main__":
    main()
