#!/usr/bin/env bash
# Never lose a run: kill a rank (SIGKILL, via RINGTRAIN_FAULT_KILL) at random steps, resume, and get the
# uninterrupted run's weights bit for bit; --max-restarts does the same by itself; a corrupt newest
# checkpoint is skipped; resuming at another world size agrees within 1e-4.
: "${TESTS_DIR:?run through CTest, which sets TESTS_DIR, RINGTRAIN and PYTHON}"
source "$TESTS_DIR/lib.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
"$PYTHON" "$TESTS_DIR/make_idx.py" good "$WORK/toy" --train 600 --test 200
TRIALS=${RESUME_TRIALS:-5}
# One cached --allreduce auto calibration per world size: runs compared bit for bit must pick the same
# algorithm per bucket (a resumed run takes its plan from the checkpoint; an independent run, such as the
# uninterrupted baseline, from the file).
job() {  # job NPROC CKDIR extra args...: 3 epochs of 600 samples, global batch 24
  local n=$1 dir=$2; shift 2
  timeout 300 "$RINGTRAIN" train --nproc "$n" --data "$WORK/toy" --epochs 3 --batch-size $((24 / n)) --seed 11 \
    --log-every 0 --quiet --timeout 60 --checkpoint-dir "$dir" --checkpoint-every 7 \
    --allreduce-calibration "$WORK/allreduce-$n.json" "$@"
}

for n in 2 3; do
  job "$n" "$WORK/base$n" --save "$WORK/base$n.st" > "$WORK/base$n.log" 2>&1 || { fail "uninterrupted $n-rank run"; cat "$WORK/base$n.log"; }
done

RANDOM=${RESUME_SEED:-$$}
for t in $(seq 1 "$TRIALS"); do
  n=$((2 + RANDOM % 2)); rank=$((RANDOM % n)); step=$((1 + RANDOM % 74))
  start=$(date +%s)
  RINGTRAIN_FAULT_KILL="$rank:$step" job "$n" "$WORK/ck$t" > "$WORK/kill$t.log" 2>&1
  rc=$?
  [ $rc -ne 0 ] && [ $rc -ne 124 ] && pass || { fail "trial $t: killing rank $rank at step $step: exit $rc"; tail -3 "$WORK/kill$t.log"; }
  [ $(( $(date +%s) - start )) -lt 120 ] && pass || fail "trial $t: the dead rank was not detected in time"
  job "$n" "$WORK/ck$t" --resume --save "$WORK/t$t.st" > "$WORK/resume$t.log" 2>&1 || { fail "trial $t: resume exited $?"; tail -3 "$WORK/resume$t.log"; }
  cmp -s "$WORK/base$n.st" "$WORK/t$t.st" && pass ||
    fail "trial $t ($n ranks, rank $rank killed after step $step): resumed weights differ ($("$PYTHON" "$TESTS_DIR/compare_weights.py" "$WORK/base$n.st" "$WORK/t$t.st"))"
done

# --max-restarts: the launcher relaunches from the newest checkpoint by itself.
RINGTRAIN_FAULT_KILL="1:30" job 2 "$WORK/ckr" --max-restarts 2 --save "$WORK/r.st" > "$WORK/r.log" 2>&1 || { fail "--max-restarts run exited $?"; tail -5 "$WORK/r.log"; }
grep -q "restart 1 of 2 from the newest checkpoint" "$WORK/r.log" && pass || fail "no restart message"
cmp -s "$WORK/base2.st" "$WORK/r.st" && pass || fail "--max-restarts run differs from the uninterrupted one"
expect_error "--max-restarts without --nproc" "--max-restarts needs --nproc" "$RINGTRAIN" train --data "$WORK/toy" --max-restarts 1 --checkpoint-dir "$WORK/x"
expect_error "--resume without a dir" "--resume needs --checkpoint-dir" "$RINGTRAIN" train --data "$WORK/toy" --resume

# A truncated newest checkpoint: resume falls back to the previous one and says so.
newest=$(ls "$WORK/ckr"/step-*.safetensors | tail -1)
RINGTRAIN_FAULT_KILL="0:40" job 2 "$WORK/ckc" > /dev/null 2>&1
newest=$(ls "$WORK/ckc"/step-*.safetensors | tail -1)
truncate -s 1000 "$newest"
job 2 "$WORK/ckc" --resume --save "$WORK/c.st" > "$WORK/c.log" 2>&1 || fail "resume past a corrupt checkpoint exited $?"
grep -q "skipping checkpoint $newest" "$WORK/c.log" && pass || { fail "no message about the corrupt checkpoint"; cat "$WORK/c.log"; }
cmp -s "$WORK/base2.st" "$WORK/c.st" && pass || fail "resume past a corrupt checkpoint differs"

# Another world size: stop a 2-rank run at step 40, finish with 1 and with 4 ranks (same global batch).
# The sums then run in another order (per-rank batch sums, the 4-rank all-reduce picked by its own
# timing calibration) and Adam carries that rounding on for 35 steps: measured 1.6e-5 on AMD Zen 5 at 4
# ranks (AVX-512), under 1e-5 on Zen 3. A resume that lost state (Adam moments, the step count, the
# sampler's position) moves weights by ~lr = 1e-3 relative, so 1e-4 still tells the two apart.
RINGTRAIN_FAULT_KILL="0:40" job 2 "$WORK/ckw" > /dev/null 2>&1
for n in 1 4; do
  cp -r "$WORK/ckw" "$WORK/ckw$n"
  job "$n" "$WORK/ckw$n" --resume --save "$WORK/w$n.st" > "$WORK/w$n.log" 2>&1 || { fail "resume at $n ranks exited $?"; tail -3 "$WORK/w$n.log"; }
  d=$("$PYTHON" "$TESTS_DIR/compare_weights.py" "$WORK/base2.st" "$WORK/w$n.st")
  awk -v d="$d" 'BEGIN { exit !(d < 1e-4) }' && pass || fail "resumed at $n ranks: relative difference $d >= 1e-4"
done
# A read-only checkpoint directory (a read-only bind mount, which binds root too): a clear error before
# any training, and the checkpoint already there is untouched.
job 2 "$WORK/ro" --max-steps 7 > /dev/null 2>&1
before=$(md5sum "$WORK/ro/step-00000007.safetensors")
if unshare -m true 2> /dev/null; then
  expect_error "read-only checkpoint dir" "$WORK/ro: checkpoint directory is not writable" unshare -m sh -c \
    "mount --bind '$WORK/ro' '$WORK/ro' && mount -o remount,bind,ro '$WORK/ro' && '$RINGTRAIN' train --data '$WORK/toy' --checkpoint-dir '$WORK/ro' --resume --epochs 3"
  [ "$(md5sum "$WORK/ro/step-00000007.safetensors")" = "$before" ] && pass || fail "the previous checkpoint changed"
else
  echo "SKIPPED: read-only checkpoint dir (this sandbox cannot make a mount namespace)"
fi

# fp16: the loss scale and its growth tracker travel in the checkpoint, so a resumed run is identical.
F="$RINGTRAIN train --data $WORK/toy --epochs 2 --batch-size 16 --precision fp16 --log-every 0 --quiet"
$F --save "$WORK/h_full.st" > /dev/null 2>&1
$F --checkpoint-dir "$WORK/ckh" --checkpoint-every 10 --max-steps 30 > /dev/null 2>&1
$F --checkpoint-dir "$WORK/ckh" --resume --save "$WORK/h_res.st" > /dev/null 2>&1
cmp -s "$WORK/h_full.st" "$WORK/h_res.st" && pass || fail "a resumed fp16 run differs (loss scale not restored?)"
finish
