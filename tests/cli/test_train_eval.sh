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
