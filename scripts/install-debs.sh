#!/usr/bin/env bash
# The Debian packages scanmt uses where they are there (run by scripts/install.sh; needs root and apt-get):
#   wordnet-base    WordNet, for METEOR's synonyms (wired into nltk's data path by scanmt.metrics.wordnet_setup)
#   fonts-noto-cjk  a font with Japanese glyphs, for attention maps of Japanese sentences (scanmt.viz.cjk_font)
#
# Another apt-get or dpkg running at the same moment (unattended-upgrades, a second install) is waited for, up to
# APT_LOCK_WAIT seconds (default 600): `apt-get install` with -o DPkg::Lock::Timeout, and `apt-get update`, whose
# lock of the package lists that option does not cover in every apt, tried again every APT_RETRY_S seconds
# (default 5) while apt says it could not get a lock.  A package that still cannot be installed is named at the
# end, with apt's reason, what goes without it and the command that installs it; the exit status stays 0 (scanmt
# works without them).
set -uo pipefail
WAIT=${APT_LOCK_WAIT:-600}
RETRY=${APT_RETRY_S:-5}
missing=()

apt() {  # apt-get ARGS..., non-interactive, waiting for the dpkg lock
  DEBIAN_FRONTEND=noninteractive apt-get -y -qq -o DPkg::Lock::Timeout="$WAIT" "$@"
}

apt_update() {  # apt-get update, tried again while another apt-get holds a lock (up to WAIT seconds)
  local deadline=$((SECONDS + WAIT)) out
  while true; do
    out=$(apt update 2>&1) && return 0
    if ! grep -q "Could not get lock" <<<"$out" || [ "$SECONDS" -ge "$deadline" ]; then
      printf '%s\n' "$out"
      return 1
    fi
    sleep "$RETRY"
  done
}

need() {  # need PACKAGE WITHOUT: install the Debian PACKAGE unless it is there; WITHOUT says what goes without it
  local pkg=$1 without=$2 log
  dpkg -s "$pkg" >/dev/null 2>&1 && return 0
  if ! command -v apt-get >/dev/null 2>&1 || [ "$(id -u)" != 0 ]; then
    missing+=("$pkg is not installed (installing it needs root and apt-get): $without")
    return 0
  fi
  log=$(mktemp)
  if apt install "$pkg" >"$log" 2>&1 || { apt_update && apt install "$pkg"; } >"$log" 2>&1; then
    rm -f "$log"
    return 0
  fi
  missing+=("could not install $pkg ($(grep -v '^[[:space:]]*$' "$log" | tail -n 1)): $without; install it with: apt-get install $pkg")
  rm -f "$log"
}

need wordnet-base "METEOR will run without synonyms"
need fonts-noto-cjk "attention maps will draw Japanese labels as boxes"
for m in "${missing[@]}"; do
  echo "warning: $m" >&2
done
exit 0
