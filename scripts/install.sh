#!/usr/bin/env bash
# Creates .venv and installs scanmt into it (CPU torch pinned so no CUDA wheels are pulled).
#   bash scripts/install.sh          # the package
#   bash scripts/install.sh --test   # plus test dependencies
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip >/dev/null
# torch first and pinned: a loose requirement would pull several GB of CUDA wheels
python -m pip install -q "torch==2.13.0"
if [ "${1:-}" = "--test" ]; then
  python -m pip install -q -e ".[test]"
else
  python -m pip install -q -e .
fi
# Debian's wordnet-base (METEOR's synonyms) and fonts-noto-cjk (Japanese labels in attention maps), waiting for
# another apt-get or dpkg to finish; what could not be installed is named, with its consequence
bash scripts/install-debs.sh
python -m scanmt.metrics.wordnet_setup || echo "warning: WordNet set-up failed; METEOR will run without synonyms" >&2
echo "scanmt installed in $(pwd)/.venv"
