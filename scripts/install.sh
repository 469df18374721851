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
# WordNet for METEOR synonyms: Debian's wordnet-base, wired into nltk's data path.
if ! dpkg -s wordnet-base >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wordnet-base) >/dev/null 2>&1 \
      || echo "warning: could not install wordnet-base; METEOR will run without synonyms" >&2
  else
    echo "warning: wordnet-base not installed (needs root apt-get); METEOR will run without synonyms" >&2
  fi
fi
python -m scanmt.metrics.wordnet_setup || echo "warning: WordNet set-up failed; METEOR will run without synonyms" >&2
# A font with Japanese glyphs for attention maps of Japanese sentences (scanmt.viz.cjk_font): Debian's fonts-noto-cjk.
if ! dpkg -s fonts-noto-cjk >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=600 fonts-noto-cjk >/dev/null 2>&1 \
      || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=600 \
          fonts-noto-cjk) >/dev/null 2>&1 \
      || echo "warning: could not install fonts-noto-cjk; attention maps will draw Japanese labels as boxes" >&2
  else
    echo "warning: fonts-noto-cjk not installed (needs root apt-get); attention maps will draw Japanese labels as boxes" >&2
  fi
fi
echo "scanmt installed in $(pwd)/.venv"
