#!/usr/bin/env bash
# bf16 vs fp32 training speed of the zoo (issue 14, acceptance 5: bf16 >= 1.6x fp32 for resnet18 and vit where
# the CPU has AVX512_BF16, >= 1.0x elsewhere): `ringtrain train` at batch 64 on one pinned core, RUNS runs of each
# precision alternating (fp32, bf16, fp32, ...) so load changes on a shared machine hit both alike; the medians of
# the trainer's own "trained N steps ... samples/s" (the whole step: loader, forward, backward, optimizer) and
# their ratio. Each run holds $LOCK (flock), so the timings of several engineers' scripts do not overlap.
#   bench/zoo_bf16.sh [build-dir]    RUNS=5 MODELS="resnet18 mobilenet_v2 vit" STEPS=20 CORE=1 DATA=digits
set -euo pipefail
source "$(dirname "$0")/lib.sh"  # BUILD, MODELS, DATA; median, train_rate
RUNS=${RUNS:-5}
STEPS=${STEPS:-20}
CORE=${CORE:-1}
LOCK=${LOCK:-/tmp/ringtrain-timing.lock}
PIN=(flock "$LOCK" taskset -c "$CORE")
echo "== $(cpu_model), core $CORE, $("$BUILD/ringtrain" --version | head -1)"
for m in $MODELS; do
  declare -A got=([fp32]="" [bf16]="")
  for i in $(seq "$RUNS"); do
    for p in fp32 bf16; do
      got[$p]+="$(train_rate "$m" --precision "$p") "
    done
  done
  f=$(printf '%s\n' ${got[fp32]} | median); b=$(printf '%s\n' ${got[bf16]} | median)
  printf 'RESULT %-13s fp32 %7.1f samples/s   bf16 %7.1f samples/s   bf16/fp32 %.2fx   (runs: fp32 %s; bf16 %s; load %s)\n' \
    "$m" "$f" "$b" "$(echo "$b / $f" | bc -l)" "${got[fp32]}" "${got[bf16]}" "$(cut -d' ' -f1 /proc/loadavg)"
done
