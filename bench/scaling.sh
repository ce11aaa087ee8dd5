#!/usr/bin/env bash
# Data-parallel scaling and accuracy of `ringtrain train` on this machine (docs/BENCHMARKS.md, "Data parallelism").
#   bench/scaling.sh [RUNS=5] [extra ringtrain train options]
# 1. Throughput: 1 rank x 1 core vs 2 ranks x 1 core (mpirun --bind-to core, so each rank and its loader
#    thread share one core), same per-rank batch 64, same kernels, default digits, interleaved runs;
#    median global samples/s of RUNS runs each and the speed-up (acceptance: >= 1.85x).
# 2. Overlap: the step's wait for gradients after backward, overlap on vs --no-overlap (2 ranks).
# 3. Accuracy: 2 ranks x batch 32 vs 1 rank x batch 64 after the default 10 epochs (acceptance: within 0.5 points).
# Needs `ringtrain data prepare` first. BUILD_DIR (default build) holds the ringtrain binary.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-5}; shift || true
BUILD_DIR=${BUILD_DIR:-build}
RT=$BUILD_DIR/ringtrain
[[ -x $RT ]] || { echo "scaling.sh: $RT not found (build first, or set BUILD_DIR)"; exit 1; }
if [[ $(id -u) == 0 ]]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
EPOCHS=${EPOCHS:-10}
echo "# $(date -u +%FT%TZ) $(hostname) $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# command: bench/scaling.sh $RUNS $*   (EPOCHS=$EPOCHS for throughput)"

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
run() {  # np, args... -> prints the trainer's final lines
  local np=$1; shift
  mpirun -np "$np" --bind-to core "$RT" train --log-every 0 "$@" 2>&1
}
rate() { grep -Eo '\(([0-9.]+) samples/s' | grep -Eo '[0-9.]+' | head -1; }
wait_ms() { grep -Eo 'gradient wait [0-9.]+ ms/step' | grep -Eo '[0-9.]+' | head -1; }

declare -a r1 r2 w_on w_off
for ((i = 0; i < RUNS; i++)); do
  r1+=("$(run 1 --epochs "$EPOCHS" --batch-size 64 "$@" | rate)")
  out=$(run 2 --epochs "$EPOCHS" --batch-size 64 "$@")
  r2+=("$(rate <<<"$out")"); w_on+=("$(wait_ms <<<"$out")")
  w_off+=("$(run 2 --epochs "$EPOCHS" --batch-size 64 --no-overlap "$@" | wait_ms)")
done
m1=$(printf '%s\n' "${r1[@]}" | median); m2=$(printf '%s\n' "${r2[@]}" | median)
echo
echo "| ranks x cores | batch / rank | samples/s (median of $RUNS) | all runs | speed-up |"
echo "|---|---:|---:|---|---:|"
echo "| 1 x 1 | 64 | $m1 | ${r1[*]} | 1.00 |"
echo "| 2 x 1 | 64 | $m2 | ${r2[*]} | $(echo "scale=2; $m2 / $m1" | bc) |"
echo
echo "| 2 ranks, batch 64 | wait for gradients after backward (ms/step, median of $RUNS) | all runs |"
echo "|---|---:|---|"
echo "| overlap on | $(printf '%s\n' "${w_on[@]}" | median) | ${w_on[*]} |"
echo "| --no-overlap | $(printf '%s\n' "${w_off[@]}" | median) | ${w_off[*]} |"
echo
a1=$(run 1 --batch-size 64 "$@" | grep -Eo 'test accuracy: [0-9.]+' | grep -Eo '[0-9.]+$')
a2=$(run 2 --batch-size 32 "$@" | grep -Eo 'test accuracy: [0-9.]+' | grep -Eo '[0-9.]+$')
echo "| run (10 epochs, default digits) | test accuracy (%) |"
echo "|---|---:|"
echo "| 1 rank x batch 64 | $a1 |"
echo "| 2 ranks x batch 32 | $a2 |"
echo "| difference (points) | $(echo "scale=2; $a2 - $a1" | bc) |"
