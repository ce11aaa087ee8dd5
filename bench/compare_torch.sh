#!/usr/bin/env bash
# ringtrain vs Debian's PyTorch 1.13, side by side: LeNet-5, Adam (lr 1e-3), softmax cross-entropy, the
# same data for both (the first 8 batches of Fashion-MNIST's training set from Debian's
# dataset-fashion-mnist when installed, else noise), one thread each, batch 64 and 256; 5 alternating
# runs of each side (ringtrain, torch, ringtrain, torch, ...), then the medians and their ratio.
#
#   bench/compare_torch.sh [build-dir]          (default build-dir: build; needs bench_train_step built)
#   RUNS=5 BATCHES="64 256" THREADS=1 DATA=/usr/share/datasets/fashion-mnist bench/compare_torch.sh build
#
# Torch runs under /usr/bin/python3 (Debian's, with python3-torch) and must load OpenBLAS, not the
# netlib reference BLAS: the script prints the libblas.so.3 alternative and the library torch mapped.
# Both sides are pinned to the same core (taskset) when taskset exists, so they see the same machine.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
RUNS=${RUNS:-5}
BATCHES=${BATCHES:-64 256}
THREADS=${THREADS:-1}
DATA=${DATA:-/usr/share/datasets/fashion-mnist}
DATA_ARGS=()
if [ -e "$DATA/train-images-idx3-ubyte.gz" ] || [ -e "$DATA/train-images-idx3-ubyte" ]; then DATA_ARGS=(--data "$DATA"); fi
BIN="$BUILD/bench/bench_train_step"
PY=/usr/bin/python3
[ -x "$BIN" ] || { echo "compare_torch: $BIN not built (cmake --build $BUILD --target bench_train_step)" >&2; exit 1; }
"$PY" -c 'import torch' 2>/dev/null || { echo "compare_torch: $PY has no torch (apt-get install python3-torch)" >&2; exit 1; }

echo "== BLAS behind Debian's torch (libblas.so.3 alternative)"
update-alternatives --display libblas.so.3-x86_64-linux-gnu 2>/dev/null | sed -n '1,3p' || true
if ! update-alternatives --query libblas.so.3-x86_64-linux-gnu 2>/dev/null | grep -q '^Value: .*openblas'; then
  echo "compare_torch: WARNING: libblas.so.3 is not OpenBLAS; torch will use the slow reference BLAS." >&2
  echo "  fix: sudo update-alternatives --set libblas.so.3-x86_64-linux-gnu /usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3" >&2
fi
PIN=()
if command -v taskset >/dev/null && [ "$THREADS" -eq 1 ]; then PIN=(taskset -c "$(( $(nproc --all) - 1 ))"); fi
export OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS
echo "== data: ${DATA_ARGS[1]:-noise (no IDX files in $DATA)}"
echo "== machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc --all) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"

median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

for B in $BATCHES; do
  echo "== batch $B, $THREADS thread(s), $RUNS alternating runs"
  rt=(); pt=(); rc=(); pc=()
  for i in $(seq "$RUNS"); do
    out=$("${PIN[@]}" "$BIN" --batch "$B" --threads "$THREADS" --repeats 1 "${DATA_ARGS[@]}"); echo "$out" >&2
    rt+=("$(echo "$out" | sed -n 's/.*: \([0-9]*\) samples\/s.*/\1/p' | head -1)")
    rc+=("$(echo "$out" | sed -n 's/.*per CPU-second: \([0-9]*\) samples\/s.*/\1/p' | head -1)")
    out=$("${PIN[@]}" "$PY" bench/torch_lenet.py --batch "$B" --threads "$THREADS" --repeats 1 "${DATA_ARGS[@]}"); echo "$out" >&2
    pt+=("$(echo "$out" | sed -n 's/.*: \([0-9]*\) samples\/s.*/\1/p' | head -1)")
    pc+=("$(echo "$out" | sed -n 's/.*per CPU-second: \([0-9]*\) samples\/s.*/\1/p' | head -1)")
  done
  rm=$(printf '%s\n' "${rt[@]}" | median); pm=$(printf '%s\n' "${pt[@]}" | median)
  rcm=$(printf '%s\n' "${rc[@]}" | median); pcm=$(printf '%s\n' "${pc[@]}" | median)
  printf 'RESULT batch %-4s ringtrain %8.0f samples/s   torch %8.0f samples/s   ratio %.2fx   (runs: ringtrain %s; torch %s)\n' \
    "$B" "$rm" "$pm" "$(echo "$rm / $pm" | bc -l)" "${rt[*]}" "${pt[*]}"
  printf '       per CPU-second: ringtrain %8.0f   torch %8.0f   ratio %.2fx   (what each side does while it has the core; equal on a quiet machine)\n' \
    "$rcm" "$pcm" "$(echo "$rcm / $pcm" | bc -l)"
done
