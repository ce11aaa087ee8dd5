#!/usr/bin/env bash
# resnet18 data-parallel across two emulated hosts over a rate-limited link (docs/BENCHMARKS.md, "Two emulated
# hosts over TCP"): the namespaces of tests/net/hosts.sh, a tbf rate limit on every veth (both directions),
# 2 ranks (one a host) x batch B, overlap on and --no-overlap, gradients on the wire in fp32 and in bf16;
# RUNS interleaved rounds, medians. For the compute time under the same two-rank load of the machine: the
# same 2 ranks on one host over shared memory (no-overlap: step - wait = forward + backward + optimizer),
# and one rank alone.
#
#   bench/multi_host.sh [RUNS=3]      (as root)
#   env: BATCH (per rank, default 128), STEPS (default 8), RATE (tc rate, default 1gbit; "none": no limit),
#        BUILD_DIR (default build), BENCH_OUT (raw logs; default a temporary directory, removed),
#        TRAIN_EXTRA (more `ringtrain train` options for every run, e.g. "--bucket-kb 8192")
set -uo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-3}
BATCH=${BATCH:-128}
STEPS=${STEPS:-8}
RATE=${RATE:-1gbit}
BUILD_DIR=${BUILD_DIR:-build}
RT=$PWD/$BUILD_DIR/ringtrain
[[ -x $RT ]] || { echo "multi_host.sh: build $RT first" >&2; exit 1; }
source tests/net/hosts.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PMIX_MCA_gds=hash HOSTS_TIMEOUT=600
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
OUT=${BENCH_OUT:-$WORK/logs}
mkdir -p "$OUT"
why=$(hosts_check) || { echo "multi_host.sh: cannot emulate hosts: $why" >&2; exit 1; }
hosts_up 2 "$WORK/hosts" || { echo "multi_host.sh: could not set up the hosts" >&2; exit 1; }
[[ $RATE == none ]] || hosts_rate "$RATE" || { echo "multi_host.sh: tc tbf failed" >&2; exit 1; }
python3 tests/cli/make_idx.py good "$WORK/toy" --train $((2 * BATCH * (STEPS + 1))) --test 64 >/dev/null || exit 1

echo "# $(date -u +%FT%TZ) $(hostname), $(nproc) cores ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)); load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# resnet18, 2 hosts x 1 rank x batch $BATCH, $STEPS steps, link: ${RATE} (tbf on both ends of each veth)${TRAIN_EXTRA:+, options: $TRAIN_EXTRA}"
if [[ -x $BUILD_DIR/bench/bench_allreduce ]]; then  # the link: resnet18's whole gradient (44.7 MB) in one all-reduce
  echo "# one all-reduce of 43654 KiB (resnet18's gradients in fp32) between the hosts, median of 5:"
  hosts_mpirun "$PWD/$BUILD_DIR/bench/bench_allreduce" --repeats 5 --min-kb 43654 --max-kb 43654 | grep '^|' | sed 's/^/#   /'
fi
train=(train --model resnet18 --data "$WORK/toy" --batch-size "$BATCH" --max-steps "$STEPS" --epochs 1
       --log-every 0 --timeout 300 --seed 1 ${TRAIN_EXTRA:-})
configs=("fp32 overlap" "fp32 no-overlap" "bf16 overlap" "bf16 no-overlap")
args_of() { local a=(--grad-comm "${1%% *}"); [[ $1 == *no-overlap ]] && a+=(--overlap off) || a+=(--overlap on); echo "${a[@]}"; }
field() { sed -n "$2" "$1" | head -1; }
for ((r = 0; r < RUNS; r++)); do
  echo "# round $((r + 1)) of $RUNS: load $(cut -d' ' -f1-3 /proc/loadavg)"
  "$RT" "${train[@]}" > "$OUT/alone.$r.log" 2>&1 || { echo "one-rank run failed:"; cat "$OUT/alone.$r.log"; exit 1; }
  mpirun -np 2 --bind-to core "$RT" "${train[@]}" --no-overlap --no-shard-optimizer > "$OUT/shm.$r.log" 2>&1 ||
    { echo "one-host 2-rank run failed:"; cat "$OUT/shm.$r.log"; exit 1; }
  for c in "${configs[@]}"; do
    f="$OUT/${c// /_}.$r.log"
    # shellcheck disable=SC2046
    hosts_mpirun "$RT" "${train[@]}" $(args_of "$c") > "$f" 2>&1 || { echo "$c failed:"; cat "$f"; exit 1; }
  done
done
median() { sort -g | awk '{a[NR]=$1} END {if (NR) print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
stat() {  # stat PATTERN SED-EXPR: median over the runs of one figure
  for f in $1; do field "$f" "$2"; done | median
}
RATE_SED='s/^trained .*(\([0-9.]*\) samples\/s.*/\1/p'
# step time from the rate (the seconds printed have one decimal): ranks x batch / samples/s
step_ms() { for f in $1; do field "$f" "$RATE_SED" | awk -v n="$2" -v b="$BATCH" '{printf "%.1f\n", 1000 * n * b / $1}'; done | median; }
WAIT_SED='s/^gradient wait \([0-9.]*\) ms\/step.*/\1/p'
CALLS_SED='s/.*, \([0-9.]*\) ms\/step in all-reduce calls$/\1/p'
BYTES_SED='s/^all-reduce bytes per step: \([0-9]*\) sent.*/\1/p'
echo
echo "| configuration | step (ms) | samples/s | gradient wait after backward (ms/step) | in all-reduce calls (ms/step) | all-reduce bytes per step (each rank) | runs (wait, ms) |"
echo "|---|---:|---:|---:|---:|---:|---|"
echo "| 1 rank alone (no communication) | $(step_ms "$OUT/alone.*.log" 1) | $(stat "$OUT/alone.*.log" "$RATE_SED") | - | - | - | - |"
p="$OUT/shm.*.log"
echo "| 2 ranks, 1 host (shared memory), fp32 no-overlap | $(step_ms "$p" 2) | $(stat "$p" "$RATE_SED") | $(stat "$p" "$WAIT_SED") | $(stat "$p" "$CALLS_SED") | $(stat "$p" "$BYTES_SED") | $(for f in $p; do field "$f" "$WAIT_SED"; done | tr '\n' ' ') |"
for c in "${configs[@]}"; do
  p="$OUT/${c// /_}.*.log"
  runs=$(for f in $p; do field "$f" "$WAIT_SED"; done | tr '\n' ' ')
  echo "| 2 hosts, $c | $(step_ms "$p" 2) | $(stat "$p" "$RATE_SED") | $(stat "$p" "$WAIT_SED") | $(stat "$p" "$CALLS_SED") | $(stat "$p" "$BYTES_SED") | ${runs% } |"
done
echo
for g in fp32 bf16; do
  on=$(stat "$OUT/${g}_overlap.*.log" "$WAIT_SED"); off=$(stat "$OUT/${g}_no-overlap.*.log" "$WAIT_SED")
  pairs=$(for ((r = 0; r < RUNS; r++)); do
    awk -v a="$(field "$OUT/${g}_overlap.$r.log" "$WAIT_SED")" -v b="$(field "$OUT/${g}_no-overlap.$r.log" "$WAIT_SED")" \
      'BEGIN {printf "%.0f%% ", 100 * (1 - a / b)}'; done)
  echo "$g: overlap hides $(awk -v a="$on" -v b="$off" 'BEGIN {printf "%.0f%%", 100 * (1 - a / b)}') of the all-reduce time (1 - wait on / wait off = 1 - $on / $off; round by round: ${pairs% })"
done
b32=$(stat "$OUT/fp32_overlap.*.log" "$BYTES_SED"); b16=$(stat "$OUT/bf16_overlap.*.log" "$BYTES_SED")
echo "bf16 / fp32 bytes per step: $(awk -v a="$b16" -v b="$b32" 'BEGIN {printf "%.3f", a / b}') ($b16 / $b32)"
echo "# load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
