#!/usr/bin/env bash
# The issue-14 grid (docs/results.md, section 6), resumable: rerun this script to continue it (finished runs
# are skipped, a killed run resumes from its last checkpoint). Table 1 and Table 2 share one --out
# (csparsemax is the same system in both). Everything lives in GRID_ROOT (default: ../grid, beside the
# checkout, so that a fresh checkout of the repository does not delete it).
#   bash scripts/grid-issue14.sh > ../grid/grid.log 2>&1
# To keep the grid's code fixed while the checkout changes, run it from a worktree of one commit:
#   git worktree add ../grid-code HEAD && ln -s "$PWD/.venv" ../grid-code/.venv
#   (cd ../grid-code && PYTHONPATH=$PWD/src nohup bash scripts/grid-issue14.sh >> ../grid/grid.log 2>&1 &)
# Reports: scanmt experiment report ../grid/table1 --grid table1 --out docs/     (and --grid table2;
#          ../grid/table1-fr-en with --name experiments-fr-en)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=${GRID_ROOT:-../grid}
DATA=$ROOT/data/multi30k-de-en
mkdir -p "$ROOT/data"
[ -f "$DATA/meta.json" ] || .venv/bin/scanmt prepare --corpus multi30k --pair de-en --out "$DATA"
S=".venv/bin/scanmt experiment run"
COMMON=(--preset cpu-small --seeds 3 --workers 2 --set train.precision=bf16)
# First the four systems of the issue's bars (3 seeds each), so that the bars are measured as early as
# possible; then Table 2, whose fertility bounds (constant 2 and 3, guided, predicted with c = 0) test why
# the bar systems' repetitions did not fall (results.md, section 6); then the rest of Table 1 (finished
# runs are skipped).
$S experiments/table1.yaml --systems softmax sparsemax csoftmax csparsemax --data "$DATA" "${COMMON[@]}" \
    --out "$ROOT/table1"
$S experiments/table2.yaml --data "$DATA" "${COMMON[@]}" --out "$ROOT/table1"
$S experiments/table1.yaml --data "$DATA" "${COMMON[@]}" --out "$ROOT/table1"
$S experiments/table1.yaml --systems softmax sparsemax csparsemax --data multi30k --pair fr-en \
    --mirror ../shared/data/multi30k "${COMMON[@]}" --out "$ROOT/table1-fr-en"
# Fr->En decoded again once its 9 runs are trained: the worktree's code (d3c6264) had no minimum output length, and
# beam search returned empty translations of some long sentences (decode.min_len, docs/results.md section 6); the
# redecode also scores DROP over 3 alignments. Run it from code that has decode.min_len (00bd4e0 or later), after
# the frozen worktree has finished training Fr->En (an untrained run would train with this code). Once only.
FREN_DONE=$(ls "$ROOT"/table1-fr-en/runs/*/seed*/.stages/train.done 2>/dev/null | wc -l)
if [ "$FREN_DONE" -eq 9 ] && [ ! -f "$ROOT/table1-fr-en/.redecoded-min-len" ] \
        && grep -q "min_len" src/scanmt/decoding/search.py; then
    $S experiments/table1.yaml --systems softmax sparsemax csparsemax --data multi30k --pair fr-en \
        --mirror ../shared/data/multi30k "${COMMON[@]}" --out "$ROOT/table1-fr-en" --redecode
    date > "$ROOT/table1-fr-en/.redecoded-min-len"
fi
# Then the recipe ablation (experiments/recipe-ablation.yaml): which part of the paper's recipe lets csparsemax
# cut repetitions at the paper's size but not at cpu-small's. One seed first; its softmax and csparsemax are
# Table 1's runs, reused.
$S experiments/recipe-ablation.yaml --data "$DATA" --preset cpu-small --seeds 1 --workers 2 \
    --set train.precision=bf16 --out "$ROOT/table1"
