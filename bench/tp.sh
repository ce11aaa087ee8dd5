#!/usr/bin/env bash
# Tensor parallelism on this machine (docs/BENCHMARKS.md, "Tensor parallelism"), one command:
#   bench/tp.sh [BLOCKS=7] [extra ringtrain train options for the accuracy runs]
# 1. Step time on 2 ranks, tp=1 (dp 2) vs tp=2 (dp 1), and the all-reduce bytes each rank moves per step
#    (bench_tp: LeNet-5 steps on synthetic data, fast kernels, batch 64 per data-parallel rank, grids
#    interleaved in blocks, medians).
# 2. Memory: the trainer's report with --tp 4 (4 ranks, oversubscribed; one step).
# 3. Accuracy on the default digits: one process vs mpirun -np 2 --tp 2 (dp 1: the same global batch 64
#    and the same samples each step), 10 epochs (acceptance: within 0.5 points).
# Needs `ringtrain data prepare` first. BUILD_DIR (default build) holds ringtrain and bench/bench_tp.
set -euo pipefail
cd "$(dirname "$0")/.."
BLOCKS=${1:-7}; shift || true
BUILD_DIR=${BUILD_DIR:-build}
RT=$BUILD_DIR/ringtrain
BENCH=$BUILD_DIR/bench/bench_tp
for f in "$RT" "$BENCH"; do [[ -x $f ]] || { echo "tp.sh: $f not found (build first, or set BUILD_DIR)"; exit 1; }; done
if [[ $(id -u) == 0 ]]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
echo "# $(date -u +%FT%TZ) $(hostname) $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# command: bench/tp.sh $BLOCKS $*"
echo
echo "## step time and all-reduce bytes (mpirun -np 2 --bind-to core $BENCH --blocks $BLOCKS --tp 1,2)"
mpirun -np 2 --bind-to core "$BENCH" --blocks "$BLOCKS" --tp 1,2
echo
echo "## memory with --tp 4 (mpirun -np 4 --oversubscribe $RT train --tp 4 --max-steps 1 --epochs 1)"
mpirun -np 4 --oversubscribe "$RT" train --tp 4 --max-steps 1 --epochs 1 --log-every 0 2>&1 | sed -n '/^memory/,/fully connected/p'
echo
acc() { grep -Eo 'test accuracy: [0-9.]+' | grep -Eo '[0-9.]+$'; }
a1=$("$RT" train --batch-size 64 --log-every 0 "$@" 2>&1 | acc)
a2=$(mpirun -np 2 --bind-to core "$RT" train --tp 2 --batch-size 64 --log-every 0 "$@" 2>&1 | acc)
echo "| run (10 epochs, default digits, batch 64) | test accuracy (%) |"
echo "|---|---:|"
echo "| 1 process | $a1 |"
echo "| 2 ranks, dp 1 x tp 2 | $a2 |"
echo "| difference (points) | $(echo "scale=2; $a2 - $a1" | bc) |"
