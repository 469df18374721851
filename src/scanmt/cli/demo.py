"""``scanmt demo``: the main job, end to end on Multi30k De→En in a few CPU minutes."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import sacrebleu

from scanmt.cli import positive_int
from scanmt.config import Config
from scanmt.data.attention_file import SentenceAttention, save_attention
from scanmt.io import check_output_dir, read_lines, write_lines
from scanmt.presets import preset_path

NAME = "demo"
HELP = "prepare Multi30k, train a small model for a few minutes, translate the test set, print BLEU"
DESCRIPTION = """The whole pipeline in one command (about 15 minutes on a 2-core CPU):

  1. prepare Multi30k (tokenize, joint BPE) into OUT/data
  2. train the cpu-small preset for --minutes into OUT/model (rerunning resumes/reuses it)
  3. translate test_2016_flickr with beam search into OUT/test.hyp.{tgt} (+ attention .npz)
  4. print sacreBLEU and a few sample translations"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default="runs/demo", help="output directory for everything the demo makes")
    p.add_argument("--pair", default="de-en", help="Multi30k language pair (de-en, fr-en, cs-en, ...)")
    p.add_argument("--mirror", help="local directory with Multi30k's {split}.{lang}.gz (else ../shared/data/multi30k, then download)")
    p.add_argument("--preset", default="cpu-small", help="config preset name or YAML path")
    p.add_argument("--minutes", type=float, default=10.0, help="training time budget in minutes")
    p.add_argument("--transform", default="softmax", help="attention transform (softmax, sparsemax, ...)")
    p.add_argument("--beam", type=positive_int, default=5, help="beam size for the test set")
    p.add_argument("--samples", type=int, default=5, help="sample translations to print")
    p.add_argument("--set", action="extend", nargs="+", default=[], metavar="KEY=VALUE",
                   help="extra config overrides, e.g. --set train.max_minutes=5 train.precision=bf16")


def run(args: argparse.Namespace) -> int:
    from scanmt.cli.prepare import multi30k_splits, parse_pair
    from scanmt.data.prepare import prepare
    from scanmt.decoding.translator import Translator
    from scanmt.training.trainer import Trainer

    t_start = time.time()
    out = check_output_dir(args.out, ours=lambda d: (d / "data").is_dir() or (d / "model").is_dir(),
                           holds="an earlier demo (data/, model/)")
    src, tgt = parse_pair(args.pair)
    data_dir = out / "data"
    print(f"[1/4] preparing Multi30k {src}->{tgt} in {data_dir}")
    prepare(multi30k_splits(src, tgt, args.mirror), src, tgt, data_dir)

    overrides = [
        f"data.dir={data_dir}", f"data.src_lang={src}", f"data.tgt_lang={tgt}",
        f"train.max_minutes={args.minutes}", f"model.attention.transform={args.transform}", *args.set,
    ]
    cfg = Config.load(preset_path(args.preset), overrides)
    model_dir = out / "model"
    print(f"[2/4] training {args.preset} ({args.transform}) for up to {args.minutes:g} min in {model_dir}")
    trainer = Trainer(cfg, model_dir, resume=(model_dir / "last.pt").exists())
    progress = trainer.train()

    print(f"[3/4] translating test_2016_flickr (beam {args.beam})")
    tr = Translator.from_checkpoint(model_dir / "best.pt")
    sources = read_lines(data_dir / f"test.raw.{src}")
    refs = read_lines(data_dir / f"test.raw.{tgt}")
    t0 = time.time()
    hyps = tr.translate_lines(sources, beam=args.beam, progress=True)
    dt = time.time() - t0
    write_lines(out / f"test.hyp.{tgt}", [h.text for h in hyps])
    save_attention(
        out / "test.attn.npz",
        [SentenceAttention(h.hypothesis.attention.numpy(), *h.attention_tokens) for h in hyps],
        {"transform": cfg.model.attention.transform, "sink": tr.model.sink},
    )

    print("[4/4] scoring")
    bleu = sacrebleu.metrics.BLEU()
    score = bleu.corpus_score([h.text for h in hyps], [refs])
    print("\nsample translations")
    for i in range(min(args.samples, len(hyps))):
        print(f"  SRC  {sources[i]}\n  REF  {refs[i]}\n  MT   {hyps[i].text}\n")
    print("demo summary")
    print(f"  model:       {model_dir / 'best.pt'} (best greedy valid BLEU {progress.best_score:.2f} at step {progress.best_step})")
    print(f"  training:    {progress.step} steps, {progress.elapsed / 60:.1f} min")
    print(f"  decoding:    {len(hyps)} sentences in {dt:.1f} s ({len(hyps) / max(dt, 1e-9):.1f} sent/s, beam {args.beam})")
    print(f"  test BLEU:   {score.score:.2f}  ({bleu.get_signature()})")
    print(f"  outputs:     {out / f'test.hyp.{tgt}'}, {out / 'test.attn.npz'}")
    print(f"  total time:  {(time.time() - t_start) / 60:.1f} min")
    return 0
