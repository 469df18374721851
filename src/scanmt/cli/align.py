"""``scanmt align``: eflomal word alignment of prepared data, of new pairs, and AER on a gold set.

Three modes:

- train (``--data DIR``): learn an aligner on DIR's train split at the subword
  and/or word level (source = ``meta.json``'s ``src_lang``), write
  ``ALIGN_DIR/{split}.{level}.align`` (Pharaoh, 0-based ``i-j``) for train
  (from training) and for the other splits (aligned with the learned priors),
  and the aligner itself in ``ALIGN_DIR/{level}/``.  An aligner already there
  that was trained on the same text with the same settings is reused.
- apply (``--model ALIGN_DIR --src FILE --tgt FILE --out FILE``): align new
  tokenized pairs (at the model's level) with the saved priors.
- gold evaluation (``--eval-gold GOLD_DIR --data DIR``): append the gold
  set's sentences (RWTH De–En: ``test.de``, ``test.en``, ``test.talp``) to
  DIR's training text, align everything, and report AER on the gold part.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import time
from pathlib import Path

from scanmt.data.align import (
    MODEL_FILE,
    Aligner,
    AlignerSettings,
    corpus_digest,
    link_stats,
    project_to_words,
    write_links,
)
from scanmt.data.prepare import read_meta
from scanmt.data.symmetrize import METHODS, symmetrize
from scanmt.errors import ConfigError, DataError
from scanmt.io import atomic_open, check_output_dir, check_parallel, read_lines
from scanmt.data.links import read_links

NAME = "align"
HELP = "word-align prepared data with eflomal (subword/word level), align new pairs, or measure AER"
DESCRIPTION = """\
Word alignment with eflomal (both directions, symmetrized).

  train: scanmt align --data DIR [--level subword|word|both] [--out ALIGN_DIR]
         learns aligners on DIR's train split; writes ALIGN_DIR/{split}.{level}.align
         (Pharaoh, 0-based) for every split and the aligners in ALIGN_DIR/{level}/
  apply: scanmt align --model ALIGN_DIR [--level L] --src F --tgt F --out F
         aligns new tokenized pairs with the saved priors
  gold:  scanmt align --eval-gold GOLD_DIR --data DIR
         adds the gold sentences to DIR's training text and reports AER
"""

log = logging.getLogger(__name__)

#: ALIGN_DIR/manifest.json: per links file, digests of its text and aligner (decides reuse)
MANIFEST = "manifest.json"
LEVEL_FILES = {"subword": "bpe", "word": "tok"}
GOLD_LANGS = ("de", "en")  # talp links: German index first


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=Path, help="prepared data directory (train and eval-gold modes)")
    p.add_argument(
        "--level",
        choices=("subword", "word", "both"),
        default=None,
        help="train: which level(s) to align [both]; apply: which model under ALIGN_DIR [subword]; "
        "eval-gold: align words directly, or subwords then project to words [word]",
    )
    p.add_argument("--out", type=Path, help="train: ALIGN_DIR [DIR/align]; apply: links file; eval-gold: JSON report")
    p.add_argument("--splits", nargs="+", help="train: splits to write links for [all in meta.json]")
    p.add_argument("--force", action="store_true", help="train: retrain even if a matching aligner exists")
    p.add_argument("--model", type=Path, help="apply: ALIGN_DIR (or ALIGN_DIR/LEVEL) of a trained aligner")
    p.add_argument("--src", type=Path, help="apply: tokenized source file")
    p.add_argument("--tgt", type=Path, help="apply: tokenized target file")
    p.add_argument("--eval-gold", type=Path, metavar="GOLD_DIR", help="measure AER on GOLD_DIR (test.de/en/talp)")
    g = p.add_argument_group("eflomal")
    d = AlignerSettings()
    g.add_argument("--symmetrization", choices=METHODS, default=d.symmetrization,
                   help="how the forward and reverse alignments are merged into one set of links")
    g.add_argument("--eflomal-model", type=int, choices=(1, 2, 3), default=d.model, help="1 IBM1, 2 +HMM, 3 +fertility")
    g.add_argument("--samplers", type=int, default=d.n_samplers, help="independent Gibbs samplers")
    g.add_argument("--rel-iterations", type=float, default=d.rel_iterations, help="iterations relative to default")
    g.add_argument("--null-prior", type=float, default=d.null_prior,
                   help="eflomal's prior probability of aligning a word to NULL (unaligned)")


def _settings(args: argparse.Namespace) -> AlignerSettings:
    return AlignerSettings(
        symmetrization=args.symmetrization,
        model=args.eflomal_model,
        n_samplers=args.samplers,
        rel_iterations=args.rel_iterations,
        null_prior=args.null_prior,
    )


def run(args: argparse.Namespace) -> int:
    if args.eval_gold is not None:
        if args.model or args.src or args.tgt:
            raise ConfigError("--eval-gold takes --data (the training text), not --model/--src/--tgt")
        return _run_eval(args)
    if args.model is not None:
        if args.data is not None:
            raise ConfigError("give either --data (train) or --model (align new pairs), not both")
        return _run_apply(args)
    if args.data is None:
        raise ConfigError("nothing to do: give --data DIR (train), --model ALIGN_DIR --src --tgt --out, or --eval-gold")
    if args.src or args.tgt:
        raise ConfigError("--src/--tgt are for aligning new pairs with --model")
    return _run_train(args)


# --------------------------------------------------------------------------- train


def _split_files(data: Path, meta: dict, split: str, level: str) -> tuple[Path, Path]:
    kind = LEVEL_FILES[level]
    return data / f"{split}.{kind}.{meta['src_lang']}", data / f"{split}.{kind}.{meta['tgt_lang']}"


def _read_pair(src_path: Path, tgt_path: Path) -> tuple[list[list[str]], list[list[str]]]:
    src_lines = read_lines(src_path, what="source file")
    tgt_lines = read_lines(tgt_path, what="target file")
    check_parallel(src_lines, tgt_lines, src_path, tgt_path)
    return [ln.split() for ln in src_lines], [ln.split() for ln in tgt_lines]


def _print_stats(title: str, stats: dict) -> None:
    print(
        f"  {title:<22} {stats['pairs']:>7} pairs  {stats['links_per_src_token']:.2f} links/src token  "
        f"unaligned: src {100 * stats['src_unaligned']:.1f}%  tgt {100 * stats['tgt_unaligned']:.1f}%"
    )


def _read_manifest(path: Path) -> dict:
    if not path.exists():
        return {}
    try:
        m = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        log.warning("%s is unreadable; all links will be recomputed", path)
        return {}
    return m if isinstance(m, dict) else {}


def _write_manifest(path: Path, manifest: dict) -> None:
    with atomic_open(path) as fh:
        json.dump(manifest, fh, indent=2, sort_keys=True)
        fh.write("\n")


def _is_align_dir(d: Path) -> bool:
    return (d / MANIFEST).exists() or any((d / level / MODEL_FILE).exists() for level in LEVEL_FILES)


def _run_train(args: argparse.Namespace) -> int:
    data: Path = args.data
    meta = read_meta(data)
    out = check_output_dir(args.out or data / "align", ours=_is_align_dir, holds=f"scanmt align output ({MANIFEST})")
    levels = ("subword", "word") if args.level in (None, "both") else (args.level,)
    splits = list(args.splits or meta.get("splits") or ["train"])
    if "train" not in splits:
        splits.insert(0, "train")
    settings = _settings(args)
    summary: dict = {}
    t_start = time.perf_counter()
    manifest_path = out / MANIFEST
    manifest = _read_manifest(manifest_path)
    for level in levels:
        model_dir = out / level
        src_path, tgt_path = _split_files(data, meta, "train", level)
        src, tgt = _read_pair(src_path, tgt_path)
        digest = corpus_digest(src, tgt)
        aligner = None
        if not args.force and (model_dir / MODEL_FILE).exists():
            old = Aligner.read_meta(model_dir)
            if old.get("train_digest") == digest and old.get("settings") == dataclasses.asdict(settings):
                log.info("%s: reusing the aligner in %s (same training text and settings)", level, model_dir)
                aligner = Aligner.load(model_dir)
        train_links = None
        if aligner is None:
            log.info("%s level: training on %s / %s", level, src_path.name, tgt_path.name)
            aligner = Aligner(settings, info={"level": level, "src_lang": meta["src_lang"],
                                              "tgt_lang": meta["tgt_lang"], "data": str(data)})
            train_links = aligner.fit(src, tgt)
            aligner.save(model_dir)
        level_summary: dict = {}
        for split in splits:
            s_path, t_path = _split_files(data, meta, split, level)
            if not s_path.exists() or not t_path.exists():
                log.warning("%s: split %r has no %s files, skipped", level, split, LEVEL_FILES[level])
                continue
            s, t = (src, tgt) if split == "train" else _read_pair(s_path, t_path)
            name = f"{split}.{level}.align"
            key = {"text": digest if split == "train" else corpus_digest(s, t), "aligner": aligner.model_id}
            if split == "train" and train_links is not None:
                links = train_links
                write_links(out / name, links)
            elif manifest.get(name) == key and (out / name).exists():
                log.info("%s: reusing %s", level, out / name)
                links = [x for x, _ in read_links(out / name, src_lens=[len(x) for x in s],
                                                  tgt_lens=[len(x) for x in t])]
            else:
                if split == "train":  # aligner reused but its training links are gone: realign with priors
                    log.warning("%s: %s missing or stale; aligning the training text with the priors", level, name)
                links = aligner.align(s, t)
                write_links(out / name, links)
            manifest[name] = key
            _write_manifest(manifest_path, manifest)
            level_summary[split] = link_stats(links, [len(x) for x in s], [len(x) for x in t])
        summary[level] = level_summary

    print(f"scanmt align: {meta['src_lang']}-{meta['tgt_lang']}, {settings.symmetrization}, "
          f"{time.perf_counter() - t_start:.0f} s; output in {out}")
    for level, per_split in summary.items():
        print(f" {level} level (model: {out / level})")
        for split, st in per_split.items():
            _print_stats(f"{split}.{level}.align", st)
    return 0


# --------------------------------------------------------------------------- apply


def _run_apply(args: argparse.Namespace) -> int:
    if not (args.src and args.tgt and args.out):
        raise ConfigError("--model needs --src FILE --tgt FILE --out FILE")
    model_dir: Path = args.model
    if not (model_dir / MODEL_FILE).exists():
        level = args.level or "subword"
        if level == "both":
            raise ConfigError("--level both is for training; pick subword or word with --model")
        model_dir = model_dir / level
    aligner = Aligner.load(model_dir)
    src, tgt = _read_pair(args.src, args.tgt)
    links = aligner.align(src, tgt)
    write_links(args.out, links)
    print(f"scanmt align: aligned {len(links)} pairs with {model_dir} ({aligner.settings.symmetrization}) -> {args.out}")
    _print_stats(args.out.name, link_stats(links, [len(x) for x in src], [len(x) for x in tgt]))
    return 0


# --------------------------------------------------------------------------- gold AER


def gold_scores(gold: list[tuple[set, set]], hyp: list[set]) -> dict:
    """Corpus AER (:func:`scanmt.metrics.aer.aer`, Och & Ney 2003) with precision and recall.

    ``precision = |A∩P| / |A|``, ``recall = |A∩S| / |S|`` (fractions; AER in percent
    as the metrics module returns it).
    """
    from scanmt.metrics.aer import aer

    a_s = sum(len(a & s) for a, (s, _) in zip(hyp, gold))
    a_p = sum(len(a & (p | s)) for a, (s, p) in zip(hyp, gold))
    n_a = sum(map(len, hyp))
    n_s = sum(len(s) for s, _ in gold)
    return {
        "aer": aer(hyp, gold),
        "precision": a_p / n_a if n_a else 0.0,
        "recall": a_s / n_s if n_s else 0.0,
        "links": n_a,
    }


def _run_eval(args: argparse.Namespace) -> int:
    gold_dir: Path = args.eval_gold
    if args.data is None:
        raise ConfigError("--eval-gold needs --data DIR: the prepared data whose training text the gold set joins")
    level = args.level or "word"
    if level == "both":
        raise ConfigError("--eval-gold: pick --level word or --level subword")
    meta = read_meta(args.data)
    langs = (meta["src_lang"], meta["tgt_lang"])
    if set(langs) != set(GOLD_LANGS):
        raise DataError(f"{args.data}: gold set is {GOLD_LANGS[0]}-{GOLD_LANGS[1]} but the data is {langs[0]}-{langs[1]}")
    de, en = GOLD_LANGS
    g_de, g_en = _read_pair(gold_dir / f"test.{de}", gold_dir / f"test.{en}")
    gold = read_links(gold_dir / "test.talp", one_indexed=True,
                      src_lens=[len(x) for x in g_de], tgt_lens=[len(x) for x in g_en])

    # training text with German on the aligner's source side
    kind = LEVEL_FILES[level]
    t_de, t_en = _read_pair(args.data / f"train.{kind}.{de}", args.data / f"train.{kind}.{en}")
    if level == "subword":
        from scanmt.data.subword import SubwordModel, word_index

        spm = SubwordModel(args.data / "spm.model")
        a_de = [spm.encode(" ".join(x)) for x in g_de]
        a_en = [spm.encode(" ".join(x)) for x in g_en]
        for n, (pieces, words, lang) in enumerate(
            [(p, w, de) for p, w in zip(a_de, g_de)] + [(p, w, en) for p, w in zip(a_en, g_en)]
        ):
            n_words = (word_index(pieces)[-1] + 1) if pieces else 0
            if n_words != len(words):
                raise DataError(
                    f"{gold_dir / f'test.{lang}'}:{n % len(g_de) + 1}: subword encoding gives {n_words} words "
                    f"for {len(words)} tokens, cannot project links back to words"
                )
    else:
        a_de, a_en = g_de, g_en
    n_train, n_gold = len(t_de), len(g_de)
    settings = _settings(args)
    print(f"scanmt align --eval-gold: {n_train} training pairs from {args.data} + {n_gold} gold pairs, "
          f"{level} level, eflomal model {settings.model}", flush=True)
    aligner = Aligner(settings)
    t0 = time.perf_counter()
    fwd, rev = aligner.fit_directional(t_de + a_de, t_en + a_en)
    seconds = time.perf_counter() - t0
    fwd, rev = fwd[n_train:], rev[n_train:]

    results: dict = {}
    for name, hyp in [("forward (de->en)", fwd), ("reverse (en->de)", rev)] + [
        (m, [symmetrize(f, r, m) for f, r in zip(fwd, rev)]) for m in METHODS
    ]:
        if level == "subword":
            hyp = [project_to_words(h, sd, se) for h, sd, se in zip(hyp, a_de, a_en)]
        results[name] = gold_scores(gold, hyp)
    print(f"  {'alignment':<22} {'AER':>6} {'prec':>6} {'recall':>6}")
    for name, r in results.items():
        mark = "  <- used" if name == settings.symmetrization else ""
        print(f"  {name:<22} {r['aer']:6.2f} {100 * r['precision']:6.2f} {100 * r['recall']:6.2f}{mark}")
    print(f"  eflomal time {seconds:.0f} s; gold: {sum(len(s) for s, _ in gold)} sure, "
          f"{sum(len(p) for _, p in gold)} possible links (1-indexed talp, shifted to 0-based); AER in %")
    if args.out:
        report = {
            "gold": str(gold_dir), "data": str(args.data), "level": level, "n_train": n_train, "n_gold": n_gold,
            "settings": dataclasses.asdict(settings), "seconds": seconds, "results": results,
        }
        with atomic_open(args.out) as fh:
            json.dump(report, fh, indent=2)
            fh.write("\n")
    return 0
