#!/usr/bin/env bash
# Corrupt datasets and nonsense options: one-line error naming what is wrong, non-zero exit, no crash.
: "${TESTS_DIR:?run through CTest, which sets TESTS_DIR, RINGTRAIN and PYTHON}"
source "$TESTS_DIR/lib.sh"

for case in truncated trailing magic dtype empty count label gzip dims missing; do
  "$PYTHON" "$TESTS_DIR/make_idx.py" corrupt "$WORK/$case" "$case"
  needle="$WORK/$case/train-"
  expect_error "corrupt dataset ($case)" "$needle" "$RINGTRAIN" train --data "$WORK/$case" --epochs 1
done

"$PYTHON" "$TESTS_DIR/make_idx.py" good "$WORK/good" --train 100 --test 50
expect_error "batch 0" "--batch-size" "$RINGTRAIN" train --data "$WORK/good" --batch-size 0
expect_error "negative lr" "--lr" "$RINGTRAIN" train --data "$WORK/good" --lr -1
expect_error "lr not a number" "--lr" "$RINGTRAIN" train --data "$WORK/good" --lr fast
expect_error "epochs 0" "--epochs" "$RINGTRAIN" train --data "$WORK/good" --epochs 0
expect_error "unknown option" "--bogus" "$RINGTRAIN" train --bogus 3
expect_error "missing value" "--epochs" "$RINGTRAIN" train --epochs
expect_error "bad optimizer" "--optimizer" "$RINGTRAIN" train --data "$WORK/good" --optimizer lion
expect_error "bad isa" "isa" "$RINGTRAIN" train --data "$WORK/good" --isa sse9
expect_error "missing dataset dir" "$WORK/nope" "$RINGTRAIN" train --data "$WORK/nope"
expect_error "missing checkpoint" "$WORK/none.safetensors" "$RINGTRAIN" eval --checkpoint "$WORK/none.safetensors" --data "$WORK/good"
printf 'not a checkpoint' > "$WORK/junk.safetensors"
expect_error "junk checkpoint" "$WORK/junk.safetensors" "$RINGTRAIN" eval --checkpoint "$WORK/junk.safetensors" --data "$WORK/good"
expect_error "eval without checkpoint" "--checkpoint" "$RINGTRAIN" eval --data "$WORK/good"
expect_error "unknown command" "unknown command" "$RINGTRAIN" frobnicate
# Divergence (NaN loss) stops the run with a message; the checkpoint written before it stays loadable.
expect_error "diverging run" "training diverged" "$RINGTRAIN" train --data "$WORK/good" --lr 1e30 --batch-size 10 --checkpoint-dir "$WORK/nan" --checkpoint-every 1
"$RINGTRAIN" eval --checkpoint "$WORK/nan/step-00000001.safetensors" --data "$WORK/good" > /dev/null 2>&1 && pass || fail "the checkpoint before the divergence does not load"
expect_error "threads 0" "--threads" "$RINGTRAIN" train --data "$WORK/good" --threads 0
expect_error "bad allreduce" "allreduce" "$RINGTRAIN" train --data "$WORK/good" --allreduce tree
expect_error "negative timeout" "--timeout" "$RINGTRAIN" train --data "$WORK/good" --timeout -5
expect_error "bad progress" "--progress" "$RINGTRAIN" train --data "$WORK/good" --progress fancy
finish
