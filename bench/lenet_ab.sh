#!/usr/bin/env bash
# LeNet-5 A/B: two ringtrain binaries (e.g. the previous main's and this tree's) trained alternately on the
# same core, RUNS times each, one epoch of Fashion-MNIST at batch B (fp32, one thread, the default recipe);
# prints each run's samples/s (the command's own "trained ... samples/s"), the medians and their ratio.
#   bench/lenet_ab.sh OLD_BINARY NEW_BINARY     RUNS=5 B=64 DATA=fashion
set -euo pipefail
OLD=$1 NEW=$2
RUNS=${RUNS:-5}
B=${B:-64}
DATA=${DATA:-fashion}
CORE=$(( $(nproc --all) - 1 ))
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
rate() { taskset -c "$CORE" "$1" train --data "$DATA" --epochs 1 --batch-size "$B" --workers 0 --log-every 0 --quiet 2>&1 |
  sed -n 's/^trained .* (\([0-9.]*\) samples\/s.*/\1/p'; }
echo "== $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load average $(cut -d' ' -f1-3 /proc/loadavg), core $CORE, batch $B"
o=(); n=()
for i in $(seq "$RUNS"); do o+=("$(rate "$OLD")"); n+=("$(rate "$NEW")"); done
om=$(printf '%s\n' "${o[@]}" | median); nm=$(printf '%s\n' "${n[@]}" | median)
printf 'RESULT old %.0f samples/s (%s)   new %.0f samples/s (%s)   new/old %.3f\n' "$om" "${o[*]}" "$nm" "${n[*]}" "$(echo "$nm / $om" | bc -l)"
