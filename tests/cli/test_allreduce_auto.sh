#!/usr/bin/env bash
# --allreduce auto end to end: the start-up line naming each bucket's algorithm, --allreduce-calibration
# written when absent and read when present, clear errors for a bad choice or a bad file, and a killed
# then resumed run that keeps the checkpoint's plan - bit-identical to the uninterrupted run even when
# the resumed run's own calibration would choose otherwise. Also --allreduce hier across artificial hosts
# (RINGTRAIN_RANKS_PER_HOST) trains, and every --allreduce choice gives a deterministic run.
: "${TESTS_DIR:?run through CTest, which sets TESTS_DIR, RINGTRAIN and PYTHON}"
source "$TESTS_DIR/lib.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
"$PYTHON" "$TESTS_DIR/make_idx.py" good "$WORK/toy" --train 480 --test 96
job() {  # job NPROC extra args...: 2 epochs of 480 samples, global batch 24
  local n=$1; shift
  timeout 300 "$RINGTRAIN" train --nproc "$n" --data "$WORK/toy" --epochs 2 --batch-size $((24 / n)) --seed 5 \
    --log-every 0 --quiet --timeout 60 "$@"
}

expect_error "bogus --allreduce" "--allreduce: expected ring, hd, rd, hier, mpi or auto, got 'bogus'" \
  "$RINGTRAIN" train --data "$WORK/toy" --allreduce bogus
expect_error "bogus --allreduce under --nproc" "--allreduce: expected ring, hd, rd, hier, mpi or auto" \
  "$RINGTRAIN" train --nproc 2 --data "$WORK/toy" --allreduce bogus
expect_error "a calibration file without auto" "--allreduce-calibration needs --allreduce auto" \
  "$RINGTRAIN" train --data "$WORK/toy" --allreduce ring --allreduce-calibration "$WORK/c.json"

# auto is the default; it calibrates, writes the file, says what each bucket runs (rank 0, once).
job 2 --max-steps 3 --allreduce-calibration "$WORK/cal.json" > "$WORK/a1.log" 2>&1 || { fail "auto run exited $?"; cat "$WORK/a1.log"; }
[ -s "$WORK/cal.json" ] && pass || fail "--allreduce-calibration did not write $WORK/cal.json"
[ "$(grep -c '^all-reduce auto (calibrated in .*, written to '"$WORK"'/cal.json): bucket-kb 128: 0 [a-z]* (.* KiB), 1 [a-z]* (.* KiB)$' "$WORK/a1.log")" = 1 ] &&
  pass || { fail "no single plan line"; cat "$WORK/a1.log"; }
job 2 --max-steps 3 --allreduce-calibration "$WORK/cal.json" > "$WORK/a2.log" 2>&1 || fail "second auto run exited $?"
grep -q "^all-reduce auto (read from $WORK/cal.json): bucket-kb 128: " "$WORK/a2.log" && pass || { fail "the file was not read"; cat "$WORK/a2.log"; }
# A corrupt or mismatched file: an error naming it, non-zero exit, no training.
echo '{"format": "ringtrain-allreduce-calibration", "vers' > "$WORK/bad.json"
job 2 --allreduce-calibration "$WORK/bad.json" > "$WORK/bad.log" 2>&1 && fail "a corrupt calibration was accepted" ||
  { grep -q "$WORK/bad.json: not an all-reduce calibration" "$WORK/bad.log" && pass || { fail "corrupt file: no clear error"; cat "$WORK/bad.log"; }; }
job 3 --allreduce-calibration "$WORK/cal.json" > "$WORK/mis.log" 2>&1 && fail "a 2-rank calibration was used by 3 ranks" ||
  { grep -q "$WORK/cal.json: all-reduce calibration for 2 rank(s) on 1 host(s), this run has 3 on 1" "$WORK/mis.log" && pass ||
    { fail "mismatched file: no clear error"; cat "$WORK/mis.log"; }; }
grep -q "test accuracy" "$WORK/bad.log" "$WORK/mis.log" && fail "trained despite a bad calibration file" || pass

# Hand-made calibrations that pick one algorithm for every size: rd (A) and ring (B). At 3 ranks they
# add in different orders, so the weights tell which one ran.
model() { echo "{\"format\":\"ringtrain-allreduce-calibration\",\"version\":1,\"world_size\":3,\"hosts\":1,\"max_bytes\":2097152,\"algorithms\":{\"$1\":{\"alpha_s\":1e-05,\"beta_s_per_byte\":1e-10}}}"; }
model rd > "$WORK/A.json"
model ring > "$WORK/B.json"
job 3 --allreduce-calibration "$WORK/A.json" --save "$WORK/A.st" > "$WORK/A.log" 2>&1 || { fail "run A exited $?"; cat "$WORK/A.log"; }
grep -q "bucket-kb 128: 0 rd (.* KiB), 1 rd" "$WORK/A.log" && pass || { fail "A does not plan rd"; cat "$WORK/A.log"; }
job 3 --allreduce-calibration "$WORK/B.json" --save "$WORK/B.st" > "$WORK/B.log" 2>&1 || fail "run B exited $?"
! cmp -s "$WORK/A.st" "$WORK/B.st" && pass || fail "rd and ring gave the same bits: the resume check below would prove nothing"
# Killed after step 25 under plan A, resumed with plan B offered: the checkpoint's plan (A) wins.
RINGTRAIN_FAULT_KILL="1:25" job 3 --allreduce-calibration "$WORK/A.json" --checkpoint-dir "$WORK/ck" --checkpoint-every 7 > "$WORK/k.log" 2>&1
rc=$?
[ $rc -ne 0 ] && pass || fail "the killed run exited 0"
newest=$(ls "$WORK/ck"/step-*.safetensors | tail -1)
grep -aq '"trainer.allreduce_plan":"bucket-kb 128: 0 rd' "$newest" && pass || fail "no trainer.allreduce_plan in $newest"
grep -aq '"trainer.allreduce_calibration":' "$newest" && pass || fail "no trainer.allreduce_calibration in $newest"
job 3 --allreduce-calibration "$WORK/B.json" --checkpoint-dir "$WORK/ck" --checkpoint-every 7 --resume --save "$WORK/R.st" > "$WORK/R.log" 2>&1 ||
  { fail "resume exited $?"; tail -3 "$WORK/R.log"; }
grep -q "^resume: all-reduce plan from the checkpoint: bucket-kb 128: 0 rd (.* KiB), 1 rd" "$WORK/R.log" && pass || { fail "resume did not take the checkpoint's plan"; cat "$WORK/R.log"; }
cmp -s "$WORK/A.st" "$WORK/R.st" && pass ||
  fail "resumed auto run differs from the uninterrupted one ($("$PYTHON" "$TESTS_DIR/compare_weights.py" "$WORK/A.st" "$WORK/R.st"))"

# Every algorithm trains and is deterministic run to run; hier also across artificial hosts.
for a in hd rd hier; do
  job 3 --allreduce "$a" --max-steps 12 --save "$WORK/$a.1.st" > "$WORK/$a.log" 2>&1 || { fail "--allreduce $a exited $?"; tail -3 "$WORK/$a.log"; }
  job 3 --allreduce "$a" --max-steps 12 --save "$WORK/$a.2.st" > /dev/null 2>&1
  cmp -s "$WORK/$a.1.st" "$WORK/$a.2.st" && pass || fail "--allreduce $a is not deterministic"
done
RINGTRAIN_RANKS_PER_HOST=2 job 3 --allreduce hier --max-steps 12 --save "$WORK/hier2.st" > "$WORK/hier2.log" 2>&1 ||
  { fail "hier over 2 artificial hosts exited $?"; tail -3 "$WORK/hier2.log"; }
grep -q "all-reduce hier over 2 hosts" "$WORK/hier2.log" && pass || { fail "no all-reduce hier in the header"; cat "$WORK/hier2.log"; }
finish
