#!/usr/bin/env bash
# vit with --pp 2 on 2 ranks against one process at the same global batch (64) and the same micro-batches,
# for M = 2, 4, 8, 16, both schedules, with each stage's measured bubble beside the ideal (P-1)/(M+P-1)
# (docs/BENCHMARKS.md, "Pipeline parallelism"). One process runs --micro-batches M (same math, same bits).
# The ranks run unbound (--bind-to none) on this machine's cores; figures on a shared machine are noisy:
# the load is printed first.
#   bench/pp.sh [STEPS=30] [DATA=digits] [extra ringtrain train options]
# BUILD_DIR (default build) holds the ringtrain binary.
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-30}; shift || true
DATA=${1:-digits}; shift || true
RT=${BUILD_DIR:-build}/ringtrain
[[ -x $RT ]] || { echo "pp.sh: $RT not found (build first, or set BUILD_DIR)"; exit 1; }
if [[ $(id -u) == 0 ]]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
echo "# $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# command: bench/pp.sh $STEPS $DATA $*"
T="train --model vit --data $DATA --epochs 1 --batch-size 64 --log-every 0 --quiet --max-steps $STEPS $*"
rate_of() { sed -n 's/^trained [0-9]* steps in [0-9.]*s (\([0-9.]*\) samples\/s.*/\1/p' <<<"$1"; }
echo "| M | schedule | 1 process samples/s | pp 2 samples/s | pp 2 / 1 | stage 0 idle | stage 1 idle | ideal bubble | micro-batches in flight (stage 0, 1) |"
echo "|---|---|---|---|---|---|---|---|---|"
for M in 2 4 8 16; do
  one=$("$RT" $T --micro-batches "$M" 2>&1)
  r1=$(rate_of "$one")
  for sched in 1f1b gpipe; do
    pp=$(mpirun -np 2 --bind-to none "$RT" $T --micro-batches "$M" --pp 2 --pp-schedule "$sched" 2>&1)
    r2=$(rate_of "$pp")
    [[ -n $r1 && -n $r2 ]] || { echo "run failed:"; echo "$one" "$pp" | tail -5; exit 1; }
    b=$(grep "^pipeline bubble" <<<"$pp")
    i0=$(sed -n 's/.*idle stage 0 \([0-9.]*%\).*/\1/p' <<<"$b")
    i1=$(sed -n 's/.*, stage 1 \([0-9.]*%\).*/\1/p' <<<"$b")
    ideal=$(sed -n 's/.*= \([0-9.]*%\)$/\1/p' <<<"$b")
    f0=$(sed -n 's/^pipeline in flight: micro-batches at most stage 0 \([0-9]*\) .*/\1/p' <<<"$pp")
    f1=$(sed -n 's/^pipeline in flight: .*, stage 1 \([0-9]*\) .*/\1/p' <<<"$pp")
    echo "| $M | $sched | $r1 | $r2 | $(echo "scale=2; $r2 / $r1" | bc -l) | $i0 | $i1 | $ideal | $f0, $f1 |"
  done
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
