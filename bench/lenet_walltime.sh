#!/usr/bin/env bash
# LeNet-5 data-parallel speed-up in wall time (issue 16, acceptance 2): the whole `ringtrain train` command,
# start to exit (start-up, EPOCHS epochs of Fashion-MNIST, the evaluation after each epoch), 1 rank vs 2
# ranks, the same per-rank batch (so 2 ranks take half the steps an epoch), mpirun --bind-to core, runs
# alternating; prints every run and the medians.
#   bench/lenet_walltime.sh [RUNS=5] [extra ringtrain train options]      EPOCHS=3 BATCH=64 BUILD_DIR=build
# Needs Fashion-MNIST (`scripts/setup.sh --dev` installs Debian's dataset-fashion-mnist).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-5}; shift || true
RT=${BUILD_DIR:-build}/ringtrain
EPOCHS=${EPOCHS:-3} BATCH=${BATCH:-64}
[[ -x $RT ]] || { echo "lenet_walltime.sh: $RT not found (build first, or set BUILD_DIR)"; exit 1; }
if [[ $(id -u) == 0 ]]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
echo "# $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# command: EPOCHS=$EPOCHS BATCH=$BATCH bench/lenet_walltime.sh $RUNS $*"
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
run() {  # np -> "seconds accuracy"
  local np=$1 t0 t1 out
  t0=$(date +%s.%N)
  out=$(mpirun -np "$np" --bind-to core "$RT" train --model lenet5 --data fashion --epochs "$EPOCHS" \
        --batch-size "$BATCH" --log-every 0 "${extra[@]}" 2>&1) || { echo "run failed: $out" >&2; exit 1; }
  t1=$(date +%s.%N)
  echo "$(echo "$t1 - $t0" | bc -l) $(grep -Eo 'test accuracy [0-9.]+%' <<<"$out" | tail -1 | grep -Eo '[0-9.]+')"
}
extra=("$@")
t1s=() t2s=()
for ((i = 0; i < RUNS; i++)); do
  read -r a acc1 <<<"$(run 1)"; t1s+=("$a")
  read -r b acc2 <<<"$(run 2)"; t2s+=("$b")
  printf '# run %d: 1 rank %.2f s (%s%%), 2 ranks %.2f s (%s%%)\n' "$i" "$a" "$acc1" "$b" "$acc2"
done
m1=$(printf '%s\n' "${t1s[@]}" | median) m2=$(printf '%s\n' "${t2s[@]}" | median)
printf '1 rank: %.2f s, 2 ranks: %.2f s (medians of %d); 2 ranks / 1 rank speed-up in wall time: %.3fx\n' \
  "$m1" "$m2" "$RUNS" "$(echo "$m1 / $m2" | bc -l)"
