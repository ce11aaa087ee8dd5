#!/usr/bin/env bash
# One zoo model's training step, one core, fp32, batch 64: two builds of ringtrain (e.g. main's and a branch's
# bench_train_step) and PyTorch 1.13 + torchvision, run in turn RUNS times (old, new, torch, old, ...) on the same
# core, so a load change hits all three alike; prints each run, the medians and the ratios new/old and new/torch.
# ringtrain's figures are `bench_train_step --layers`'s whole step (forward, softmax cross-entropy, backward, Adam
# on the first batches of DATA; the median over STEPS steps): samples/s by wall clock and per CPU-second of the thread; torch's
# are bench/torch_zoo.py --speed-steps STEPS (the median of 5 timed chunks, wall clock and process CPU time). On a
# shared machine the per-CPU-second figures are the ones to compare: what a step costs when it gets the core.
#   bench/zoo_ab.sh OLD_BENCH_TRAIN_STEP NEW_BENCH_TRAIN_STEP     MODEL=vit RUNS=5 STEPS=30 DATA=data/digits
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=$1 NEW=$2
MODEL=${MODEL:-vit}
RUNS=${RUNS:-5}
STEPS=${STEPS:-30}
DATA=${DATA:-data/digits}
CORE=$(( $(nproc --all) - 1 ))
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
# ringtrain: prints "wall_rate cpu_rate" from the profile's last line.
rt() {
  taskset -c "$CORE" "$1" --layers --model "$MODEL" --batch 64 --steps "$STEPS" --data "$DATA" 2>&1 | tail -1 |
    sed -n 's/.* \([0-9.]*\) samples per CPU[- ]second (wall: .* a step, \([0-9.]*\) samples\/s).*/\2 \1/p'
}
pt() {
  taskset -c "$CORE" /usr/bin/python3 bench/torch_zoo.py --model "$MODEL" --data "$DATA" --batch-size 64 --threads 1 \
    --speed-steps "$STEPS" 2>/dev/null | tail -1 |
    /usr/bin/python3 -c 'import json, sys; d = json.loads(sys.stdin.read()); print(d["samples_per_s"], d["samples_per_cpu_s"])'
}
echo "== $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc --all) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); all on core $CORE; $MODEL, batch 64, $STEPS steps"
o=(); n=(); t=(); oc=(); nc=(); tc=()
for i in $(seq "$RUNS"); do
  read -r a b <<< "$(rt "$OLD")"; o+=("$a"); oc+=("$b")
  read -r a b <<< "$(rt "$NEW")"; n+=("$a"); nc+=("$b")
  read -r a b <<< "$(pt)"; t+=("$a"); tc+=("$b")
  printf 'run %d: old %.1f  new %.1f  torch %.1f samples/s   (per CPU-second: %.1f %.1f %.1f)\n' "$i" "${o[-1]}" "${n[-1]}" \
    "${t[-1]}" "${oc[-1]}" "${nc[-1]}" "${tc[-1]}"
done
m() { printf '%s\n' "$@" | median; }
om=$(m "${o[@]}"); nm=$(m "${n[@]}"); tm=$(m "${t[@]}"); ocm=$(m "${oc[@]}"); ncm=$(m "${nc[@]}"); tcm=$(m "${tc[@]}")
printf 'RESULT %s medians of %d: old %.1f  new %.1f  torch %.1f samples/s; new/old %.2fx, new/torch %.2fx, old/torch %.2fx\n' \
  "$MODEL" "$RUNS" "$om" "$nm" "$tm" "$(echo "$nm / $om" | bc -l)" "$(echo "$nm / $tm" | bc -l)" "$(echo "$om / $tm" | bc -l)"
printf 'RESULT %s per CPU-second: old %.1f  new %.1f  torch %.1f; new/old %.2fx, new/torch %.2fx, old/torch %.2fx\n' \
  "$MODEL" "$ocm" "$ncm" "$tcm" "$(echo "$ncm / $ocm" | bc -l)" "$(echo "$ncm / $tcm" | bc -l)" "$(echo "$ocm / $tcm" | bc -l)"
