#!/usr/bin/env bash
# `ringtrain train` across ranks, end to end, on a small toy dataset (made by tests/cli/make_idx.py):
#  - mpirun -np 2 x batch 8 trains, learns, and only rank 0 prints (one accuracy line);
#  - --nproc 2 is the same job (bit-identical checkpoint);
#  - overlap auto (the default: a trial of a few steps each way, then the faster), --overlap on and
#    --no-overlap give bit-identical weights (same buckets, same order), and auto says what it chose;
#    so does a progress thread (--progress-thread-us, 3 ranks);
#  - 2 ranks x batch 8 sees the same samples each step as 1 rank x batch 16 (DistributedSampler), so the
#    accuracy matches within 1 point; --allreduce mpi trains as well;
#  - 3 ranks (200 test samples do not divide by 3): the accuracy printed equals single-process eval of
#    the same checkpoint, so every test sample was counted exactly once.
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
train() { "$RINGTRAIN" train --data "$WORK/toy" --epochs 2 --seed 3 --log-every 10 --timeout 120 "$@"; }

"$MPIEXEC" -np 2 --oversubscribe "$RINGTRAIN" train --data "$WORK/toy" --epochs 2 --seed 3 --log-every 10 \
  --timeout 120 --batch-size 8 --save "$WORK/a.st" > "$WORK/a.log" 2>&1 || { fail "mpirun -np 2 exited $?"; cat "$WORK/a.log"; }
a=$(acc_of "$WORK/a.log")
[ "$(grep -c '^test accuracy:' "$WORK/a.log")" = 1 ] && pass || { fail "expected one accuracy line (rank 0 only)"; cat "$WORK/a.log"; }
grep -q "2 rank(s) x batch 8" "$WORK/a.log" && pass || fail "header does not say 2 ranks x batch 8"
grep -q "^epoch 1 batch 10/38 loss" "$WORK/a.log" && pass || fail "no log line every 10 batches (300 samples/rank / 8 = 38 batches)"
grep -Eq "gradient wait [0-9.]+ ms/step" "$WORK/a.log" && pass || fail "no gradient-wait report"
awk -v a="$a" 'BEGIN { exit !(a >= 90) }' && pass || fail "2-rank toy accuracy '$a' < 90%"

train --nproc 2 --batch-size 8 --save "$WORK/b.st" > "$WORK/b.log" 2>&1 || { fail "--nproc 2 exited $?"; cat "$WORK/b.log"; }
cmp -s "$WORK/a.st" "$WORK/b.st" && pass || fail "--nproc 2 and mpirun -np 2 gave different weights"

train --nproc 2 --batch-size 8 --no-overlap --save "$WORK/c.st" > "$WORK/c.log" 2>&1 || fail "--no-overlap exited $?"
cmp -s "$WORK/a.st" "$WORK/c.st" && pass || fail "overlap auto/off gave different weights"
grep -Eq "^overlap auto: [0-9.]+ ms/step with overlap, [0-9.]+ ms/step without .*: (overlap kept|gradients reduced after backward from now on)" "$WORK/b.log" &&
  pass || { fail "--overlap auto did not report its trial"; cat "$WORK/b.log"; }
train --nproc 2 --batch-size 8 --overlap on --save "$WORK/c2.st" > "$WORK/c2.log" 2>&1 || fail "--overlap on exited $?"
cmp -s "$WORK/a.st" "$WORK/c2.st" && pass || fail "overlap auto/on gave different weights"
grep -q "^overlap auto" "$WORK/c2.log" && fail "--overlap on ran a trial" || pass
# A progress thread moving the buckets between layer boundaries: same bits (3 ranks, the ring), and says so.
train --nproc 3 --batch-size 8 --overlap on --allreduce ring --save "$WORK/p0.st" > "$WORK/p0.log" 2>&1 || fail "3 ranks, ring exited $?"
train --nproc 3 --batch-size 8 --overlap on --allreduce ring --progress-thread-us 100 --save "$WORK/p1.st" > "$WORK/p1.log" 2>&1 ||
  { fail "--progress-thread-us 100 exited $?"; cat "$WORK/p1.log"; }
cmp -s "$WORK/p0.st" "$WORK/p1.st" && pass || fail "a progress thread changed the weights"
grep -q "overlap on, a progress thread every 100 us" "$WORK/p1.log" && pass || { fail "no progress-thread report"; grep "gradient wait" "$WORK/p1.log"; }
train --nproc 2 --progress-thread-us -5 > "$WORK/p2.log" 2>&1
[ $? -ne 0 ] && grep -q "progress-thread-us" "$WORK/p2.log" && pass || { fail "--progress-thread-us -5 not refused"; cat "$WORK/p2.log"; }
train --nproc 2 --overlap sometimes > "$WORK/c3.log" 2>&1
[ $? -ne 0 ] && grep -q "overlap must be auto, on or off, got 'sometimes'" "$WORK/c3.log" && pass || fail "--overlap sometimes not refused"
train --nproc 2 --overlap on --no-overlap > "$WORK/c4.log" 2>&1
[ $? -ne 0 ] && grep -q "no-overlap contradicts --overlap on" "$WORK/c4.log" && pass || fail "--overlap on --no-overlap not refused"

train --batch-size 16 > "$WORK/d.log" 2>&1 || fail "1 rank x batch 16 exited $?"
d=$(acc_of "$WORK/d.log")
awk -v a="$a" -v d="$d" 'BEGIN { x = a - d; exit !(x <= 1 && x >= -1) }' && pass ||
  fail "2 ranks x batch 8 ($a%) vs 1 rank x batch 16 ($d%) differ by more than 1 point"

train --nproc 2 --batch-size 8 --allreduce mpi > "$WORK/e.log" 2>&1 || fail "--allreduce mpi exited $?"
e=$(acc_of "$WORK/e.log")
awk -v a="$a" -v e="$e" 'BEGIN { x = a - e; exit !(x <= 1 && x >= -1) }' && pass || fail "mpi all-reduce accuracy $e% vs ring $a%"

train --nproc 3 --batch-size 8 --drop-last --save "$WORK/f.st" > "$WORK/f.log" 2>&1 || { fail "--nproc 3 exited $?"; cat "$WORK/f.log"; }
"$RINGTRAIN" eval --checkpoint "$WORK/f.st" --data "$WORK/toy" > "$WORK/f_eval.log" 2>&1 || fail "eval exited $?"
[ -n "$(acc_of "$WORK/f.log")" ] && [ "$(acc_of "$WORK/f.log")" = "$(acc_of "$WORK/f_eval.log")" ] && pass ||
  fail "3-rank accuracy $(acc_of "$WORK/f.log")% != single-process eval $(acc_of "$WORK/f_eval.log")%"

"$MPIEXEC" -np 2 --oversubscribe "$RINGTRAIN" train --data "$WORK/toy" --nproc 3 > "$WORK/g.log" 2>&1
[ $? -ne 0 ] && grep -q "drop --nproc under mpirun" "$WORK/g.log" && pass || fail "--nproc 3 under mpirun -np 2 not refused"

echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
