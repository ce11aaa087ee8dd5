#!/usr/bin/env bash
# `ringtrain train --tp T` end to end on a small toy dataset (made by tests/cli/make_idx.py):
#  - mpirun -np 2 --tp 2 (dp 1 x tp 2) trains, only rank 0 prints, the header names the grid, the memory
#    report shows each rank holding about half of the fully connected layers;
#  - it sees the same samples each step as one process with the same batch, so the accuracy matches
#    within 1 point;
#  - its checkpoint (gathered whole tensors) evaluates in one process (`ringtrain eval`) to the accuracy
#    the run printed, and starts a --tp 4 run (--init-from) and a 1-process run;
#  - 4 ranks as dp 2 x tp 2 train; --tp 4 holds <= 27% of the fc layers;
#  - periodic checkpoints of a --tp 2 run resume with --tp 4 and end where the uninterrupted run ends;
#  - --tp 3 on 4 ranks, and with --nproc 4, is refused with one line before any work.
# Environment (as tests/cli): RINGTRAIN (binary), PYTHON, TESTS_DIR (tests/cli, for make_idx.py).
set -u
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
FAILED=0; PASSED=0
fail() { echo "FAIL: $*"; FAILED=$((FAILED + 1)); }
pass() { PASSED=$((PASSED + 1)); }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
MPIEXEC=${MPIEXEC:-mpirun}
"$PYTHON" "$TESTS_DIR/make_idx.py" good "$WORK/toy" --train 600 --test 200 >/dev/null || { echo "make_idx failed"; exit 1; }
acc_of() { sed -n 's/^test accuracy: \([0-9.]*\)%$/\1/p' "$1"; }
share_of() { sed -n 's/.*fully connected layers: [0-9]* of [0-9]* parameters on this rank (\([0-9.]*\)%.*/\1/p' "$1" | head -1; }
mpi() { local np=$1; shift; "$MPIEXEC" -np "$np" --oversubscribe "$RINGTRAIN" train --data "$WORK/toy" --epochs 2 --seed 3 \
  --log-every 10 --timeout 120 --batch-size 16 "$@"; }

mpi 2 --tp 2 --save "$WORK/a.st" > "$WORK/a.log" 2>&1 || { fail "mpirun -np 2 --tp 2 exited $?"; cat "$WORK/a.log"; }
a=$(acc_of "$WORK/a.log")
[ "$(grep -c '^test accuracy:' "$WORK/a.log")" = 1 ] && pass || { fail "expected one accuracy line (rank 0 only)"; cat "$WORK/a.log"; }
grep -q "dp 1 x tp 2" "$WORK/a.log" && pass || fail "header does not name the dp 1 x tp 2 grid"
s=$(share_of "$WORK/a.log")
awk -v s="$s" 'BEGIN { exit !(s > 45 && s <= 52) }' && pass || fail "tp=2 memory report: fc share '$s'% not about half"
awk -v a="$a" 'BEGIN { exit !(a >= 90) }' && pass || fail "tp=2 toy accuracy '$a' < 90%"

"$RINGTRAIN" train --data "$WORK/toy" --epochs 2 --seed 3 --log-every 10 --batch-size 16 > "$WORK/b.log" 2>&1 ||
  fail "1 process exited $?"
b=$(acc_of "$WORK/b.log")
awk -v a="$a" -v b="$b" 'BEGIN { x = a - b; exit !(x <= 1 && x >= -1) }' && pass ||
  fail "tp=2 ($a%) vs one process ($b%) differ by more than 1 point"

"$RINGTRAIN" eval --checkpoint "$WORK/a.st" --data "$WORK/toy" > "$WORK/a_eval.log" 2>&1 || fail "eval of the tp=2 checkpoint exited $?"
[ -n "$a" ] && [ "$a" = "$(acc_of "$WORK/a_eval.log")" ] && pass ||
  fail "tp=2 run printed $a%, one-process eval of its checkpoint $(acc_of "$WORK/a_eval.log")%"

mpi 4 --tp 4 --init-from "$WORK/a.st" --epochs 1 --lr 1e-9 --save "$WORK/c.st" > "$WORK/c.log" 2>&1 ||
  { fail "--tp 4 --init-from the tp=2 checkpoint exited $?"; cat "$WORK/c.log"; }
c=$(acc_of "$WORK/c.log")
awk -v a="$a" -v c="$c" 'BEGIN { x = a - c; exit !(x <= 0.5 && x >= -0.5) }' && pass ||
  fail "tp=4 from the tp=2 checkpoint at lr 1e-9: $c% vs $a%"
s=$(share_of "$WORK/c.log")
awk -v s="$s" 'BEGIN { exit !(s > 0 && s <= 27) }' && pass || fail "tp=4 memory report: fc share '$s'% > 27%"
"$RINGTRAIN" train --data "$WORK/toy" --epochs 1 --batch-size 16 --init-from "$WORK/c.st" --lr 1e-9 > "$WORK/d.log" 2>&1 &&
  pass || fail "one process --init-from the tp=4 checkpoint exited $?"

mpi 4 --tp 2 > "$WORK/e.log" 2>&1 || { fail "dp 2 x tp 2 exited $?"; cat "$WORK/e.log"; }
grep -q "dp 2 x tp 2" "$WORK/e.log" && pass || fail "header does not name the dp 2 x tp 2 grid"
e=$(acc_of "$WORK/e.log")
awk -v e="$e" 'BEGIN { exit !(e >= 90) }' && pass || fail "dp 2 x tp 2 toy accuracy '$e' < 90%"

# Resume across widths: stop a --tp 2 run at step 30 (checkpoints at 20 and 30), drop the one at 30, resume
# from step 20 with --tp 4; the final test loss matches the uninterrupted --tp 2 run (a.log) to 1e-3.
mpi 2 --tp 2 --checkpoint-dir "$WORK/ck" --checkpoint-every 20 --max-steps 30 > "$WORK/h.log" 2>&1 || fail "tp=2 with checkpoints exited $?"
rm -f "$WORK/ck/step-00000030.safetensors"
mpi 4 --tp 4 --checkpoint-dir "$WORK/ck" --resume > "$WORK/i.log" 2>&1 || { fail "--tp 4 --resume exited $?"; cat "$WORK/i.log"; }
loss_of() { sed -n 's/^epoch 2 done.*test loss \([0-9.]*\),.*/\1/p' "$1"; }
grep -q "resumed from .*step-00000020" "$WORK/i.log" && pass || fail "--tp 4 did not resume from the tp=2 checkpoint at step 20"
awk -v x="$(loss_of "$WORK/a.log")" -v y="$(loss_of "$WORK/i.log")" 'BEGIN { d = x - y; exit !(x != "" && d <= 1e-3 && d >= -1e-3) }' &&
  pass || fail "resumed --tp 4 test loss $(loss_of "$WORK/i.log") vs uninterrupted --tp 2 $(loss_of "$WORK/a.log")"

mpi 4 --tp 3 > "$WORK/f.log" 2>&1
[ $? -ne 0 ] && grep -q "tp 3 does not divide the world of 4 rank(s)" "$WORK/f.log" && ! grep -q "^epoch" "$WORK/f.log" && pass ||
  { fail "--tp 3 on 4 ranks not refused"; cat "$WORK/f.log"; }
"$RINGTRAIN" train --data "$WORK/toy" --nproc 4 --tp 3 > "$WORK/g.log" 2>&1
[ $? -ne 0 ] && [ "$(wc -l < "$WORK/g.log")" -le 2 ] && grep -q "tp 3 does not divide the world of 4 rank(s)" "$WORK/g.log" && pass ||
  { fail "--nproc 4 --tp 3 not refused in one line"; cat "$WORK/g.log"; }

echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
