#!/usr/bin/env bash
# The CPU grids of the open issues 28 and 30, one after the other, resumable: rerun this script to continue
# (finished runs are skipped, a killed run resumes from its last checkpoint, a finished grid costs seconds).
# Two workers of one thread each, bf16 where the preset allows it (docs/results.md, "Long experiments").
#   cd ../grid-codeN && PYTHONPATH=$PWD/src nohup bash scripts/grids-open-issues.sh >> "$GRID_ROOT/queue.log" 2>&1 &
# Run it from a worktree of one commit (git worktree add --detach ../grid-codeN HEAD), so that the code of a
# grid does not change under it. GRID_ROOT (default /work/runs) holds the prepared data and every grid folder;
# PYTHON (default the checkout's .venv, else /work/main/.venv) runs scanmt.
# The machine may not outlive the grids: each grid is first restored from GRID_ARCHIVE/NAME (default
# /work/main/archive, the checkout's archive/, kept in git), and its finished runs are packed there every
# 10 minutes (`scanmt experiment archive`; no checkpoints), so a new machine continues with the same
# alignments and (retrained, checked) fertility predictor; commit archive/ as runs finish.
# Order: the grid closest to its issue's bars first.
#   1. issue 28: experiments/transformer.yaml with the transformer-small preset (bf16 on the CPU), 3 seeds
#      (about 1.5-2 h per run with one thread), with the stress test (issue 30; about 6 minutes per run);
#   2. issue 30: Table 1's bar systems with the stress test, then the recipe ablation into the same folder
#      (its cpu-small softmax and csparsemax are Table 1's runs): its twelve systems first, then
#      softmax-unscaled (Adam with unscaled scores, which splits the SGD arm).
# GRID_WORKERS x GRID_THREADS (default 2 x 1) sets the parallel runs and their threads: where a run at one
# thread cannot finish within a session (on one Intel Xeon bf16 ran at half the fp32 rate, so a Transformer
# run took about 3 hours at one thread), GRID_WORKERS=1 GRID_THREADS=2 finishes one run in about 1.7 hours
# (train.threads does not make a finished run stale).
# GRID_PRECISION (default auto) sets train.precision of every run that trains from here on: auto takes bf16 where
# this CPU's bf16 training steps measure at least 1.25x faster than fp32's (scanmt.training.precision), else
# fp32 (bf16 measured 0.19x fp32's speed on an Intel Xeon without AVX512-BF16); a finished run stays as it was
# (train.precision does not make it stale) and the report names each attempt's precision.
# GRID_DEADLINE (for example +2h50m or 13:10) passes --deadline to every grid command: a run expected to end
# after it (estimated from the finished runs of the same grid folder) is not started, so that a session's last
# hour goes to the runs that can finish in it (a later grid's shorter runs, rather than a Transformer that cannot).
# Progress: scanmt experiment status $GRID_ROOT/GRID --brief (each run training, decoding, stopped or not started,
# and the time left). Reports: scanmt experiment report $GRID_ROOT/GRID --grid NAME --out docs/
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=${GRID_ROOT:-/work/runs}
ARCHIVE=${GRID_ARCHIVE:-/work/main/archive}
DATA=$ROOT/data/multi30k-de-en
if [[ -z ${PYTHON:-} ]]; then
  PYTHON=.venv/bin/python
  [[ -x $PYTHON ]] || PYTHON=/work/main/.venv/bin/python
fi
export PYTHONPATH=$PWD/src
GRIDS=(transformer-lr14 table1)
mkdir -p "$ROOT/data"
[[ -f $DATA/meta.json ]] || "$PYTHON" -m scanmt prepare --corpus multi30k --pair de-en --out "$DATA"
pack_all() {
  for g in "${GRIDS[@]}"; do
    [[ -d $ROOT/$g/grids ]] && "$PYTHON" -m scanmt experiment archive "$ROOT/$g" --to "$ARCHIVE/$g" || true
  done
}
for g in "${GRIDS[@]}"; do
  [[ -f $ARCHIVE/$g/manifest.json ]] && "$PYTHON" -m scanmt experiment restore "$ARCHIVE/$g" --out "$ROOT/$g"
done
(while sleep 600; do pack_all; done) &
PACKER=$!
trap 'kill $PACKER 2>/dev/null; pack_all' EXIT
run() { echo "##### $(date -u +%FT%TZ) scanmt experiment run $*"; "$PYTHON" -m scanmt experiment run "$@"; }
WORKERS=${GRID_WORKERS:-2}
THREADS=${GRID_THREADS:-1}
DEADLINE=()
if [[ -n ${GRID_DEADLINE:-} ]]; then  # fixed once here: a +DURATION must not move with each grid's start
  at=$("$PYTHON" -c 'import sys; from scanmt.experiments.deadline import parse_deadline as p
try: print(int(p(sys.argv[1])))
except Exception as e: sys.exit(f"GRID_DEADLINE: {e}")' "$GRID_DEADLINE")
  DEADLINE=(--deadline "$(date -d "@$at" '+%Y-%m-%d %H:%M:%S')")
  echo "deadline: ${DEADLINE[1]}"
fi
PRECISION=${GRID_PRECISION:-auto}
if [[ $PRECISION == auto ]]; then  # measured once here; the grids' trainers inherit it (SCANMT_BF16_SPEEDUP)
  measured=$("$PYTHON" -c 'import os, sys; from scanmt.training.precision import SPEEDUP_ENV, cpu_prefers_bf16 as p
print("bf16" if p(int(sys.argv[1])) else "fp32", os.environ[SPEEDUP_ENV])' "$THREADS")
  read -r PRECISION SCANMT_BF16_SPEEDUP <<< "$measured"
  export SCANMT_BF16_SPEEDUP
fi
echo "precision: $PRECISION"
LSTM=(--data "$DATA" --preset cpu-small --seeds 3 --workers "$WORKERS"
      --set "train.threads=$THREADS" "train.precision=$PRECISION" "${DEADLINE[@]}")

run experiments/transformer.yaml --data "$DATA" --preset transformer-small --seeds 3 --workers "$WORKERS" \
    --set "train.threads=$THREADS" "train.precision=$PRECISION" --extra-splits test2017 valid --stress-k 1 2 3 4 \
    --out "$ROOT/transformer-lr14" "${DEADLINE[@]}"
run experiments/table1.yaml "${LSTM[@]}" --systems softmax sparsemax csoftmax csparsemax --stress-k 1 2 3 4 \
    --out "$ROOT/table1"
# the ablation's twelve systems to 3 seeds first (issue 30's bar), then softmax-unscaled, which splits the SGD arm
ABLATION=(softmax csparsemax)
for arm in paper-recipe ls0 untied sgd batch; do ABLATION+=("softmax-$arm" "csparsemax-$arm"); done
run experiments/recipe-ablation.yaml "${LSTM[@]}" --systems "${ABLATION[@]}" --stress-k 1 2 3 4 --out "$ROOT/table1"
run experiments/recipe-ablation.yaml "${LSTM[@]}" --stress-k 1 2 3 4 --out "$ROOT/table1"
