#!/usr/bin/env bash
# Table 1 of the paper with configs/paper.yaml (2x500 BiLSTM, SGD, 13 epochs) on one lent GPU machine:
# every system x seed trains at the same time, one process each, on the one GPU.
#
# The machine has no internet. What it needs travels in .gpu/ (ignored by git, see .git/info/exclude):
#   .gpu/data       the grid's prepared Multi30k De-En folder (../grid/table1/shared/data: spm, vocab, bpe,
#                   raw, fertility cache)
#   .gpu/predictor  best.pt of the grid's fertility predictor (../grid/table1/shared/predictor)
#   .gpu/whl        wheels of the Python packages its image lacks (sacremoses, nltk)
#
# Usage, from the repository root on the GPU machine:
#   bash scripts/gpu-paper-table1.sh start [SYSTEM...]   install, launch every run in the background
#                                                         (setsid: they outlive the command), return
#   bash scripts/gpu-paper-table1.sh status               one line per run: its last log line
#   bash scripts/gpu-paper-table1.sh pack DIR             one .tar.gz per system in DIR: hypotheses,
#                                                         attention, logs, metrics, configs (no checkpoints)
# EXTRA_SETS="key=value ..." adds settings to every run (a smoke test: EXTRA_SETS="train.max_steps=20
# data.train_limit=500 data.valid_limit=50"). Each run trains, translates test and test2017 (beam 5, the checkpoint's own bounds), and for softmax and
# sparsemax also tunes the CovPenalty (alpha, beta) on valid and translates with it. Scoring (BLEU, METEOR,
# REP, DROP) happens afterwards on the CPU machine, where eflomal is installed.
set -u
ROOT=$PWD
W=${PAPER_GRID_DIR:-/root/paper-grid}
D=$ROOT/.gpu/data
SEEDS=${SEEDS:-"1 2 3"}
export PYTHONPATH=/tmp/site:$ROOT/src PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 SCANMT_OPS_NATIVE=0

declare -A SETS=(
  [softmax]="model.attention.transform=softmax"
  [sparsemax]="model.attention.transform=sparsemax"
  [csoftmax]="model.attention.transform=csoftmax model.attention.exhaustion=0.2 model.attention.fertility.strategy=predicted model.attention.fertility.add=1.0 model.attention.fertility.predictor=$ROOT/.gpu/predictor/best.pt"
  [csparsemax]="model.attention.transform=csparsemax model.attention.exhaustion=0.2 model.attention.fertility.strategy=predicted model.attention.fertility.add=1.0 model.attention.fertility.predictor=$ROOT/.gpu/predictor/best.pt"
  [softmax-covvector]="model.attention.transform=softmax model.coverage.type=linguistic"
  [sparsemax-covvector]="model.attention.transform=sparsemax model.coverage.type=linguistic"
)
ALL="softmax sparsemax csoftmax csparsemax softmax-covvector sparsemax-covvector"

one_run() {  # SYSTEM SEED: train, translate, (tune penalties, translate again); DONE when all went well
  local sys=$1 seed=$2 out=$W/runs/$1/seed$2 sets=() s
  mkdir -p "$out"
  for s in data.dir=$D data.src_lang=de data.tgt_lang=en train.seed=$seed train.threads=1 \
           decode.length_alpha=0.0 decode.coverage_beta=0.0 ${SETS[$sys]} ${EXTRA_SETS:-}; do sets+=(--set "$s"); done
  python3 -m scanmt train --config configs/paper.yaml "${sets[@]}" --out "$out" || return 1
  local split
  for split in test test2017; do
    python3 -m scanmt translate --model "$out/best.pt" --input "$D/$split.raw.de" --output "$out/$split.hyp.en" \
      --tokenized-out "$out/$split.hyp.tok.en" --attention-out "$out/$split.attn.npz" --beam 5 --device ${DEV:-cuda} || return 1
  done
  if [[ $sys == softmax || $sys == sparsemax ]]; then
    local pen=$W/runs/$sys-covpenalty/seed$seed
    mkdir -p "$pen"
    python3 -m scanmt tune-penalties --model "$out/best.pt" --data "$D" --split valid --out "$pen/penalties.yaml" \
      --beam 5 --device ${DEV:-cuda} > "$pen/log.txt" 2>&1 || return 1
    for split in test test2017; do
      python3 -m scanmt translate --model "$out/best.pt" --input "$D/$split.raw.de" --output "$pen/$split.hyp.en" \
        --tokenized-out "$pen/$split.hyp.tok.en" --attention-out "$pen/$split.attn.npz" --beam 5 --device ${DEV:-cuda} \
        --penalties "$pen/penalties.yaml" >> "$pen/log.txt" 2>&1 || return 1
    done
    date -u +%FT%TZ > "$pen/DONE"
  fi
  date -u +%FT%TZ > "$out/DONE"
}

case ${1:-} in
  start)
    shift
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .gpu/whl/*.whl || exit 1
    nvidia-smi -L
    python3 -c "import torch, scanmt; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())" || exit 1
    mkdir -p "$W"
    for sys in ${*:-$ALL}; do
      [[ -n ${SETS[$sys]:-} ]] || { echo "unknown system $sys (known: $ALL)"; exit 2; }
      for seed in $SEEDS; do
        [[ -f $W/runs/$sys/seed$seed/DONE ]] && continue
        mkdir -p "$W/runs/$sys/seed$seed"
        setsid bash -c "source '$0' _lib; cd '$ROOT'; one_run $sys $seed" \
          > "$W/runs/$sys/seed$seed/stdout.txt" 2>&1 < /dev/null &
        echo "started $sys seed $seed"
      done
    done
    ;;
  status)
    shopt -s nullglob
    for f in "$W"/runs/*/seed*/stdout.txt; do
      d=$(dirname "$f")
      printf '%-28s %s\n' "${d#$W/runs/}" "$( [[ -f $d/DONE ]] && echo DONE || tr '\r' '\n' < "$f" | grep -v '^\s*$' | tail -1 | cut -c1-150)"
    done
    ;;
  pack)
    out=${2:?pack needs a folder}
    mkdir -p "$out"
    for sd in "$W"/runs/*/; do
      sys=$(basename "$sd")
      tar -C "$W/runs" -czf "$out/$sys.tar.gz" --exclude='*.pt' "$sys"
    done
    ls -la "$out"
    ;;
  _lib) ;;  # sourced by the background runs for one_run
  *) sed -n 2,22p "$0"; exit 2 ;;
esac
