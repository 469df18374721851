#!/usr/bin/env bash
# The GPU checks of issue 55 in one device call (about 6 minutes on an H200):
#   1. the CUDA tests of the recurrence, the deferred checks and the models (triton against torch on the GPU);
#   2. benchmarks/gpu_bounded.py: the op, the Transformer and LSTM updates, and the profile of one update.
# Writes tests.txt and bench.md under $OUT (or /tmp/gpu-check); run from the repository root:
#   OUT=/tmp/gpu-check bash scripts/gpu-check.sh
set -u
OUT=${OUT:-/tmp/gpu-check}
mkdir -p "$OUT"
export PYTHONPATH=$PWD/src
PY=${PYTHON:-python3}
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  $PY -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } | tee "$OUT/gpu.txt"
t0=$(date +%s)
timeout "${TEST_TIMEOUT:-240}" $PY -m pytest -q -p no:cacheprovider -rfE tests/ops/test_recurrence_cuda.py \
  tests/ops/test_deferred.py tests/model/test_cuda.py 2>&1 | grep -v USDT | tail -40 > "$OUT/tests.txt"
echo "tests: $(( $(date +%s) - t0 )) s" >> "$OUT/tests.txt"
tail -8 "$OUT/tests.txt"
timeout "${BENCH_TIMEOUT:-300}" $PY benchmarks/gpu_bounded.py "$@" 2>&1 | grep -v USDT > "$OUT/bench.md"
cat "$OUT/bench.md"
