#!/usr/bin/env bash
# Open MPI shared-memory settings for the gradient all-reduce (docs/BENCHMARKS.md, "Data parallelism"):
# 2-rank training with MpiSession's defaults (copy-in/copy-out, 128 KiB eager fragments) against the same
# with Open MPI's single copy (CMA) put back, interleaved with 1-rank runs; then the all-reduce table
# under both.   bench/transport.sh [RUNS=5]     BUILD_DIR (default build) holds ringtrain and bench/.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-5}
BUILD_DIR=${BUILD_DIR:-build}
RT=$BUILD_DIR/ringtrain
[[ -x $RT && -x $BUILD_DIR/bench/bench_allreduce ]] || { echo "transport.sh: build $RT and bench_allreduce first"; exit 1; }
if [[ $(id -u) == 0 ]]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
echo "# $(date -u +%FT%TZ) $(hostname) $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg)"
rate() { grep -Eo '\(([0-9.]+) samples/s' | grep -Eo '[0-9.]+' | head -1; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
declare -a one copy cma
for ((i = 0; i < RUNS; i++)); do
  one+=("$(mpirun -np 1 --bind-to core "$RT" train --log-every 0 2>&1 | rate)")
  copy+=("$(mpirun -np 2 --bind-to core "$RT" train --log-every 0 2>&1 | rate)")
  cma+=("$(OMPI_MCA_btl_vader_single_copy_mechanism=cma mpirun -np 2 --bind-to core "$RT" train --log-every 0 2>&1 | rate)")
done
m1=$(printf '%s\n' "${one[@]}" | median)
echo "| setting | samples/s (median of $RUNS) | all runs | x 1 rank |"
echo "|---|---:|---|---:|"
echo "| 1 rank | $m1 | ${one[*]} | 1.00 |"
for name in copy cma; do
  declare -n runs=$name
  m=$(printf '%s\n' "${runs[@]}" | median)
  echo "| 2 ranks, $([[ $name == copy ]] && echo "copy-in/copy-out (default)" || echo "single copy (CMA)") | $m | ${runs[*]} | $(echo "scale=2; $m / $m1" | bc) |"
done
echo
echo "copy-in/copy-out (default):"; mpirun -np 2 --bind-to core "$BUILD_DIR/bench/bench_allreduce" --repeats 21 | grep '^|'
echo "single copy (CMA):"; OMPI_MCA_btl_vader_single_copy_mechanism=cma mpirun -np 2 --bind-to core "$BUILD_DIR/bench/bench_allreduce" --repeats 21 | grep '^|'
