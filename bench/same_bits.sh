#!/usr/bin/env bash
# Whether two ringtrain binaries (e.g. the previous main's and this tree's) train to the same bits: each zoo
# model a few steps on the digits, with micro-batches (the gradient accumulation and every residual stream's
# fan-out) and with --threads 2 (the slices), both saving a checkpoint; the checkpoints are compared byte for
# byte. For changes meant to keep every bit (kernel speed-ups that keep the order of every sum).
#   bench/same_bits.sh OLD_BINARY NEW_BINARY      MODELS="vit resnet18 mobilenet_v2 lenet5" STEPS=4 BATCH=32 PRECISION=fp32
set -euo pipefail
OLD=$1 NEW=$2
MODELS=${MODELS:-vit resnet18 mobilenet_v2 lenet5}
STEPS=${STEPS:-4}
BATCH=${BATCH:-32}
PRECISION=${PRECISION:-fp32}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
status=0
for m in $MODELS; do
  for mode in "--micro-batches 2" "--threads 2"; do
    for side in old new; do
      bin=$OLD; [[ $side == new ]] && bin=$NEW
      "$bin" train --model "$m" --data digits --epochs 1 --batch-size "$BATCH" --precision "$PRECISION" --max-steps "$STEPS" $mode --log-every 0 \
        --quiet --save "$WORK/$side.st" > "$WORK/$side.log" 2>&1 || { echo "$m $mode: the $side binary failed:"; tail -3 "$WORK/$side.log"; exit 1; }
    done
    if cmp -s "$WORK/old.st" "$WORK/new.st"; then echo "$m $PRECISION batch $BATCH $mode: same bits"; else echo "$m $PRECISION batch $BATCH $mode: DIFFERENT"; status=1; fi
  done
done
exit $status
