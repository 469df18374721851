#!/usr/bin/env bash
# The KFTT Ja->En grids of issue 53, resumable: rerun this script to continue (finished runs are skipped, a killed
# run resumes from its last checkpoint, a finished step costs seconds). The LSTM grid in two workers of one thread
# each, in fp32; the Transformer pair one run at a time on every CPU, in the precision measured faster here
# (below).
#   git worktree add --detach ../grid-kftt HEAD && cd ../grid-kftt
#   PYTHONPATH=$PWD/src nohup bash scripts/grid-kftt.sh >> /work/runs/kftt-queue.log 2>&1 &
# Run it from a worktree of one commit, so that the code of a grid does not change under it. GRID_ROOT (default
# /work/runs) holds the grid folder kftt/; PYTHON (default the checkout's .venv, else /work/main/.venv) runs
# scanmt. The machine may not outlive the grids (sessions 63 and 71 began on new machines, every run lost): the
# grid is first restored from GRID_ARCHIVE/kftt (default /work/main/archive) and its finished runs are packed
# there every 10 minutes, as an archive of runs only (`experiment archive --runs-only`: no checkpoints, no corpus
# text, and no alignments, which are data, 20 MB packed): commit archive/kftt as runs finish. On a new machine the
# restore prepares the corpus again and puts the runs back, each with a record of the alignments and predictor it
# trained on (RUN/shared-origin.json); the grid then aligns afresh and trains only the missing runs, and the report
# lists the runs trained on the other machine's shared work. The archive keeps seed 1's attention only for the
# report's figure window (30-50 words, at most 70 subwords: recorded in its manifest, which later packs follow).
# The archive's format belongs to the newest code, not the frozen commit's:
# packing and restoring run with GRID_ARCHIVE_SRC (default /work/main/src). Progress: scanmt experiment status
# $GRID_ROOT/kftt --brief.
# Order: the bar's systems first, each with the stress test (K = 1-3): the LSTM pair's seeds 1-3 (seeds 1-2 are
# recorded in docs/experiments-kftt.* from runs that session 71's new machine lost), the epoch measurement on seed
# 1, the Transformer pair's seeds 1-3; then the other LSTM systems at one seed. (`--seeds N` runs seeds 1..N, in
# the order seeds x systems.)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=${GRID_ROOT:-/work/runs}
ARCHIVE=${GRID_ARCHIVE:-/work/main/archive}
OUT=$ROOT/kftt
if [[ -z ${PYTHON:-} ]]; then
  PYTHON=.venv/bin/python
  [[ -x $PYTHON ]] || PYTHON=/work/main/.venv/bin/python
fi
export PYTHONPATH=$PWD/src
export OMP_NUM_THREADS=1
mkdir -p "$ROOT"
# One queue at a time: a second one would start the same grids behind the first one's lock, and its packer would
# pack beside the first's. The queue holds $ROOT/kftt-queue.lock while it lives (its children inherit it, so a
# grid left running by a killed queue keeps it held); a grid holding $OUT/.lock (a queue started before this guard,
# or a grid started by hand) also counts.
exec 9>"$ROOT/kftt-queue.lock"
if ! flock -n 9; then
  echo "grid-kftt: another queue is running (it holds $ROOT/kftt-queue.lock: pgrep -af grid-kftt); not starting a second" >&2
  exit 1
fi
if [[ -e $OUT/.lock ]] && ! flock -n "$OUT/.lock" true; then
  echo "grid-kftt: a grid is running in $OUT (it holds $OUT/.lock: scanmt experiment status $OUT); not starting a queue beside it" >&2
  exit 1
fi
ARCHIVE_SRC=${GRID_ARCHIVE_SRC:-/work/main/src}
archive() { PYTHONPATH=$ARCHIVE_SRC "$PYTHON" -m scanmt experiment "$@"; }
pack() { [[ -d $OUT/grids ]] && archive archive "$OUT" --to "$ARCHIVE/kftt" --runs-only || true; }
[[ -f $ARCHIVE/kftt/manifest.json && ! -d $OUT/runs ]] && archive restore "$ARCHIVE/kftt" --out "$OUT"
# the packer: its sleep dies with it (a TERM interrupts the wait), so no sleep outlives the queue holding its output
(exec 9>&-; trap 'kill $nap 2>/dev/null; exit 0' TERM; while true; do sleep 600 & nap=$!; wait $nap; pack; done) &
PACKER=$!
trap 'kill $PACKER 2>/dev/null; pack' EXIT
run() { echo "##### $(date -u +%FT%TZ) scanmt experiment run $*"; "$PYTHON" -m scanmt experiment run "$@"; }
# Training precision, one per grid. The LSTM grid (GRID_PRECISION, default fp32) trains in fp32 on any machine,
# as its finished runs did, so that its table holds one recipe. The Transformer pair (GRID_TRANSFORMER_PRECISION,
# default auto) trains in the precision measured faster on the machine the queue reaches it on: bf16 trained it
# 2.2x faster than fp32 on an AMD EPYC and 0.7x on an Intel Xeon (docs/kftt.md, "Twenty-fifth session"). auto is
# the probe of `scanmt.training.precision` (bf16 at 1.25x or faster), measured when its grid starts; a run resumed
# on another machine continues in that machine's precision (train.precision may change on resume), and the
# report lists each run's machines and precisions.
precision_here() {
  local measured
  # the demo's --precision auto rule (one measurement: the second call reads the first's)
  measured=$("$PYTHON" -c 'from scanmt.cli.demo import training_precision
from scanmt.training.precision import cpu_bf16_speedup
print(training_precision("auto")[0], f"{cpu_bf16_speedup(1):.2f}")' | tail -n 1) || true
  case $measured in
    bf16\ *|fp32\ *) echo "${measured%% *}"
                      echo "grid-kftt: $1 trains in ${measured%% *} (bf16 measured at ${measured#* }x fp32's speed here)" >&2 ;;
    *) echo fp32; echo "grid-kftt: the bf16 probe gave no answer (${measured:-nothing}); $1 trains in fp32" >&2 ;;
  esac
}
LSTM=(experiments/kftt.yaml --preset configs/kftt-lstm.yaml --data kftt --out "$OUT" --workers "${GRID_WORKERS:-2}"
      --set "train.threads=${GRID_THREADS:-1}" "train.precision=${GRID_PRECISION:-fp32}")
# The Transformer pair: one worker on every CPU (GRID_TRANSFORMER_WORKERS, GRID_TRANSFORMER_THREADS), so that each run
# ends within one session of a machine that may not outlive it. Two workers of one thread would give more updates
# an hour, but on the AMD EPYC of the twenty-ninth session a bf16 update took 0.63 s at one thread and 0.39 s at
# two: a pair side by side needs 16,000 x 0.65 s = 2.9 h, and one run alone 1.7 h, which a new machine's 22 minutes
# of shared work leave room for (docs/kftt.md, "Twenty-ninth session"). A finished run is packed into the archive
# and outlives its machine; a half-trained one does not. On a processor without bf16 (the Zen 3 EPYC of the
# thirty-first session) a run alone takes 1.43 s per update in fp32, about 6.4 h: it finishes only on a machine
# that outlives several sessions.
CPUS=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)  # nproc alone counts OMP_NUM_THREADS=1, exported above
transformer() {
  local precision=${GRID_TRANSFORMER_PRECISION:-auto}
  [[ $precision == auto ]] && precision=$(precision_here "the Transformer pair")
  run experiments/kftt-transformer.yaml --preset configs/kftt-transformer.yaml --data kftt --out "$OUT" \
    --workers "${GRID_TRANSFORMER_WORKERS:-1}" --set "train.threads=${GRID_TRANSFORMER_THREADS:-$CPUS}" \
    "train.precision=$precision" "$@"
}
# Each LSTM invocation gives both workers a run. The machine was replaced before session 71 and took every finished run
# (the LSTM pair's seeds 1-2, the Transformer pair's seed 1) with it; their figures stay in docs/experiments-kftt.*.
run "${LSTM[@]}" --systems softmax csparsemax --seeds 3 --stress-k 1 2 3
# The epoch measurement (docs/kftt.md): seed 1 of both (on a new machine the lowest seed trained there, since
# restored runs have no checkpoints; with none, it says so in one line and skips) continued to 24,000 updates in
# copies ($OUT-longer); the grid goes on if it fails
GRID=$OUT PYTHON=$PYTHON bash scripts/continue-kftt.sh || echo "continue-kftt failed: see $OUT-longer/*.out"
transformer --seeds 3 --stress-k 1 2 3
# four systems at one seed: three trainings and softmax-covpenalty's decoding. Two workers would leave a core idle
# through the last training (about 5.5 h); three share the two cores (one thread each, 2/3 of a core per run) and
# end about 2.3 h sooner (3 x 5.5 + ~1 core-hours over 2 cores: ~8.8 h against ~11 h). Workers change no result.
# softmax-covpenalty decodes softmax's model of its seed, and a run restored from the archive keeps no checkpoint,
# so the seed is the lowest one whose softmax finished training on this machine (3 where seeds 1-2 were restored);
# with none, softmax-covpenalty is left out (it would need softmax trained again) and the others train at seed 1.
seed=
for dir in "$OUT"/runs/softmax/seed*/; do
  s=$(basename "$dir"); s=${s#seed}
  if [[ $s =~ ^[0-9]+$ && -f $dir/best.pt && -f $dir/.stages/train.done ]] && ((s < ${seed:-999})); then
    seed=$s
  fi
done
LAST=(--workers "${GRID_LAST_WORKERS:-3}")
if [[ -n $seed ]]; then
  run "${LSTM[@]}" --seeds "$seed" --first-seed "$seed" "${LAST[@]}"
else
  echo "grid-kftt: no softmax model finished training on this machine (restored runs keep no checkpoint):" \
    "softmax-covpenalty is left out; the other systems train at seed 1" >&2
  run "${LSTM[@]}" --seeds 1 --systems softmax-covvector sparsemax csoftmax "${LAST[@]}"
fi
