#!/usr/bin/env bash
# All-reduce time by algorithm (ring, hd, rd, hier, mpi, auto), 4 KiB .. 64 MiB (docs/BENCHMARKS.md, "Data parallelism").
#   bench/allreduce.sh [NP=2] [extra bench_allreduce options, e.g. --repeats 41 --segment-kb 128 --step 2]
# More ranks than cores run oversubscribed and unbound (correct, but every rank shares a core).
# Builds bench_allreduce in build-dist/ (BUILD_DIR to change) and runs it under mpirun with NP ranks.
set -euo pipefail
cd "$(dirname "$0")/.."
NP=${1:-2}; shift || true
BUILD_DIR=${BUILD_DIR:-build-dist}
[[ -f $BUILD_DIR/build.ninja ]] || cmake -S . -B "$BUILD_DIR" -G Ninja >/dev/null
ninja -C "$BUILD_DIR" bench_allreduce >/dev/null
extra=()
if [[ $(id -u) == 0 ]]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
if (( NP > $(nproc) )); then extra+=(--oversubscribe --bind-to none); else extra+=(--bind-to core); fi
echo "# $(date -u +%FT%TZ) $(hostname) $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# command: bench/allreduce.sh $NP $*"
mpirun -np "$NP" "${extra[@]}" "$BUILD_DIR/bench/bench_allreduce" "$@"
