#!/usr/bin/env bash
# The zoo's checkpoints in PyTorch (issue: model zoo, acceptance 2): for each model, `ringtrain train
# --model M --data digits --epochs 1 --save F`, then `ringtrain eval` and scripts/torch_eval_zoo.py (the
# torchvision model, load_state_dict(strict=True), eval mode) on the same test split; prints both losses,
# their relative difference, both accuracies and how many predictions agree. Exit 1 if a loss differs by
# more than 1e-4 relative or an accuracy differs.
# usage: bench/zoo_torch_check.sh [BUILD_DIR] ; MODELS="resnet18 mobilenet_v2 vit" DATA=digits EPOCHS=1
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
MODELS=${MODELS:-"resnet18 mobilenet_v2 vit"}
DATA=${DATA:-digits}
EPOCHS=${EPOCHS:-1}
OUT=${OUT:-runs/zoo_torch_check}
mkdir -p "$OUT"
DIR=$([ -d "$DATA" ] && echo "$DATA" || echo "${RINGTRAIN_DATA:-data}/$DATA")  # the IDX folder of a named dataset
status=0
for m in $MODELS; do
  "$BUILD/ringtrain" train --model "$m" --data "$DATA" --epochs "$EPOCHS" --save "$OUT/$m.safetensors" --quiet > "$OUT/$m.train.log"
  "$BUILD/ringtrain" eval --checkpoint "$OUT/$m.safetensors" --data "$DATA" --predictions "$OUT/$m.ringtrain.txt" > "$OUT/$m.eval.log"
  loss=$(sed -n 's/^test loss: //p' "$OUT/$m.eval.log")
  acc=$(sed -n 's/^test accuracy: \(.*\)%/\1/p' "$OUT/$m.eval.log")
  /usr/bin/python3 scripts/torch_eval_zoo.py --checkpoint "$OUT/$m.safetensors" --data "$DIR" \
    --predictions "$OUT/$m.torch.txt" > "$OUT/$m.torch.log"
  tloss=$(sed -n 's/.*test loss \([0-9.e-]*\), accuracy.*/\1/p' "$OUT/$m.torch.log")
  tacc=$(sed -n 's/.*, accuracy \([0-9.]*\)%.*/\1/p' "$OUT/$m.torch.log")
  same=$(paste -d' ' "$OUT/$m.ringtrain.txt" "$OUT/$m.torch.txt" | awk '$1 == $2 { s++ } END { print s + 0 "/" NR }')
  rel=$(awk -v a="$loss" -v b="$tloss" 'BEGIN { d = a - b; if (d < 0) d = -d; printf "%.2e", d / b }')
  echo "$m: ringtrain eval loss $loss acc $acc% | torchvision (strict load, eval mode) loss $tloss acc $tacc% | loss rel diff $rel | same predictions $same"
  awk -v r="$rel" 'BEGIN { exit !(r <= 1e-4) }' && [ "$acc" = "$tacc" ] || status=1
done
exit $status
