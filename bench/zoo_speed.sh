#!/usr/bin/env bash
# The zoo's training speed against PyTorch 1.13 + torchvision, side by side (issue: model zoo, acceptance 5):
# one core (both sides pinned to the same one), fp32, batch 64, plain recipe, the same digits; RUNS
# alternating runs of each side (ringtrain, torch, ringtrain, ...), then the medians and their ratio.
# ringtrain's figure is `ringtrain train`'s own "trained N steps ... samples/s" (the whole step: loader,
# forward, backward, optimizer; the first step included); torch's is bench/torch_zoo.py --speed-steps (the
# median of 5 timed chunks after 5 warm-up steps).
#   bench/zoo_speed.sh [build-dir]    RUNS=3 MODELS="resnet18 mobilenet_v2 vit" STEPS=40 DATA=digits
set -euo pipefail
source "$(dirname "$0")/lib.sh"  # BUILD, MODELS, DATA; median, train_rate
RUNS=${RUNS:-3}
STEPS=${STEPS:-40}
DIR=$([ -d "$DATA" ] && echo "$DATA" || echo "${RINGTRAIN_DATA:-data}/$DATA")
CORE=$(( $(nproc --all) - 1 ))
PIN=(taskset -c "$CORE")
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
echo "== machine: $(cpu_model), $(nproc --all) cores, load average $(load_average); both sides on core $CORE"
for m in $MODELS; do
  rt=(); pt=()
  for i in $(seq "$RUNS"); do
    rt+=("$(train_rate "$m")")
    out=$("${PIN[@]}" /usr/bin/python3 bench/torch_zoo.py --model "$m" --data "$DIR" --batch-size 64 --threads 1 \
      --speed-steps "$STEPS" 2>/dev/null | tail -1)
    pt+=("$(echo "$out" | /usr/bin/python3 -c 'import json, sys; print(json.loads(sys.stdin.read())["samples_per_s"])')")
  done
  rm=$(printf '%s\n' "${rt[@]}" | median); pm=$(printf '%s\n' "${pt[@]}" | median)
  printf 'RESULT %-13s ringtrain %7.1f samples/s   torch %7.1f samples/s   ratio %.2fx   (runs: ringtrain %s; torch %s)\n' \
    "$m" "$rm" "$pm" "$(echo "$rm / $pm" | bc -l)" "${rt[*]}" "${pt[*]}"
done
