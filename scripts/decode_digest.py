"""A digest of everything a checkpoint's decoding produces, to compare two versions of the code.

    PYTHONPATH=OLD/src python scripts/decode_digest.py CKPT SOURCE > old.json
    PYTHONPATH=NEW/src python scripts/decode_digest.py CKPT SOURCE > new.json
    cmp old.json new.json          # identical: same translations, log-probabilities, scores and attention

For each beam size (1 = greedy, and --beam) it hashes every sentence's output tokens, the exact bits of its
log P and score, and the bytes of its attention matrix; forced decoding of the first 50 outputs adds its
log P and attention.  It also writes the translations themselves (--out-prefix PREFIX: PREFIX.beamN.txt).
Used for issue 28's bar: the model-interface refactor must not change an LSTM's outputs.
"""

from __future__ import annotations

import argparse
import hashlib
import json

import torch

from scanmt.decoding.translator import Translator
from scanmt.io import atomic_open, read_lines


def digest(translations) -> str:
    h = hashlib.sha256()
    for t in translations:
        hyp = t.hypothesis
        h.update(repr((t.text, hyp.tokens, float(hyp.log_prob).hex(), float(hyp.score).hex())).encode())
        h.update(hyp.attention.numpy().tobytes())
    return h.hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint")
    ap.add_argument("source", help="raw source sentences, one per line")
    ap.add_argument("--beam", type=int, default=5, help="the beam size besides greedy")
    ap.add_argument("--out-prefix", default="", help="also write the translations to PREFIX.beamN.txt")
    args = ap.parse_args()
    torch.set_num_threads(1)
    lines = read_lines(args.source)
    tr = Translator.from_checkpoint(args.checkpoint)
    result: dict[str, str] = {}
    for beam in (1, args.beam):
        translations = tr.translate_lines(lines, beam=beam)
        result[f"beam{beam}"] = digest(translations)
        if args.out_prefix:
            with atomic_open(f"{args.out_prefix}.beam{beam}.txt") as fh:
                fh.writelines(t.text + "\n" for t in translations)
    forced = tr.force(lines[:50], [t.text or "." for t in translations[:50]])
    result["forced"] = digest(forced)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
