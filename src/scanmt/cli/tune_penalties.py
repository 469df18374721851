"""``scanmt tune-penalties``: grid search of the length and coverage penalty weights on a split.

The paper (Section 5, CovPenalty) tunes Wu et al.'s ``alpha`` (length) and
``beta`` (coverage) on the validation set over ``{0.0, 0.2, ..., 1.0}``.  This
command encodes every batch of the split once, runs beam search from the cached
encoder outputs for every grid point, scores each with sacreBLEU against
``DIR/{split}.raw.{tgt}``, prints a table (rows alpha, columns beta) and writes
the best setting atomically as YAML, for ``scanmt translate --penalties FILE``.

With ``decode.penalty_mode = rescore`` the beam itself does not depend on the
penalties (they only rank finished hypotheses), so the split is decoded once
and every grid point re-ranks the same finished hypotheses: exactly what a
fresh decode per point would give (``--redecode`` does that instead).  With
``step`` the beam is run once per grid point.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from scanmt.cli import positive_int
from scanmt.errors import ConfigError

NAME = "tune-penalties"
HELP = "grid-search the length/coverage penalty weights (alpha, beta) on a prepared split by BLEU"
DESCRIPTION = """Tune Wu et al.'s length penalty alpha and coverage penalty beta by grid search (the paper: {0.0, 0.2, ..., 1.0}
on the validation set), score s(Y,X) = log P(Y|X) / lp(Y) + cp(X;Y).

  scanmt tune-penalties --model runs/softmax/best.pt --data runs/data/multi30k-de-en
  scanmt tune-penalties --model ... --data ... --penalty-mode step --grid 0,0.5,1 --out runs/softmax/penalties.yaml
  scanmt translate --model runs/softmax/best.pt --penalties runs/softmax/penalties.yaml --input ... --output ...

Every batch is encoded once; the beam runs from the cached encoder outputs (once in total for the default
penalty mode 'rescore', whose beam does not depend on the penalties; once per grid point for 'step').
Prints BLEU per grid point (rows alpha, columns beta) and writes the best setting as YAML."""

#: decode keys a penalties file may set (everything else in it is informational)
PENALTY_KEYS = ("length_alpha", "coverage_beta", "coverage_eps", "penalty_mode")


def parse_grid(text: str, what: str = "--grid") -> list[float]:
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ConfigError(f"{what} {text!r}: expected comma-separated numbers, e.g. 0,0.2,0.4") from None
    if not values:
        raise ConfigError(f"{what} is empty")
    if any(v < 0 for v in values):
        raise ConfigError(f"{what} {text!r}: penalty weights must be >= 0")
    return sorted(set(values))


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="checkpoint (best.pt of a run)")
    p.add_argument("--data", type=Path, required=True, help="prepared data directory (scanmt prepare)")
    p.add_argument("--split", default="valid", help="split to tune on: DIR/{split}.raw.{src,tgt}")
    p.add_argument("--grid", default="0,0.2,0.4,0.6,0.8,1.0", help="values of alpha and of beta (comma-separated)")
    p.add_argument("--alphas", help="values of alpha only, overriding --grid")
    p.add_argument("--betas", help="values of beta only, overriding --grid")
    p.add_argument("--beam", type=int, default=5, help="beam size (>= 2)")
    p.add_argument("--penalty-mode", choices=("rescore", "step"), default=None,
                   help="where the penalties act; None: the checkpoint's decode.penalty_mode")
    p.add_argument("--coverage-eps", type=float, default=None,
                   help="eps of the coverage penalty; None: the checkpoint's decode.coverage_eps")
    p.add_argument("--redecode", action="store_true",
                   help="rescore mode: run the beam for every grid point instead of re-ranking one decode")
    p.add_argument("--limit", type=int, default=0, help="use only the first N sentences of the split (0 = all)")
    p.add_argument("--batch-size", type=positive_int, default=None, help="sentences per decoding batch")
    p.add_argument("--out", type=Path, help="where to write the best setting; None: CKPT_DIR/penalties.SPLIT.yaml")
    p.add_argument("--device", default="cpu", help="cpu or cuda[:N]")


def load_penalties(path: str | Path) -> dict[str, Any]:
    """The decode settings (:data:`PENALTY_KEYS`) of a file written by this command (YAML or JSON)."""
    import yaml

    from scanmt.config import Config

    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the penalties file: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML/JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping with {', '.join(PENALTY_KEYS)}")
    found = {k: raw[k] for k in PENALTY_KEYS if k in raw}
    if not found:
        raise ConfigError(f"{path}: none of {', '.join(PENALTY_KEYS)} found")
    try:
        decode = Config.from_dict({"decode": found}).decode  # types and values checked, keys named
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return {k: getattr(decode, k) for k in found}


def _table(alphas: list[float], betas: list[float], bleu: dict[tuple[float, float], float], best) -> str:
    head = "alpha \\ beta " + "".join(f"{b:>8.2f}" for b in betas)
    rows = [head, "-" * len(head)]
    for a in alphas:
        cells = "".join(f"{bleu[a, b]:>7.2f}{'*' if (a, b) == best else ' '}" for b in betas)
        rows.append(f"{a:>12.2f} {cells}")
    return "\n".join(rows)


def run(args: argparse.Namespace) -> int:
    import sacrebleu
    import yaml
    from tqdm import tqdm

    from scanmt.config import check_penalty_config
    from scanmt.data.dataset import ParallelData
    from scanmt.data.prepare import read_meta
    from scanmt.decoding.search import rescore
    from scanmt.decoding.translator import Translator
    from scanmt.io import atomic_open, read_lines

    if args.beam < 2:
        raise ConfigError(f"--beam {args.beam}: penalties only act in beam search; use --beam 2 or more")
    alphas = parse_grid(args.alphas or args.grid, "--alphas" if args.alphas else "--grid")
    betas = parse_grid(args.betas or args.grid, "--betas" if args.betas else "--grid")
    tr = Translator.from_checkpoint(args.model, device=args.device)
    d = tr.decode
    if args.penalty_mode:
        d.penalty_mode = args.penalty_mode
    if args.coverage_eps is not None:
        d.coverage_eps = args.coverage_eps
    if args.batch_size:
        d.batch_size = args.batch_size
    check_penalty_config(d)
    meta = read_meta(args.data)
    s, t = tr.pipeline.src_lang, tr.pipeline.tgt_lang
    if (meta["src_lang"], meta["tgt_lang"]) != (s, t):
        raise ConfigError(f"{args.model} translates {s}->{t} but {args.data} holds {meta['src_lang']}->{meta['tgt_lang']}")
    src_lines = read_lines(args.data / f"{args.split}.raw.{s}", what="source file")
    refs = read_lines(args.data / f"{args.split}.raw.{t}", what="reference file")
    if len(src_lines) != len(refs):
        raise ConfigError(f"{args.data}: {args.split}.raw.{s} has {len(src_lines)} lines but {args.split}.raw.{t} {len(refs)}")
    if args.limit:
        src_lines, refs = src_lines[: args.limit], refs[: args.limit]
    vocab = tr.pipeline.vocab
    data = ParallelData([vocab.encode(p) for p in tr.pipeline.source_pieces_all(src_lines)], None)
    if tr.model.constrained and getattr(tr, "fertility_strategy", None) == "actual":
        from scanmt.fertility.compute import compute_fertility

        fc = tr.config.model.attention.fertility
        cached = compute_fertility(args.data, args.split, "actual", align_dir=fc.align_dir or None)
        data = data.with_fertility(cached.values, source=str(cached.path))

    t0 = time.time()
    encoded = tr.encode_all(data)
    t_enc = time.time() - t0
    points = [(a, b) for a in alphas for b in betas]
    shortcut = d.penalty_mode == "rescore" and not args.redecode
    bleu: dict[tuple[float, float], float] = {}
    nbest = tr.search_encoded(encoded, len(data), beam=args.beam) if shortcut else None
    n_decodes = 1 if shortcut else 0
    for a, b in tqdm(points, desc="grid", unit="point", leave=False):
        if shortcut:
            hyps = rescore(nbest, length_alpha=a, coverage_beta=b, coverage_eps=d.coverage_eps)
        else:
            d.length_alpha, d.coverage_beta = a, b
            hyps = [h[0] for h in tr.search_encoded(encoded, len(data), beam=args.beam)]
            n_decodes += 1
        bleu[a, b] = sacrebleu.corpus_bleu(tr.texts(hyps), [refs]).score
    elapsed = time.time() - t0
    best = max(points, key=lambda p: bleu[p])  # first of equal BLEU: the smallest penalties
    result = {
        "length_alpha": best[0],
        "coverage_beta": best[1],
        "coverage_eps": d.coverage_eps,
        "penalty_mode": d.penalty_mode,
        "bleu": round(bleu[best], 4),
        "beam": args.beam,
        "split": args.split,
        "sentences": len(data),
        "data": str(args.data),
        "model": str(args.model),
        "grid": {"alphas": alphas, "betas": betas, "bleu": [[round(bleu[a, b], 4) for b in betas] for a in alphas]},
    }
    out = args.out or Path(args.model).parent / f"penalties.{args.split}.yaml"
    with atomic_open(out) as fh:
        fh.write(f"# scanmt tune-penalties: best (alpha, beta) on {args.data} {args.split}; "
                 f"use with scanmt translate --penalties {out}\n")
        yaml.safe_dump(result, fh, sort_keys=False, default_flow_style=None)
    print(f"sacreBLEU on {args.data}/{args.split} ({len(data)} sentences), beam {args.beam}, "
          f"penalty mode {d.penalty_mode}, eps {d.coverage_eps:g}:")
    print(_table(alphas, betas, bleu, best))
    how = "decoded once, re-ranked per grid point" if shortcut else "decoded once per grid point"
    print(f"  {len(points)} grid points, {how} (beam searches: {n_decodes}); "
          f"encoding {t_enc:.1f} s, total {elapsed:.1f} s")
    print(f"  best: alpha {best[0]:g}, beta {best[1]:g}: BLEU {bleu[best]:.2f} -> {out}")
    return 0
