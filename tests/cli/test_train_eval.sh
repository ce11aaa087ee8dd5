#!/usr/bin/env bash
# Train on a small toy dataset: prints the accuracy line, learns, is deterministic for a seed, saves a
# checkpoint that eval and --init-from read back with the same accuracy.
: "${TESTS_DIR:?run through CTest, which sets TESTS_DIR, RINGTRAIN and PYTHON}"
source "$TESTS_DIR/lib.sh"
"$PYTHON" "$TESTS_DIR/make_idx.py" good "$WORK/toy" --train 600 --test 200

run() { "$RINGTRAIN" train --data "$WORK/toy" --epochs 2 --batch-size 16 --seed 7 --log-every 10 "$@"; }

run --save "$WORK/a.safetensors" > "$WORK/a.log" 2>&1 || { fail "train exited $?"; cat "$WORK/a.log"; }
grep -q "^epoch 1 batch 10/38 loss" "$WORK/a.log" && pass || { fail "no log line every 10 batches"; cat "$WORK/a.log"; }
acc=$(sed -n 's/^test accuracy: \([0-9.]*\)%$/\1/p' "$WORK/a.log")
[ -n "$acc" ] && pass || fail "no 'test accuracy: NN.NN%' line"
awk -v a="$acc" 'BEGIN { exit !(a >= 95) }' && pass || fail "toy accuracy $acc% < 95%"

# The step-time line: its parts (ms a step) are each >= 0, add up to the step (other >= 0 is the remainder),
# and the steps' total fits in the training time the rate line implies (76 steps of 16 samples).
step_line=$(grep "^step time" "$WORK/a.log")
[ -n "$step_line" ] && pass || fail "no 'step time' line"
rate=$(sed -n 's/^trained .* (\([0-9.]*\) samples\/s.*/\1/p' "$WORK/a.log")
echo "$step_line" | awk -v rate="$rate" '{
  gsub(/[(),:]/, " "); n = split($0, w, " ")
  for (i = 1; i < n; ++i) if (w[i + 1] ~ /^-?[0-9.]+$/) v[w[i]] = w[i + 1]
  if (!(v["forward"] > 0 && v["backward"] > 0 && v["optimizer"] > 0 && v["data"] >= 0 && v["loss"] >= 0)) exit 1
  parts = v["data"] + v["forward"] + v["loss"] + v["backward"] + v["optimizer"]
  if (v["other"] < -0.01 || parts + v["other"] > v["time"] + 0.02 || parts + v["other"] < v["time"] - 0.02) exit 1
  if (v["time"] * 76 > 1000 * 76 * 16 / rate * 1.02 + 1) exit 1
}' && pass || fail "step time parts do not add up: '$step_line' (rate $rate samples/s)"

run --save "$WORK/b.safetensors" > "$WORK/b.log" 2>&1
cmp -s "$WORK/a.safetensors" "$WORK/b.safetensors" && pass || fail "same seed gave different weights"
run --seed 8 --save "$WORK/c.safetensors" > "$WORK/c.log" 2>&1
cmp -s "$WORK/a.safetensors" "$WORK/c.safetensors" && fail "another seed gave the same weights" || pass

"$RINGTRAIN" eval --checkpoint "$WORK/a.safetensors" --data "$WORK/toy" --predictions "$WORK/pred.txt" > "$WORK/eval.log" 2>&1
eval_acc=$(sed -n 's/^test accuracy: \([0-9.]*\)%$/\1/p' "$WORK/eval.log")
[ "$eval_acc" = "$acc" ] && pass || fail "eval accuracy $eval_acc% != train's $acc%"
[ "$(wc -l < "$WORK/pred.txt")" -eq 200 ] && pass || fail "predictions file has $(wc -l < "$WORK/pred.txt") lines, not 200"
grep -q "confusion matrix" "$WORK/eval.log" && pass || fail "eval prints no confusion matrix"

# Continuing from a checkpoint starts from its weights: 1 step at a tiny lr keeps the accuracy.
"$RINGTRAIN" train --data "$WORK/toy" --epochs 1 --max-steps 1 --lr 1e-9 --init-from "$WORK/a.safetensors" > "$WORK/d.log" 2>&1
init_acc=$(sed -n 's/^test accuracy: \([0-9.]*\)%$/\1/p' "$WORK/d.log")
[ "$init_acc" = "$acc" ] && pass || { fail "--init-from accuracy $init_acc% != $acc%"; cat "$WORK/d.log"; }
finish
