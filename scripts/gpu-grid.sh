#!/usr/bin/env bash
# Finish an experiment grid (`scanmt experiment run`) on a lent GPU machine, where the grid folder sits at
# the same absolute path as on the machine that started it, so that every recorded path still holds.
#
# The GPU machine has no internet; what it needs travels in .gpu/ (ignored by git, see .git/info/exclude):
#   .gpu/*.tar.gz   archives of absolute paths (tar -C / czf ...): the prepared data, the grid folder
#                   (grids/, shared/, finished runs without *.pt), the fertility predictor; wordnet.tar.gz
#                   holds nltk_data/ (METEOR's WordNet)
#   .gpu/whl        wheels of the pure-Python packages its image lacks (sacremoses, nltk, entmax)
#   .gpu/src        eflomal's source distribution (no wheel for its Python; built there with its compiler)
#
# Usage, from the repository root on the GPU machine:
#   bash scripts/gpu-grid.sh setup                        install into /tmp/site, unpack the archives
#   bash scripts/gpu-grid.sh start LOG ARGS...            `python3 -m scanmt ARGS...` in the background
#                                                         (setsid: it outlives the command), output to LOG
#   bash scripts/gpu-grid.sh status LOG RUNS              the grid's last lines, and each unfinished run's
#                                                         last epoch line (RUNS: the grid's runs/ folder)
#   bash scripts/gpu-grid.sh stop PATTERN                 SIGTERM (which saves last.pt) to the run workers whose
#                                                         run folder matches PATTERN (e.g. 'csoftmax/seed'), and
#                                                         to nothing else: not the grid's own process, whose
#                                                         open files name every run's log
#   bash scripts/gpu-grid.sh pack RUNS OUT                every finished run (DONE) not packed before, as
#                                                         15 MB pieces of one tar.gz in OUT (no checkpoints)
# Unpack here with: cat OUT/runs-*.part-* | tar -C / -xzf -
set -u
ROOT=$PWD
export PYTHONPATH=/tmp/site:$ROOT/src PYTHONUNBUFFERED=1 NLTK_DATA=/tmp/nltk_data

case ${1:-} in
  setup)
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .gpu/whl/*.whl || exit 1
    for s in .gpu/src/*.tar.gz; do
      python3 -m pip install -q --no-index --no-deps --no-build-isolation --upgrade --target /tmp/site "$s" || exit 1
    done
    tar -C /tmp -xzf .gpu/wordnet.tar.gz || exit 1
    for a in .gpu/*.tar.gz; do
      [[ $a == .gpu/wordnet.tar.gz ]] || tar -C / -xzf "$a" || exit 1
    done
    nvidia-smi -L
    python3 -c "import torch, scanmt, eflomal, nltk; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
    ;;
  start)
    log=${2:?start needs a log file}; shift 2
    setsid python3 -m scanmt "$@" > "$log" 2>&1 < /dev/null &
    echo "started (pid $!): python3 -m scanmt $*"
    ;;
  status)
    log=${2:?status needs the log}; runs=${3:?status needs the runs folder}
    tr '\r' '\n' < "$log" | grep -a -v '^\s*$' | tail -n 12
    shopt -s nullglob
    for d in "$runs"/*/seed*/; do
      [[ -f $d/DONE ]] && continue
      [[ -f $d/log.txt ]] || continue
      # the last epoch's line (a resumed run logs its "=== train: resuming" after it), else the last step
      line=$(tr '\r' '\n' < "$d/log.txt" | grep -a 'end of epoch' | tail -n 1)
      [[ -n $line ]] || line=$(tr '\r' '\n' < "$d/log.txt" | grep -a '===' | tail -n 1)
      printf '%-28s %s\n' "${d#$runs/}" "$(cut -c1-120 <<< "$line")"
    done
    ;;
  stop)
    pat=${2:?stop needs a pattern}
    # a worker's command line is `python3 -m scanmt.experiments.runner RUN_DIR ...`
    pkill -TERM -f -e "scanmt\.experiments\.runner .*${pat}" || echo "no run worker matches $pat"
    ;;
  pack)
    runs=${2:?pack needs the runs folder}; out=${3:?pack needs a folder}
    mkdir -p "$out"
    shopt -s nullglob
    todo=()
    for d in "$runs"/*/seed*/; do
      d=${d%/}
      [[ -f $d/DONE && ! -f $d/.packed ]] && todo+=("${d#/}")
    done
    (( ${#todo[@]} )) || { echo "nothing new to pack"; exit 0; }
    stamp=$(date -u +%H%M%S)
    tar -C / -czf - --exclude='*.pt' --exclude='.lock' "${todo[@]}" | split -b 15M -d - "$out/runs-$stamp.tar.gz.part-"
    for d in "${todo[@]}"; do touch "/$d/.packed"; echo "packed /$d"; done
    ls -la "$out"
    ;;
  *) sed -n 2,20p "$0"; exit 2 ;;
esac
