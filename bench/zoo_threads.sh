#!/usr/bin/env bash
# One process, `--threads 2` against one thread (issue 14, acceptance 6: >= 1.8x for resnet18 and vit):
# `ringtrain train` at batch 64, PRECISION (default fp32), RUNS runs of each thread count alternating (1, 2, 1, ...) so load
# changes on a shared machine hit both alike; the medians of the trainer's own "trained N steps ... samples/s"
# (the whole step: loader, forward, backward, optimizer; the first step included) and their ratio. Nothing
# is pinned: the two-thread run needs both cores. Each run holds $LOCK (flock), as zoo_bf16.sh's do. A PARTS line
# follows each RESULT: the medians of the trainer's "step time" parts (forward, backward with the gradient wait,
# optimizer; ms a step) at 1 and 2 threads and their ratios, which says which part keeps the ratio down.
#   bench/zoo_threads.sh [build-dir]    RUNS=5 MODELS="resnet18 mobilenet_v2 vit" STEPS=100 DATA=digits PRECISION=fp32
set -euo pipefail
source "$(dirname "$0")/lib.sh"  # BUILD, MODELS, DATA; median, train_rate
RUNS=${RUNS:-5}
STEPS=${STEPS:-100}
PRECISION=${PRECISION:-fp32}
LOCK=${LOCK:-/tmp/ringtrain-timing.lock}
PIN=(flock "$LOCK")
echo "== $(cpu_model), $(nproc) cores, $("$BUILD/ringtrain" --version | head -1), $PRECISION"
TRAIN_LOG=$(mktemp)
trap 'rm -f "$TRAIN_LOG"' EXIT
export TRAIN_LOG
PARTS="forward backward optimizer"
for m in $MODELS; do
  declare -A got=([1]="" [2]="")
  declare -A part=()
  for i in $(seq "$RUNS"); do
    for t in 1 2; do
      got[$t]+="$(train_rate "$m" --threads "$t" --precision "$PRECISION") "
      for p in $PARTS; do part[$p$t]+="$(step_part "$p" "$TRAIN_LOG") "; done
    done
  done
  one=$(printf '%s\n' ${got[1]} | median); two=$(printf '%s\n' ${got[2]} | median)
  printf 'RESULT %-13s 1 thread %7.1f samples/s   2 threads %7.1f samples/s   2/1 %.2fx   (runs: 1 thread %s; 2 threads %s; load %s)\n' \
    "$m" "$one" "$two" "$(echo "$two / $one" | bc -l)" "${got[1]}" "${got[2]}" "$(cut -d' ' -f1 /proc/loadavg)"
  printf 'PARTS  %-13s' "$m"
  for p in $PARTS; do
    a=$(printf '%s\n' ${part[${p}1]} | median); b=$(printf '%s\n' ${part[${p}2]} | median)
    printf ' %s %.2f -> %.2f ms (%.2fx)' "$p" "$a" "$b" "$(echo "$a / $b" | bc -l)"
  done
  printf '\n'
done
