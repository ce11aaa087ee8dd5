#!/usr/bin/env bash
# Overlap against --no-overlap for every zoo model, and the 2-rank speed-up (docs/BENCHMARKS.md,
# "Overlap for every zoo model"). For each model: RUNS rounds, each one 1-rank run and 2-rank runs with
# overlap on and off (mpirun --bind-to core: a core per rank, the loader on the step's thread), same
# per-rank batch, the digits; prints the medians of the step time (ranks x batch / the trainer's global
# samples/s, evaluation excluded), of the gradient wait after backward and of the global samples/s, and the speed-up
# of 2 ranks (overlap on) over 1.
#   bench/overlap_zoo.sh [RUNS=5] [MODELS="lenet5 resnet18 mobilenet_v2 vit"] [extra ringtrain train options]
# OVERLAP=auto compares the default --overlap auto (its trial steps included) with off instead of forced on;
# STEPS_X=N runs N times the steps below (auto's trial takes 19 steps: give it a run long enough to matter).
# BUILD_DIR (default build) holds the ringtrain binary; needs `ringtrain data prepare` first.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-5}; shift || true
MODELS=${1:-lenet5 resnet18 mobilenet_v2 vit}; shift || true
RT=${BUILD_DIR:-build}/ringtrain
[[ -x $RT ]] || { echo "overlap_zoo.sh: $RT not found (build first, or set BUILD_DIR)"; exit 1; }
if [[ $(id -u) == 0 ]]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
echo "# $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# command: bench/overlap_zoo.sh $RUNS \"$MODELS\" $*"
OVERLAP=${OVERLAP:-on} STEPS_X=${STEPS_X:-1}
echo "# OVERLAP=$OVERLAP STEPS_X=$STEPS_X: 'overlap on' is --overlap $OVERLAP (the default, --overlap auto, keeps whichever of the two its trial finds faster)"

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
# Steps and per-rank batch per model: enough steps for a few seconds of training a run.
steps_of() { case $1 in lenet5) echo $((400 * STEPS_X));; resnet18) echo $((24 * STEPS_X));; mobilenet_v2) echo $((40 * STEPS_X));; vit) echo $((60 * STEPS_X));; esac; }
batch_of() { case $1 in lenet5) echo 64;; *) echo 32;; esac; }
run() {  # np model [args...] -> "step_ms wait_ms samples_per_s"
  local np=$1 model=$2; shift 2
  local out
  # --epochs is only a bound: --max-steps ends the run (lenet5's 400 steps are 7 epochs of the digits at 2 ranks).
  out=$(mpirun -np "$np" --bind-to core "$RT" train --model "$model" --data digits --epochs 1000 --log-every 0 --quiet \
        --max-steps "$(steps_of "$model")" --batch-size "$(batch_of "$model")" "$@" 2>&1)
  local steps secs rate wait
  steps=$(sed -n 's/^trained \([0-9]*\) steps in \([0-9.]*\)s (\([0-9.]*\) samples\/s.*/\1/p' <<<"$out")
  secs=$(sed -n 's/^trained \([0-9]*\) steps in \([0-9.]*\)s (\([0-9.]*\) samples\/s.*/\2/p' <<<"$out")
  rate=$(sed -n 's/^trained \([0-9]*\) steps in \([0-9.]*\)s (\([0-9.]*\) samples\/s.*/\3/p' <<<"$out")
  wait=$(sed -n 's/^gradient wait \([0-9.]*\) ms\/step.*/\1/p' <<<"$out")
  [[ -n $steps ]] || { echo "run failed: $out" >&2; exit 1; }
  # The step time from the global samples/s (printed to the sample; the seconds have one decimal).
  echo "$(echo "1000 * $np * $(batch_of "$model") / $rate" | bc -l) ${wait:-0} $rate"
}

echo
echo "| model | batch / rank | 1 rank step (ms) | 2 ranks overlap on: step (ms) | wait (ms) | overlap off: step (ms) | wait (ms) | on / off step | 2 ranks / 1 rank samples/s |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for model in $MODELS; do
  s1=() r1=() son=() won=() ron=() soff=() woff=()
  for ((i = 0; i < RUNS; i++)); do
    read -r s _ r <<<"$(run 1 "$model" "$@")"; s1+=("$s"); r1+=("$r")
    # On and off take turns going first, so a drift of the machine's speed within a round favours neither.
    if ((i % 2)); then read -r s w _ <<<"$(run 2 "$model" --no-overlap "$@")"; soff+=("$s"); woff+=("$w"); fi
    read -r s w r <<<"$(run 2 "$model" --overlap "$OVERLAP" "$@")"; son+=("$s"); won+=("$w"); ron+=("$r")
    if ((i % 2 == 0)); then read -r s w _ <<<"$(run 2 "$model" --no-overlap "$@")"; soff+=("$s"); woff+=("$w"); fi
  done
  m() { printf '%s\n' "$@" | median; }
  ms1=$(m "${s1[@]}") mr1=$(m "${r1[@]}") mson=$(m "${son[@]}") mwon=$(m "${won[@]}") mron=$(m "${ron[@]}")
  msoff=$(m "${soff[@]}") mwoff=$(m "${woff[@]}")
  printf '| %s | %s | %.2f | %.2f | %.3f | %.2f | %.3f | %.3f | %.2f |\n' "$model" "$(batch_of "$model")" "$ms1" "$mson" \
    "$mwon" "$msoff" "$mwoff" "$(echo "$mson / $msoff" | bc -l)" "$(echo "$mron / $mr1" | bc -l)"
  echo "#   $model runs: 1 rank step ${s1[*]}; on step ${son[*]} wait ${won[*]}; off step ${soff[*]} wait ${woff[*]}" >&2
done
