#!/usr/bin/env bash
# vit with --pp 2 on 2 ranks against one process at the same global batch (64) and the same micro-batches,
# for M = 2, 4, 8, 16, both schedules, with each stage's measured bubble beside the ideal (P-1)/(M+P-1)
# (docs/BENCHMARKS.md, "Pipeline parallelism"). One process runs --micro-batches M (same math, same bits).
# Each configuration runs REPEATS times (default 3), the runs of one M interleaved; the table gives the
# medians (samples/s, and each stage's idle fraction) and the range of the idle fractions, and beside them the
# median over the runs of each run's median step (the schedule's own idle, without the steps the machine
# took the core from). "within 20%" judges the mean idle fractions. The ranks run
# bound to a core each (--bind-to core; BIND=none to let them float). Figures on a shared machine are
# noisy: the load is printed first and last.
#   bench/pp.sh [STEPS=30] [DATA=digits] [extra ringtrain train options]     REPEATS=3 MS="2 4 8 16"
# PP_OPTS: options for the --pp 2 runs only (e.g. PP_OPTS="--pp-balance cost" or "--pp-split 28", which one process
# refuses). A run that fails prints the end of its output and stops the script.
# BUILD_DIR (default build) holds the ringtrain binary.
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-30}; shift || true
DATA=${1:-digits}; shift || true
REPEATS=${REPEATS:-3}
MS=${MS:-2 4 8 16}
BIND=${BIND:-core}
RT=${BUILD_DIR:-build}/ringtrain
[[ -x $RT ]] || { echo "pp.sh: $RT not found (build first, or set BUILD_DIR)"; exit 1; }
if [[ $(id -u) == 0 ]]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
echo "# $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# command: REPEATS=$REPEATS MS=\"$MS\" BIND=$BIND PP_OPTS=\"${PP_OPTS:-}\" bench/pp.sh $STEPS $DATA $*"
T="train --model vit --data $DATA --epochs 1 --batch-size 64 --log-every 0 --quiet --max-steps $STEPS $*"
rate_of() { sed -n 's/^trained [0-9]* steps in [0-9.]*s (\([0-9.]*\) samples\/s.*/\1/p' <<<"$1"; }
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
range() { tr ' ' '\n' | grep . | sort -g | awk 'NR==1{lo=$1} {hi=$1} END {printf "%s-%s", lo, hi}'; }
echo "| M | schedule | 1 process samples/s | pp 2 samples/s | pp 2 / 1 | stage 0 idle (range) | stage 1 idle (range) | median step idle (stage 0, 1) | ideal bubble | within 20% of ideal | micro-batches in flight (stage 0, 1) | stage 1 starts at node (each run) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
for M in $MS; do
  declare -A r2=() i0=() i1=() m0=() m1=() fl=() cuts=()
  r1=""; ideal=""
  for rep in $(seq "$REPEATS"); do
    one=$("$RT" $T --micro-batches "$M" 2>&1) || true  # (the check below says why it failed)
    r=$(rate_of "$one"); [[ -n $r ]] || { echo "one-process run failed:"; tail -3 <<<"$one"; exit 1; }
    r1="$r1 $r"
    for sched in 1f1b gpipe; do
      pp=$(mpirun -np 2 --bind-to "$BIND" "$RT" $T --micro-batches "$M" --pp 2 --pp-schedule "$sched" ${PP_OPTS:-} 2>&1) || true
      r=$(rate_of "$pp"); [[ -n $r ]] || { echo "pp run failed:"; tail -3 <<<"$pp"; exit 1; }
      b=$(grep "^pipeline bubble" <<<"$pp")
      r2[$sched]="${r2[$sched]:-} $r"
      i0[$sched]="${i0[$sched]:-} $(sed -n 's/.*idle stage 0 \([0-9.]*\)%.*/\1/p' <<<"$b")"
      i1[$sched]="${i1[$sched]:-} $(sed -n 's/.*, stage 1 \([0-9.]*\)%.*/\1/p' <<<"$b")"
      m0[$sched]="${m0[$sched]:-} $(sed -n 's/.*(median step: \([0-9.]*\)%, .*/\1/p' <<<"$b")"
      m1[$sched]="${m1[$sched]:-} $(sed -n 's/.*(median step: [0-9.]*%, \([0-9.]*\)%).*/\1/p' <<<"$b")"
      ideal=$(sed -n 's/.*= \([0-9.]*\)%$/\1/p' <<<"$b")
      cuts[$sched]="${cuts[$sched]:-} $(sed -n 's/^pipeline: .*; stage 1: nodes \([0-9]*\)-.*/\1/p' <<<"$pp")"
      fl[$sched]="$(sed -n 's/^pipeline in flight: micro-batches at most stage 0 \([0-9]*\) .*, stage 1 \([0-9]*\) .*/\1, \2/p' <<<"$pp")"
    done
  done
  m1=$(median <<<"$r1")
  for sched in 1f1b gpipe; do
    m2=$(median <<<"${r2[$sched]}"); a=$(median <<<"${i0[$sched]}"); c=$(median <<<"${i1[$sched]}")
    ok=$(awk -v a="$a" -v c="$c" -v i="$ideal" 'BEGIN { print (a <= 1.2 * i && a >= 0.8 * i && c <= 1.2 * i && c >= 0.8 * i) ? "yes" : "no" }')
    echo "| $M | $sched | $m1 | $m2 | $(echo "scale=2; $m2 / $m1" | bc -l) | $a% ($(range <<<"${i0[$sched]}")) | $c% ($(range <<<"${i1[$sched]}")) | $(median <<<"${m0[$sched]}")%, $(median <<<"${m1[$sched]}")% | $ideal% | $ok | ${fl[$sched]} |${cuts[$sched]} |"
  done
  unset r2 i0 i1 m0 m1 fl cuts
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
