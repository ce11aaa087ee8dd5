#!/usr/bin/env bash
# --precision and --grad-comm end to end on a toy dataset: bf16 and fp16 learn (also on the fallback path),
# are deterministic, really compute differently from fp32; fp16 reports its loss scaling, and an injected
# inf gradient on one rank is skipped on every rank with the scale halved and logged; --grad-comm bf16
# halves the all-reduce bytes; bad values get one-line errors.
: "${TESTS_DIR:?run through CTest, which sets TESTS_DIR, RINGTRAIN and PYTHON}"
source "$TESTS_DIR/lib.sh"
"$PYTHON" "$TESTS_DIR/make_idx.py" good "$WORK/toy" --train 600 --test 200

# No random shifts (the default recipe's): the toy classes are bars two rows apart, which a 1-pixel shift blurs.
run() { "$RINGTRAIN" train --data "$WORK/toy" --epochs 2 --batch-size 16 --seed 7 --quiet --augment-shift 0 "$@"; }
accuracy() { sed -n 's/^test accuracy: \([0-9.]*\)%$/\1/p' "$1"; }

run --save "$WORK/fp32.safetensors" > "$WORK/fp32.log" 2>&1 || fail "fp32 train exited $?"
for p in bf16 fp16; do
  run --precision "$p" --save "$WORK/$p.safetensors" > "$WORK/$p.log" 2>&1 || { fail "$p train exited $?"; cat "$WORK/$p.log"; }
  acc=$(accuracy "$WORK/$p.log")
  awk -v a="$acc" 'BEGIN { exit !(a >= 95) }' && pass || { fail "$p toy accuracy '$acc' < 95%"; cat "$WORK/$p.log"; }
  run --precision "$p" --save "$WORK/$p.again.safetensors" > /dev/null 2>&1
  cmp -s "$WORK/$p.safetensors" "$WORK/$p.again.safetensors" && pass || fail "$p: same seed gave different weights"
  cmp -s "$WORK/fp32.safetensors" "$WORK/$p.safetensors" && fail "$p gave fp32's weights bit for bit" || pass
done
grep -q "kernels .* bf16" "$WORK/bf16.log" && pass || fail "the start line does not name bf16"
grep -q "^fp16 loss scaling: 0 step(s) skipped, final scale 65536$" "$WORK/fp16.log" && pass ||
  { fail "fp16 summary line missing"; cat "$WORK/fp16.log"; }

# The fallback (round, then the AVX2 fp32 kernels) where the CPU can run AVX2.
if grep -q avx2 /proc/cpuinfo; then
  run --precision bf16 --isa avx2 > "$WORK/bf16_avx2.log" 2>&1
  acc=$(accuracy "$WORK/bf16_avx2.log")
  awk -v a="$acc" 'BEGIN { exit !(a >= 95) }' && pass || fail "bf16 fallback toy accuracy '$acc' < 95%"
fi

# An inf gradient on rank 1 at its 3rd step: every rank skips (rank 0 logs it), the scale halves.
RINGTRAIN_FAULT_INF_GRAD=1:3 run --nproc 2 --precision fp16 --log-every 0 > "$WORK/skip.log" 2>&1 ||
  { fail "fp16 2-rank run exited $?"; cat "$WORK/skip.log"; }
grep -q "step skipped on every rank, loss scale 65536 -> 32768" "$WORK/skip.log" && pass ||
  { fail "no skip log line"; cat "$WORK/skip.log"; }
grep -q "^fp16 loss scaling: 1 step(s) skipped, final scale 32768$" "$WORK/skip.log" && pass ||
  { fail "skip not counted"; cat "$WORK/skip.log"; }

# 16-bit gradients on the wire: half the bytes (the fp32 run pinned to the ring the 16-bit one always runs:
# auto might pick another algorithm, or MPI_Allreduce, whose bytes are not counted), still learns.
run --nproc 2 --grad-comm fp32 --allreduce ring > "$WORK/gc32.log" 2>&1
run --nproc 2 --grad-comm bf16 > "$WORK/gc16.log" 2>&1 || { fail "--grad-comm bf16 exited $?"; cat "$WORK/gc16.log"; }
b32=$(sed -n 's/^all-reduce bytes per step: \([0-9]*\) .*/\1/p' "$WORK/gc32.log")
b16=$(sed -n 's/^all-reduce bytes per step: \([0-9]*\) .*/\1/p' "$WORK/gc16.log")
[ -n "$b32" ] && [ -n "$b16" ] && [ $((2 * b16)) -eq "$b32" ] && pass || fail "bytes per step fp32 '$b32', bf16 '$b16': not half"
acc=$(accuracy "$WORK/gc16.log")
awk -v a="$acc" 'BEGIN { exit !(a >= 95) }' && pass || fail "--grad-comm bf16 toy accuracy '$acc' < 95%"

expect_error "bad precision" "--precision" "$RINGTRAIN" train --data "$WORK/toy" --precision fp8
expect_error "bad grad-comm" "--grad-comm" "$RINGTRAIN" train --data "$WORK/toy" --grad-comm int8
finish
