#!/usr/bin/env bash
# Issue 53's epoch measurement: does the KFTT LSTM gain from training longer, and does csparsemax's effect on REP
# and DROP hold when it does?  The grid's runs stop at 18,000 updates (1.83 epochs: docs/kftt.md, "Budget"). This
# continues one seed of softmax and of csparsemax, each in a copy of its grid folder, to UPDATES (default 24,000:
# the rest of epoch 2, then epoch 3 at the halved learning rate), both at once at one thread each. `train --resume`
# is exact (the optimizer, the learning-rate schedule and the batch order go on as one longer run would have), and
# dev still picks best.pt. Then each is decoded on test with the grid's settings (beam 5, no penalties), scored as
# the grid scores it, and the two compared (paired bootstrap of BLEU).
#   PYTHONPATH=$PWD/src bash scripts/continue-kftt.sh            # rerun to continue; finished steps are skipped
# GRID (default /work/runs/kftt): the grid folder; LONGER (default GRID-longer): where the copies train;
# SEED: the seed continued [the lowest one both systems finished with a checkpoint: a run restored from an archive
# has none, so on a new machine the seeds trained there; with none, the script says so and exits 0]; PYTHON as in
# grid-kftt.sh. The grid's own runs are only read.
set -euo pipefail
cd "$(dirname "$0")/.."
GRID=${GRID:-/work/runs/kftt}
LONGER=${LONGER:-$GRID-longer}
UPDATES=${UPDATES:-24000}
if [[ -z ${PYTHON:-} ]]; then
  PYTHON=.venv/bin/python
  [[ -x $PYTHON ]] || PYTHON=/work/main/.venv/bin/python
fi
export PYTHONPATH=$PWD/src OMP_NUM_THREADS=1
scanmt() { "$PYTHON" -m scanmt "$@"; }
DATA=$GRID/shared/data SRC=${SRC_LANG:-ja} TGT=${TGT_LANG:-en}
if [[ -z ${SEED:-} ]]; then
  SEED=1
  for dir in "$GRID"/runs/softmax/seed*/; do
    s=$(basename "$dir"); s=${s#seed}
    [[ $s =~ ^[0-9]+$ ]] || continue
    if [[ -f $GRID/runs/softmax/seed$s/last.pt && -f $GRID/runs/softmax/seed$s/DONE &&
          -f $GRID/runs/csparsemax/seed$s/last.pt && -f $GRID/runs/csparsemax/seed$s/DONE ]] && ((s < ${best:-999})); then
      best=$s
    fi
  done
  if [[ -z ${best:-} ]]; then  # every finished seed was restored from an archive (or none finished yet)
    echo "continue-kftt: skipped: no seed of both softmax and csparsemax finished training on this machine with its" \
      "last.pt (runs restored from an archive keep no checkpoint); the measurement's result from an earlier machine" \
      "is in docs/kftt.md ('Twenty-seventh session'); set SEED to continue a seed anyway"
    exit 0
  fi
  SEED=$best
fi

# copy SYSTEM: the grid run's training files into $LONGER/SYSTEM (once, atomically: a copy in .tmp, then renamed),
# with the seed it continues in $LONGER/SYSTEM/SEED
copy() {
  local from=$GRID/runs/$1/seed$SEED to=$LONGER/$1
  if [[ -d $to ]]; then
    [[ $(cat "$to/SEED" 2>/dev/null || echo 1) == "$SEED" ]] && return 0
    echo "continue-kftt: $to continues seed $(cat "$to/SEED"), not $SEED; move it aside or set SEED" >&2
    return 1
  fi
  [[ -f $from/DONE ]] || { echo "continue-kftt: $from has not finished; run scripts/grid-kftt.sh first" >&2; return 1; }
  [[ -f $from/last.pt ]] || {
    echo "continue-kftt: $from has no last.pt (restored from an archive, which keeps no checkpoints): set SEED to" \
      "a seed trained on this machine" >&2; return 1; }
  mkdir -p "$LONGER"
  rm -rf "$to.tmp" && mkdir "$to.tmp"
  cp -p "$from"/{config.yaml,last.pt,best.pt,metrics.csv,log.txt} "$to.tmp/"
  echo "$SEED" > "$to.tmp/SEED"
  mv "$to.tmp" "$to"
}

# continue SYSTEM: train to $UPDATES, then decode and score test (each step skipped once its output is there)
continue_run() {
  local run=$LONGER/$1
  copy "$1"
  [[ -f $run/trained-$UPDATES ]] || {
    scanmt train --config "$run/config.yaml" --out "$run" --resume --set "train.max_steps=$UPDATES"
    touch "$run/trained-$UPDATES"
  }
  [[ -f $run/test.hyp.$TGT && $run/test.hyp.$TGT -nt $run/trained-$UPDATES ]] ||
    scanmt translate --model "$run/best.pt" --input "$DATA/test.raw.$SRC" --output "$run/test.hyp.$TGT" --beam 5 \
      --attention-out "$run/test.attn.npz" --tokenized-out "$run/test.hyp.tok.$TGT" --search-stats "$run/test.search.json"
  [[ -f $run/eval.json && $run/eval.json -nt $run/test.hyp.$TGT ]] ||
    scanmt evaluate --hyp "$run/test.hyp.$TGT" --ref "$DATA/test.raw.$TGT" --src "$DATA/test.raw.$SRC" --src-lang $SRC --tgt-lang $TGT \
      --align-model "$DATA/align/word" --drop-samples 3 --attention "$run/test.attn.npz" --json "$run/eval.json"
}

echo "##### $(date -u +%FT%TZ) continue softmax and csparsemax seed $SEED to $UPDATES updates in $LONGER"
mkdir -p "$LONGER"
continue_run softmax > "$LONGER/softmax.out" 2>&1 &
A=$!
continue_run csparsemax > "$LONGER/csparsemax.out" 2>&1 &
B=$!
failed=0
wait $A || { failed=1; echo "continue-kftt: softmax failed; see $LONGER/softmax.out" >&2; }
wait $B || { failed=1; echo "continue-kftt: csparsemax failed; see $LONGER/csparsemax.out" >&2; }
((failed == 0)) || exit 1
scanmt evaluate --hyp "$LONGER/softmax/test.hyp.$TGT" --hyp2 "$LONGER/csparsemax/test.hyp.$TGT" --ref "$DATA/test.raw.$TGT" \
  --src-lang $SRC --tgt-lang $TGT --metrics bleu tok-bleu --json "$LONGER/paired.json"
echo "##### $(date -u +%FT%TZ) done: $LONGER/{softmax,csparsemax}/eval.json, $LONGER/paired.json"
