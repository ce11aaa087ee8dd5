#!/usr/bin/env bash
# bf16 vs fp32 training speed of the zoo (issue 14, acceptance 5: bf16 >= 1.6x fp32 for resnet18 and vit where
# the CPU has AVX512_BF16, >= 1.0x elsewhere): `ringtrain train` at batch 64 on one pinned core, RUNS runs of each
# precision alternating (fp32, bf16, fp32, ...) so load changes on a shared machine hit both alike; the medians of
# the trainer's own "trained N steps ... samples/s" (the whole step: loader, forward, backward, optimizer) and
# their ratio. Each run holds $LOCK (flock), so the timings of several engineers' scripts do not overlap.
#   bench/zoo_bf16.sh [build-dir]    RUNS=5 MODELS="resnet18 mobilenet_v2 vit" STEPS=20 CORE=1 DATA=digits
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
RUNS=${RUNS:-5}
MODELS=${MODELS:-"resnet18 mobilenet_v2 vit"}
STEPS=${STEPS:-20}
DATA=${DATA:-digits}
CORE=${CORE:-1}
LOCK=${LOCK:-/tmp/ringtrain-timing.lock}
echo "== $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), core $CORE, $("$BUILD/ringtrain" --version | head -1)"
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
for m in $MODELS; do
  declare -A got=([fp32]="" [bf16]="")
  for i in $(seq "$RUNS"); do
    for p in fp32 bf16; do
      out=$(flock "$LOCK" taskset -c "$CORE" "$BUILD/ringtrain" train --model "$m" --data "$DATA" --epochs 1 \
        --max-steps "$STEPS" --batch-size 64 --precision "$p" --ema 0 --label-smoothing 0 --augment-shift 0 \
        --workers 0 --log-every 0 --quiet 2>&1)
      got[$p]+="$(echo "$out" | sed -n 's/^trained .* (\([0-9.]*\) samples\/s.*/\1/p') "
    done
  done
  f=$(printf '%s\n' ${got[fp32]} | median); b=$(printf '%s\n' ${got[bf16]} | median)
  printf 'RESULT %-13s fp32 %7.1f samples/s   bf16 %7.1f samples/s   bf16/fp32 %.2fx   (runs: fp32 %s; bf16 %s; load %s)\n' \
    "$m" "$f" "$b" "$(echo "$b / $f" | bc -l)" "${got[fp32]}" "${got[bf16]}" "$(cut -d' ' -f1 /proc/loadavg)"
done
