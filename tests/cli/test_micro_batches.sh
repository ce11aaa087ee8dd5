#!/usr/bin/env bash
# --micro-batches M on lenet5 (no batch norm, so the pieces compute what the whole batch does): each step's
# batch of 64 in M pieces, gradients accumulated, one Adam step. After 20 steps the weights of M = 4 and
# M = 2 are those of M = 1 within 1e-5 relative per tensor (tests/cli/tensor_rel.py), on one process and on 2 data-parallel ranks (where the last micro-batch's backward overlaps
# the all-reduce of the accumulated gradients: batch 32 a rank x 2 ranks against one process x 64).
# resnet18 (batch norm, statistics per micro-batch) trains with M = 2. Bad M is refused in one line.
: "${TESTS_DIR:?run through CTest, which sets TESTS_DIR, RINGTRAIN and PYTHON}"
source "$TESTS_DIR/lib.sh"
"$PYTHON" "$TESTS_DIR/make_idx.py" good "$WORK/toy" --train 1280 --test 100
T="$RINGTRAIN train --data $WORK/toy --epochs 1 --max-steps 20 --log-every 0 --quiet --seed 5 --ema 0"
close() {  # close A B: every weight tensor of two checkpoints within 1e-5 relative (tests/cli/tensor_rel.py)
  local d
  d=$("$PYTHON" "$TESTS_DIR/tensor_rel.py" "$1" "$2")
  echo "  $(basename "$1") vs $(basename "$2"): worst ${d:-?}"
  awk -v d="${d%% *}" 'BEGIN { exit !(d != "" && d <= 1e-5) }'
}
$T --batch-size 64 --save "$WORK/m1.st" > "$WORK/m1.log" 2>&1 || { fail "M=1 exited $?"; cat "$WORK/m1.log"; }
$T --batch-size 64 --micro-batches 4 --save "$WORK/m4.st" > "$WORK/m4.log" 2>&1 || { fail "M=4 exited $?"; cat "$WORK/m4.log"; }
$T --batch-size 64 --micro-batches 1 --save "$WORK/m1b.st" > /dev/null 2>&1
cmp -s "$WORK/m1.st" "$WORK/m1b.st" && pass || fail "--micro-batches 1 is not the default's bits"
close "$WORK/m1.st" "$WORK/m4.st" && pass || fail "lenet5 M=4 vs M=1 after 20 steps"
! cmp -s "$WORK/m1.st" "$WORK/m4.st" && pass || fail "M=4 gave the same bits as M=1 (were micro-batches run at all?)"
$T --batch-size 32 --nproc 2 --micro-batches 2 --save "$WORK/d2.st" > "$WORK/d2.log" 2>&1 ||
  { fail "2 ranks x M=2 exited $?"; cat "$WORK/d2.log"; }
close "$WORK/m1.st" "$WORK/d2.st" && pass || fail "2 ranks x batch 32 x M=2 vs one process x batch 64"
$T --model resnet18 --max-steps 3 --batch-size 16 --micro-batches 2 > "$WORK/r.log" 2>&1 && grep -q "^test accuracy" "$WORK/r.log" && pass ||
  { fail "resnet18 with --micro-batches 2"; cat "$WORK/r.log"; }
expect_error "micro-batches 5 of 64" "--micro-batches 5 does not divide --batch-size 64" $T --batch-size 64 --micro-batches 5
expect_error "micro-batches 0" "--micro-batches must be between 1" $T --micro-batches 0
finish
