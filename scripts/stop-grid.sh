#!/usr/bin/env bash
# Stop a grid and the queue script that runs it (scripts/grid-kftt.sh, ...) so that nothing is lost. The grid
# process (`scanmt experiment run`) is the one named by GRID/.lock. First the queue's shells are stopped: its
# ancestors that run a .sh script, their forked subshells (the packer) and the packers' sleeps, so that no next step
# starts. Then the grid process gets SIGTERM, which it passes to its run workers; each saves last.pt at its
# current update, and the grid exits once they have. Each unfinished run's checkpoint is then listed. A queue
# restarted later resumes every run from there (a killed run would resume from its last periodic checkpoint).
#   bash scripts/stop-grid.sh /work/runs/kftt
#   bash scripts/stop-grid.sh /work/runs/kftt 'scripts/grid-kftt.sh'   # also stop shells whose command line
#                                                                      # matches, for a queue between two steps
# With QUEUE_PATTERN, a scanmt process that the queue starts outside any grid (continue-kftt.sh's `scanmt train`,
# which holds no GRID/.lock) is stopped too: the script shells between it and the queue first, then SIGTERM to it
# (a trainer saves last.pt the same way), and the script waits for it.
# grid-kftt.sh packs its finished runs into archive/kftt on its own exit; by hand:
#   .venv/bin/scanmt experiment archive /work/runs/kftt --to archive/kftt
set -u
grid=${1:?usage: stop-grid.sh GRID_DIR [QUEUE_PATTERN]}
pattern=${2:-}
[[ -d $grid/grids ]] || { echo "stop-grid: $grid is not a grid folder (it has no grids/)" >&2; exit 2; }

cmdline() { tr '\0' ' ' 2>/dev/null < "/proc/$1/cmdline"; }  # 2> first: it also hides the < of a process gone
parent() { awk '/^PPid:/ {print $2}' "/proc/$1/status" 2>/dev/null; }
is_script_shell() { [[ $(cmdline "$1") =~ ^(/[^ ]*/)?bash\ [^-].*\.sh ]]; }

is_scanmt() { [[ " $(cmdline "$1")" =~ \ (-m\ scanmt|[^ ]*/scanmt)\  ]]; }
descendants() { local p; for p in $(pgrep -P "$1"); do echo "$p"; descendants "$p"; done; }

# a queue's shell, its forked subshells with the same command line (a packer loop) and their sleeps
stop_shell() {
  local top=$1 line kids=() p
  line=$(cmdline "$top")
  for p in $(pgrep -P "$top"); do
    [[ $(cmdline "$p") == "$line" ]] && kids+=("$p" $(pgrep -P "$p" -x sleep))
  done
  echo "stop-grid: stopping the queue shell $top ($line)${kids[*]:+ and its subshells ${kids[*]}}"
  kill -TERM "$top" "${kids[@]}" 2>/dev/null
}

pid=$(head -n 1 "$grid/.lock" 2>/dev/null || true)
if [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && [[ $(cmdline "$pid") == *experiment* ]]; then
  p=$(parent "$pid")
  while [[ -n $p && $p -gt 1 ]]; do
    is_script_shell "$p" && stop_shell "$p"
    p=$(parent "$p")
  done
  echo "stop-grid: SIGTERM to the grid process $pid; waiting for its runs to save their checkpoints"
  kill -TERM "$pid"
  for _ in $(seq 1 600); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  if kill -0 "$pid" 2>/dev/null; then
    echo "stop-grid: the grid process $pid is still running after 10 minutes; look at it before killing it" >&2
    exit 1
  fi
else
  echo "stop-grid: no grid process holds $grid/.lock"
fi
if [[ -n $pattern ]]; then
  inner=() scanmt=()
  for p in $(pgrep -f -- "$pattern"); do
    [[ $p != "$$" && $(cmdline "$p") != *stop-grid* ]] && is_script_shell "$p" && kill -0 "$p" 2>/dev/null || continue
    # what the queue runs outside a grid, found before its shell goes: a script it runs (not one of its own
    # subshells, which stop_shell stops) and the scanmt processes under it
    for d in $(descendants "$p"); do
      if is_scanmt "$d"; then
        scanmt+=("$d")
      elif is_script_shell "$d" && [[ $(cmdline "$d") != "$(cmdline "$(parent "$d")")" ]]; then
        inner+=("$d")
      fi
    done
    stop_shell "$p"
  done
  for p in "${inner[@]}"; do kill -0 "$p" 2>/dev/null && stop_shell "$p"; done
  for p in "${scanmt[@]}"; do
    kill -0 "$p" 2>/dev/null || continue
    echo "stop-grid: SIGTERM to $p ($(cmdline "$p")); waiting for it to save"
    kill -TERM "$p"
  done
  for p in "${scanmt[@]}"; do
    for _ in $(seq 1 600); do kill -0 "$p" 2>/dev/null || break; sleep 1; done
    if kill -0 "$p" 2>/dev/null; then
      echo "stop-grid: $p is still running after 10 minutes; look at it before killing it" >&2
      exit 1
    fi
  done
fi

# what each unfinished run saved
shopt -s nullglob
for run in "$grid"/runs/*/seed*/; do
  [[ -f $run/DONE ]] && continue
  name=${run#"$grid"/runs/}
  [[ -f $run/last.pt ]] || { echo "  ${name%/}: no checkpoint"; continue; }
  # the training loop's last word on SIGTERM: "interrupted (SIGTERM) at step N: saved ..."
  step=$(tr '\r' '\n' < "$run/log.txt" 2>/dev/null | grep -a -o "interrupted ([A-Z]*) at step [0-9]*" | tail -n 1)
  echo "  ${name%/}: last.pt written $(date -u -r "$run/last.pt" +%H:%M:%SZ)${step:+, last interruption logged at step ${step##* }}"
done
