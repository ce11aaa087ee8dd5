#!/usr/bin/env bash
# Data-parallel scaling on paper, checked against this machine (docs/BENCHMARKS.md, "Scaling model"):
#  1. links: the ring all-reduce timed at 2 ranks over shared memory and across 2 emulated hosts over TCP
#     (tests/net/hosts.sh; skipped, saying why, where namespaces cannot be made), 4 KiB .. 16 MiB;
#     scaling_model.py fits each link's per-hop alpha and beta;
#  2. models: the one-rank step time of lenet5 (batch 64) and resnet18 (batch 32) on the digits
#     (mpirun -np 1 --bind-to core), alone and with every core busy (one single-rank training a core at
#     once), and their gradient buckets (the plan line of --allreduce auto);
#  3. measured: the same per-rank batch on 2, 3 and 4 ranks over shared memory (3-4 oversubscribed: ranks
#     share the 2 cores), --allreduce ring, overlap on and off, the median step time of RUNS runs;
#  4. bench/scaling_model.py: predicted against measured, then 2-1024 ranks on paper.
#   bench/scaling_model.sh [RUNS=3]      (as root for the TCP link); BUILD_DIR (default build)
set -uo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-3}
BUILD_DIR=${BUILD_DIR:-build}
RT=$PWD/$BUILD_DIR/ringtrain
BA=$PWD/$BUILD_DIR/bench/bench_allreduce
[[ -x $RT && -x $BA ]] || { echo "scaling_model.sh: build $RT and $BA first" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 PMIX_MCA_gds=hash
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
CPU=$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)
echo "# $(date -u +%FT%TZ) $CPU, $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# command: bench/scaling_model.sh $RUNS"
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

# The ring column of bench_allreduce's table as "bytes seconds" lines.
ring_points() {
  awk -F'|' 'NR == 1 || /\| size \|/ { for (i = 1; i <= NF; i++) if ($i ~ /^ *ring \(us\) *$/) col = i; next }
             /^\| [0-9]+ (KiB|MiB) \|/ && col { split($2, s, " "); b = s[1] * (s[2] == "MiB" ? 1048576 : 1024);
                                                printf "%d %.9f\n", b, $col * 1e-6 }'
}
sizes=(--min-kb 4 --max-kb 16384 --repeats 11)
mpirun -np 2 --bind-to core "$BA" "${sizes[@]}" > "$WORK/shm.txt" 2>&1 || { cat "$WORK/shm.txt"; exit 1; }
ring_points < "$WORK/shm.txt" > "$WORK/shm.points"
source tests/net/hosts.sh
if why=$(hosts_check); then
  hosts_up 2 "$WORK/hosts" >/dev/null && hosts_mpirun "$BA" "${sizes[@]}" > "$WORK/tcp.txt" 2>&1 &&
    ring_points < "$WORK/tcp.txt" > "$WORK/tcp.points"
  hosts_down
else
  echo "# no TCP link: $why"
fi

# One-rank step time from the trainer's global samples/s (evaluation excluded).
steps_of() { case $1 in lenet5) echo 400;; resnet18) echo 20;; esac; }
batch_of() { case $1 in lenet5) echo 64;; resnet18) echo 32;; esac; }
step_s() {  # np model [args...]
  local np=$1 model=$2; shift 2
  local rate
  local bind=core  # a core per rank; ranks beyond the cores cannot be bound to one each
  ((np > $(nproc))) && bind=none
  # --epochs is only a bound: --max-steps ends the run (one epoch of the digits is 31 lenet5 steps at 4 ranks).
  rate=$(mpirun -np "$np" --bind-to "$bind" "$RT" train --model "$model" --data digits --epochs 1000 --log-every 0 --quiet \
           --max-steps "$(steps_of "$model")" --batch-size "$(batch_of "$model")" "$@" 2>&1 |
         sed -n 's/^trained .* (\([0-9.]*\) samples\/s.*/\1/p')
  [[ -n $rate ]] || { echo "scaling_model.sh: $model on $np rank(s) failed" >&2; exit 1; }
  echo "$np * $(batch_of "$model") / $rate" | bc -l | awk '{printf "%.9f\n", $1}'
}
# The one-rank step time with every core busy: one single-rank training per core at once (taskset, no
# mpirun: each a world of one), the median of their step times. Two busy cores share caches and memory
# bandwidth, so a rank of a full machine computes slower than a rank alone (resnet18: ~20% here).
step_loaded_s() {  # model
  local model=$1 c pids=() rates=()
  for ((c = 0; c < $(nproc); c++)); do
    taskset -c "$c" "$RT" train --model "$model" --data digits --epochs 1000 --log-every 0 --quiet \
      --max-steps "$(steps_of "$model")" --batch-size "$(batch_of "$model")" > "$WORK/loaded.$c" 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}" || { echo "scaling_model.sh: concurrent $model runs failed" >&2; exit 1; }
  for ((c = 0; c < $(nproc); c++)); do
    rates+=("$(sed -n 's/^trained .* (\([0-9.]*\) samples\/s.*/\1/p' "$WORK/loaded.$c")")
  done
  printf '%s\n' "${rates[@]}" | awk -v b="$(batch_of "$model")" '{printf "%.9f\n", b / $1}' | median
}
buckets_of() {  # model -> bucket bytes, in backward's order, from --allreduce auto's plan line
  mpirun -np 2 --bind-to core "$RT" train --model "$1" --data digits --max-steps 1 --batch-size 2 --log-every 0 --quiet \
    --allreduce auto --no-shard-optimizer 2>&1 | grep -m1 'bucket-kb' | grep -Eo '\([0-9.]+ KiB\)' | tr -d '()KiB ' |
    awk '{printf "%d ", $1 * 1024}'
}

{
  echo "{\"cpu\": \"$CPU\", \"cores\": $(nproc), \"links\": {"
  first=1
  for l in shm tcp; do
    [[ -s $WORK/$l.points ]] || continue
    ((first)) || echo ","
    first=0
    echo "\"$l\": $(python3 -c 'import sys, json
sys.path.insert(0, "bench")
import scaling_model as m
pts = [tuple(map(float, l.split())) for l in open(sys.argv[1])]
print(json.dumps(m.fit_link(pts)))' "$WORK/$l.points")"
  done
  echo "}, \"models\": {"
  first=1
  for model in lenet5 resnet18; do
    s=() l=()
    for ((i = 0; i < RUNS; i++)); do s+=("$(step_s 1 "$model")"); l+=("$(step_loaded_s "$model")"); done
    ((first)) || echo ","
    first=0
    echo "\"$model\": {\"batch\": $(batch_of "$model"), \"step_1rank_s\": $(printf '%s\n' "${s[@]}" | median),"
    echo " \"step_loaded_s\": $(printf '%s\n' "${l[@]}" | median),"
    echo " \"bucket_bytes\": [$(buckets_of "$model" | sed 's/ $//; s/ /, /g')]}"
  done
  echo "}, \"measured\": ["
  first=1
  for model in lenet5 resnet18; do
    for W in 2 3 4; do
      for ov in on off; do
        s=()
        for ((i = 0; i < RUNS; i++)); do s+=("$(step_s "$W" "$model" --allreduce ring --overlap "$ov")"); done
        ((first)) || echo ","
        first=0
        echo "{\"model\": \"$model\", \"world\": $W, \"link\": \"shm\", \"algorithm\": \"ring\", \"overlap\": $([[ $ov == on ]] && echo true || echo false), \"step_s\": $(printf '%s\n' "${s[@]}" | median)}"
      done
    done
  done
  echo "]}"
} > "$WORK/figures.json"
[[ -n ${FIGURES_OUT:-} ]] && cp "$WORK/figures.json" "$FIGURES_OUT"  # the raw figures, to rerun the model on
python3 bench/scaling_model.py "$WORK/figures.json"
