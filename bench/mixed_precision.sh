#!/usr/bin/env bash
# Mixed-precision figures (issue 6, docs/BENCHMARKS.md "Mixed precision"), one command each:
#
#   bench/mixed_precision.sh speed    [build-dir]   fp32 vs bf16 vs fp16 training samples/s, LeNet-5, batch 256,
#                                                   one thread pinned to one core, RUNS alternating runs, medians
#   bench/mixed_precision.sh accuracy [build-dir]   test accuracy after EPOCHS epochs (batch 64, Adam 1e-3, seed 0)
#                                                   in fp32, bf16, fp16 on DATASETS (default: digits fashion)
#   bench/mixed_precision.sh gradcomm [build-dir]   2 ranks x batch 32: --grad-comm fp32 vs bf16 (and fp16), the
#                                                   all-reduce bytes each rank sends a step, and test accuracy
#
# Environment: RUNS=5 BATCH=256 DATA=/usr/share/datasets/fashion-mnist (speed; noise when absent),
# EPOCHS=10 DATASETS="digits fashion" SEEDS=0 (accuracy, gradcomm; several seeds print each and the mean). `build/ringtrain data prepare` makes data/digits.
set -euo pipefail
MODE=${1:-}
BUILD=${2:-build}
case "$MODE" in speed|accuracy|gradcomm) ;; *) sed -n 2,14p "$0" >&2; exit 2 ;; esac
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1} OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

if [ "$MODE" = speed ]; then
  BIN="$BUILD/bench/bench_train_step"
  [ -x "$BIN" ] || { echo "mixed_precision: $BIN not built (cmake --build $BUILD --target bench_train_step)" >&2; exit 1; }
  RUNS=${RUNS:-5} BATCH=${BATCH:-256} DATA=${DATA:-/usr/share/datasets/fashion-mnist}
  DATA_ARGS=(); [ -d "$DATA" ] && DATA_ARGS=(--data "$DATA")
  PIN=(); command -v taskset >/dev/null && PIN=(taskset -c "$(( $(nproc --all) - 1 ))")
  declare -A wall cpu
  for ((r = 0; r < RUNS; ++r)); do
    for p in fp32 bf16 fp16; do  # alternating, so load changes hit every precision alike
      out=$("${PIN[@]}" "$BIN" --precision "$p" --batch "$BATCH" --threads 1 --repeats 1 "${DATA_ARGS[@]}")
      wall[$p]+="$(echo "$out" | sed -n 's/^ringtrain lenet5 .*: \([0-9]*\) samples\/s (median.*/\1/p') "
      cpu[$p]+="$(echo "$out" | sed -n 's/^ *per CPU-second: \([0-9]*\) samples\/s.*/\1/p') "
    done
  done
  fw=$(echo ${wall[fp32]} | tr ' ' '\n' | median) fc=$(echo ${cpu[fp32]} | tr ' ' '\n' | median)
  echo "LeNet-5 training step, batch $BATCH, 1 thread, ${DATA_ARGS[*]:-noise}, median of $RUNS alternating runs, samples/s"
  echo "(wall clock; and per CPU-second, which is what a step costs when it gets the core on a shared machine):"
  for p in fp32 bf16 fp16; do
    mw=$(echo ${wall[$p]} | tr ' ' '\n' | median) mc=$(echo ${cpu[$p]} | tr ' ' '\n' | median)
    # Each run's ratio to the fp32 run just before it (adjacent runs see nearly the same load), median.
    pr=$(paste -d' ' <(echo ${wall[fp32]} | tr ' ' '\n') <(echo ${wall[$p]} | tr ' ' '\n') | awk '{print $2 / $1}' | median)
    printf "  %-5s wall %7.0f  x%.2f of fp32 (median of run-pair ratios x%.2f) | per CPU-second %7.0f  x%.2f   (wall runs: %s)\n" \
      "$p" "$mw" "$(echo "$mw / $fw" | bc -l)" "$pr" "$mc" "$(echo "$mc / $fc" | bc -l)" "${wall[$p]% }"
  done
  exit 0
fi

BIN="$BUILD/ringtrain"
[ -x "$BIN" ] || { echo "mixed_precision: $BIN not built" >&2; exit 1; }
EPOCHS=${EPOCHS:-10}
acc() { sed -n 's/^test accuracy: \([0-9.]*\)%.*/\1/p' | tail -1; }

# One line a (dataset, variant): accuracy per seed, the mean, and the mean's difference from the first variant.
report() {  # report DATASET VARIANT "ACC..." BASE_MEAN EXTRA
  printf "%-8s %-24s %s  mean %6.2f%%  (%+.2f points vs fp32)%s\n" "$1" "$2" "$3" "$4" "$(echo "$4 - $5" | bc -l)" "$6"
}
mean() { tr ' ' '\n' | grep . | awk '{s += $1} END {printf "%.4f", s / NR}'; }
SEEDS=${SEEDS:-0}

if [ "$MODE" = accuracy ]; then
  echo "test accuracy after $EPOCHS epochs, batch 64, Adam 1e-3, seeds: $SEEDS"
  for d in ${DATASETS:-digits fashion}; do
    base=""
    for p in fp32 bf16 fp16; do
      accs="" extra=""
      for seed in $SEEDS; do
        out=$("$BIN" train --data "$d" --precision "$p" --epochs "$EPOCHS" --batch-size 64 --lr 0.001 --seed "$seed" --quiet)
        accs+="$(echo "$out" | acc) "
        extra+=$(echo "$out" | sed -n 's/^fp16 loss scaling: \([0-9]*\) step(s) skipped, final scale \([0-9.e+]*\)/ [\1 skipped, scale \2]/p')
      done
      m=$(echo "$accs" | mean)
      [ -z "$base" ] && base=$m
      report "$d" "$p" "$accs" "$m" "$base" "$extra"
    done
  done
  exit 0
fi

# gradcomm
echo "2 ranks x batch 32, $EPOCHS epochs, Adam 1e-3, seeds: $SEEDS; bytes = all-reduce bytes each rank sends a step"
for d in ${DATASETS:-digits fashion}; do
  base=""
  for g in fp32 bf16 fp16; do
    accs="" bytes=""
    for seed in $SEEDS; do
      out=$("$BIN" train --nproc 2 --data "$d" --grad-comm "$g" --epochs "$EPOCHS" --batch-size 32 --lr 0.001 --seed "$seed" --quiet)
      accs+="$(echo "$out" | acc) "
      bytes=$(echo "$out" | sed -n 's/^all-reduce bytes per step: \([0-9]*\).*/\1/p')
    done
    m=$(echo "$accs" | mean)
    [ -z "$base" ] && base=$m
    report "$d" "grad-comm $g $bytes B" "$accs" "$m" "$base" ""
  done
done
