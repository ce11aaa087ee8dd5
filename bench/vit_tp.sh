#!/usr/bin/env bash
# vit tensor parallelism on this machine (docs/BENCHMARKS.md, "Tensor parallelism: vit"), one command:
#   bench/vit_tp.sh [RUNS=3] [STEPS=40]
# 1. Memory: the trainer's report at --tp 2 and --tp 4 (rank 0; the encoder's share).
# 2. Throughput at the same global batch 64: one process vs mpirun -np 2 --bind-to core --tp 2 (dp 1),
#    STEPS steps each (`trained N steps in Xs (Y samples/s ...)`, data loading included), the two
#    alternating RUNS times; medians. DATA (default digits: `ringtrain data prepare` first) is the dataset.
# BUILD_DIR (default build) holds ringtrain.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-3}
STEPS=${2:-40}
RT=${BUILD_DIR:-build}/ringtrain
DATA=${DATA:-digits}
[[ -x $RT ]] || { echo "vit_tp.sh: $RT not found (build first, or set BUILD_DIR)"; exit 1; }
if [[ $(id -u) == 0 ]]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
echo "# $(date -u +%FT%TZ) $(hostname) $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# command: DATA=$DATA bench/vit_tp.sh $RUNS $STEPS"
for tp in 2 4; do
  echo
  echo "## memory with --tp $tp (mpirun -np $tp --oversubscribe $RT train --model vit --tp $tp --max-steps 1 --epochs 1)"
  mpirun -np "$tp" --oversubscribe "$RT" train --model vit --data "$DATA" --tp "$tp" --max-steps 1 --epochs 1 --log-every 0 2>&1 |
    sed -n '/^memory/,/^  encoder: /p'
done
T="train --model vit --data $DATA --batch-size 64 --epochs 1 --max-steps $STEPS --log-every 0 --quiet"
rate() { sed -n 's/^trained .* (\([0-9]*\) samples\/s.*/\1/p'; }
one=() two=()
for r in $(seq "$RUNS"); do
  one+=("$("$RT" $T 2>&1 | rate)")
  two+=("$(mpirun -np 2 --bind-to core "$RT" $T --tp 2 2>&1 | rate)")
  echo "run $r: 1 process ${one[-1]} samples/s, --tp 2 ${two[-1]} samples/s (load $(cut -d' ' -f1 /proc/loadavg))"
done
median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
echo
echo "## global batch 64, $STEPS steps: medians of $RUNS"
echo "1 process: $(median "${one[@]}") samples/s; --tp 2 (2 ranks): $(median "${two[@]}") samples/s"
echo "# load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
