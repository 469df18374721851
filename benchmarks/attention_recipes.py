"""Side-by-side training recipes for sparse attention: does the attention keep learning?

Trains one short run per (recipe, transform) from the same preset, seed and data
order (so every run sees the same batches), two at a time with one thread each,
then prints the attention health that the training log recorded (support, one-hot
share, gradient norm at the scores; :mod:`scanmt.training.attention_health`) at a
few updates and the greedy validation BLEU at the end.

    python benchmarks/attention_recipes.py --steps 400 --transforms sparsemax \\
        --recipes adam adam-sqrt adam-learned adam-cosine adam-mlp sgd-paper adam-warmup --out runs/recipes

Finished runs are reused (delete their folder to rerun one).
"""

from __future__ import annotations

import argparse
import csv
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

#: recipe name -> --set overrides on top of the preset ("adam-*" and "sgd-*" name cpu-small's optimizer or the
#: paper's; "preset-*" keep the preset's optimizer and change only the score scaling)
RECIPES: dict[str, list[str]] = {
    "preset-none": ["model.attention.scaling=none"],
    "preset-sqrt": ["model.attention.scaling=sqrt"],
    "preset-cosine": ["model.attention.scaling=cosine"],
    "adam": ["model.attention.scaling=none"],
    "adam-sqrt": ["model.attention.scaling=sqrt"],
    "adam-learned": ["model.attention.scaling=learned"],
    "adam-cosine": ["model.attention.scaling=cosine"],
    "adam-mlp": ["model.attention.scaling=none", "model.attention.score=mlp"],
    "adam-mlp-sqrt": ["model.attention.scaling=sqrt", "model.attention.score=mlp"],
    "adam-warmup": ["model.attention.scaling=none", "train.warmup_steps=400"],
    "adam-lr5e-4": ["model.attention.scaling=none", "train.lr=0.0005"],
    "sgd-paper": ["model.attention.scaling=none", "train.optimizer=sgd", "train.lr=1.0", "train.normalization=sents"],
    "sgd-paper-sqrt": ["model.attention.scaling=sqrt", "train.optimizer=sgd", "train.lr=1.0", "train.normalization=sents"],
    "adam-sqrt-warmup": ["model.attention.scaling=sqrt", "train.warmup_steps=400"],
}

#: transform -> extra overrides (constrained transforms need fertility)
TRANSFORMS: dict[str, list[str]] = {
    "softmax": ["model.attention.transform=softmax"],
    "sparsemax": ["model.attention.transform=sparsemax"],
    "csoftmax": ["model.attention.transform=csoftmax", "model.attention.fertility.strategy=constant",
                 "model.attention.exhaustion=0.2"],
    "csparsemax": ["model.attention.transform=csparsemax", "model.attention.fertility.strategy=constant",
                   "model.attention.exhaustion=0.2"],
}


def read_metrics(path: Path) -> dict[str, dict[int, float]]:
    out: dict[str, dict[int, float]] = {}
    with path.open(encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            out.setdefault(row["name"], {})[int(row["step"])] = float(row["value"])
    return out


def run_one(args: argparse.Namespace, recipe: str, transform: str) -> Path:
    out = args.out / f"{recipe}--{transform}"
    if (out / "best.pt").exists() and (out / "metrics.csv").exists():
        return out
    if out.exists():  # an unfinished run of this harness: start it again
        shutil.rmtree(out)
    sets = [
        f"train.max_steps={args.steps}", f"train.log_every={args.log_every}", "train.threads=1",
        f"train.precision={args.precision}", f"train.seed={args.seed}", f"data.valid_limit={args.valid_limit}",
        "train.valid_every=0", "train.checkpoint_every=100000", *TRANSFORMS[transform], *RECIPES[recipe], *args.set,
    ]
    cmd = [args.scanmt, "train", "--config", str(args.config), "--out", str(out), "--set", *sets]
    with open(args.out / f"{recipe}--{transform}.log", "w") as log:
        subprocess.run(cmd, check=True, stdout=log, stderr=subprocess.STDOUT)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", type=Path, default=Path("configs/cpu-small.yaml"), help="preset to start from")
    ap.add_argument("--recipes", nargs="+", default=["adam", "adam-sqrt"], choices=sorted(RECIPES), help="recipes to run")
    ap.add_argument("--transforms", nargs="+", default=["sparsemax"], choices=sorted(TRANSFORMS), help="transforms")
    ap.add_argument("--jobs", nargs="+", default=[], metavar="RECIPE:TRANSFORM",
                    help="run exactly these pairs instead of every recipe x transform")
    ap.add_argument("--steps", type=int, default=400, help="updates per run")
    ap.add_argument("--log-every", type=int, default=25, help="logging (and health) window in updates")
    ap.add_argument("--at", type=int, nargs="+", default=[25, 50, 100, 200, 400], help="updates to report")
    ap.add_argument("--seed", type=int, default=1, help="training seed (same data order for every run)")
    ap.add_argument("--precision", default="bf16", choices=["fp32", "bf16"], help="train.precision")
    ap.add_argument("--valid-limit", type=int, default=0, help="data.valid_limit for the final greedy BLEU (0 = all)")
    ap.add_argument("--workers", type=int, default=2, help="runs at a time (one thread each)")
    ap.add_argument("--set", nargs="*", default=[], help="extra --set overrides for every run")
    ap.add_argument("--scanmt", default=str(Path(sys.executable).with_name("scanmt")), help="scanmt executable")
    ap.add_argument("--out", type=Path, default=Path("runs/recipes"), help="folder of the runs")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    jobs = [tuple(j.split(":", 1)) for j in args.jobs] or [(r, t) for t in args.transforms for r in args.recipes]
    for recipe, transform in jobs:
        if recipe not in RECIPES or transform not in TRANSFORMS:
            ap.error(f"unknown recipe or transform in {recipe}:{transform}")
    with ThreadPoolExecutor(args.workers) as pool:
        outs = list(pool.map(lambda job: run_one(args, *job), jobs))
    at = [s for s in args.at if s <= args.steps]
    print(f"# {args.config}, seed {args.seed}, {args.steps} updates, {args.precision}; "
          f"support / one-hot % / |dL/dz| per window ending at the update")
    print("| recipe | transform | " + " | ".join(f"upd {s}" for s in at) + " | valid ppl | greedy valid BLEU |")
    print("| --- | --- | " + " | ".join("---" for _ in at) + " | ---: | ---: |")
    for (recipe, transform), out in zip(jobs, outs):
        m = read_metrics(out / "metrics.csv")
        cells = []
        for s in at:
            sup, hot, g = (m.get(k, {}).get(s) for k in ("attn/support", "attn/one_hot", "attn/score_grad"))
            cells.append("–" if sup is None else f"{sup:.2f} / {100 * hot:.0f} / {g:.1e}")
        ppl = max(m.get("valid/ppl", {0: float("nan")}).items())[1]
        bleu = max(m.get("valid/bleu", {0: float("nan")}).items())[1]
        print(f"| {recipe} | {transform} | " + " | ".join(cells) + f" | {ppl:.2f} | {bleu:.2f} |")


if __name__ == "__main__":
    main()
