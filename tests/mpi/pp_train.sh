#!/usr/bin/env bash
# `ringtrain train --pp` (pipeline parallelism) end to end on a toy dataset (tests/cli/make_idx.py), each run
# against one process (or a grid without --pp) running the same global batch in the same micro-batches:
#  - lenet5 --pp 2: 1f1b with M = 4, gpipe with M = 3 (not a multiple of P), an uneven --pp-split (stage 0
#    = conv1 alone): every tensor of the saved checkpoint (weights, Adam state) bit-identical to one process's
#    --micro-batches run; the header names the grid, the memory report each stage and its micro-batches in
#    flight (1f1b: 2 and 1; gpipe: M), the end of the run the bubble beside (P-1)/(M+P-1);
#  - vit --pp 2 (1f1b M = 4; gpipe M = 2 cut inside an encoder layer) and resnet18 --pp 2 (batch norm, its
#    statistics in the checkpoint): bit-identical too;
#  - mobilenet_v2 --pp 2: bit-identical to one process;
#  - 4 ranks: dp 2 x pp 2 (lenet5, also with --shard-optimizer) bit-identical to dp 2 alone; vit pp 2 x tp 2
#    to tp 2 alone; those and a vit dp 2 x pp 2 checkpoint evaluated at 1 rank and at `eval --tp 2`: the
#    same predictions;
#  - the pp 2 checkpoint evaluated by one process (`ringtrain eval`): the test accuracy the run printed;
#  - kill-and-resume at pp 2 (a rank SIGKILLed at step 12, the job rerun with --resume) and a pp 2
#    checkpoint resumed by one process: both end bit-identical to the uninterrupted runs;
#  - a hung stage: the other ends the job through its watchdog within --timeout, naming the peer rank, the
#    pipeline group and the point-to-point operation; a killed one ends it too (mpirun's report); the same
#    for one rank of a pp 2 x tp 2 grid (its tensor-group peer names it and the all-reduce);
#  - the cut: balanced by node times measured at start (the default), or by the cost counts (--pp-balance
#    cost), named in the pipeline line; --pp-trace: the last 4 steps of both stages in the schedule's order
#    (tests/cli/check_pp_trace.py);
#  - bad --pp / --pp-split / --pp-balance / --pp-schedule: one-line errors before any work.
# Environment (as tests/cli): RINGTRAIN (binary), PYTHON, TESTS_DIR (tests/cli), MPIEXEC.
set -u
source "$TESTS_DIR/lib.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
MPIEXEC=${MPIEXEC:-mpirun}
"$PYTHON" "$TESTS_DIR/make_idx.py" good "$WORK/toy" --train 1920 --test 100 >/dev/null || { echo "make_idx failed"; exit 1; }
acc_of() { sed -n 's/^test accuracy: \([0-9.]*\)%$/\1/p' "$1"; }
# Plain weights (--ema 0) so --save writes what the optimizer reached; label smoothing and shifts stay on.
B="--data $WORK/toy --epochs 1 --seed 2 --ema 0 --log-every 10 --timeout 60"
train() {  # train NP LOG ARGS...: under mpirun (NP > 0) or as one process (NP = 0)
  local np=$1 log=$2; shift 2
  if [ "$np" = 0 ]; then "$RINGTRAIN" train $B "$@" > "$log" 2>&1
  else "$MPIEXEC" -np "$np" --oversubscribe --bind-to none "$RINGTRAIN" train $B "$@" > "$log" 2>&1; fi
  local rc=$?
  [ $rc = 0 ] || { fail "train (np $np) $* exited $rc"; grep "did not finish" "$log"; tail -5 "$log"; }
}
# Every tensor (weights, buffers, optim.*) of two checkpoints bit for bit; the metadata may differ.
same() { "$PYTHON" "$TESTS_DIR/same_tensors.py" "$1" "$2"; }
expect_same() {  # expect_same WHAT A B
  same "$2" "$3" && pass || fail "$1: checkpoints differ"
}

L="--model lenet5 --max-steps 20"
L48="$L --batch-size 48"
train 2 "$WORK/a.log" $L48 --pp 2 --micro-batches 4 --save "$WORK/a.st" --checkpoint-dir "$WORK/ck_a" --checkpoint-every 10 \
  --pp-trace "$WORK/a.trace.json"
train 0 "$WORK/b.log" $L48 --micro-batches 4 --save "$WORK/b.st"
expect_same "lenet5 pp 2 1f1b M=4 vs one process M=4" "$WORK/a.st" "$WORK/b.st"
grep -q "dp 1 x pp 2 x tp 1" "$WORK/a.log" && pass || fail "header does not name the dp 1 x pp 2 x tp 1 grid"
grep -q "^pipeline: 1f1b, 4 micro-batch(es) of 12; stage 0: nodes 0-.* of the measured time (" "$WORK/a.log" && pass ||
  fail "no pipeline line (the default --pp-balance time)"
grep -q "^pipeline stage 1 (world rank 1): .*1 micro-batch(es) in flight at most (1f1b" "$WORK/a.log" &&
  grep -q "^pipeline stage 0 (world rank 0): .*2 micro-batch(es) in flight at most" "$WORK/a.log" && pass ||
  { fail "memory report: 1f1b in flight"; grep "^pipeline" "$WORK/a.log"; }
grep -q "^pipeline bubble (1f1b, P=2, M=4): idle stage 0 [0-9.]*% of [0-9.]* ms, stage 1 [0-9.]*% of [0-9.]* ms a step (median step: [0-9.]*%, [0-9.]*%); ideal (P-1)/(M+P-1) = 20.0%" "$WORK/a.log" &&
  grep -q "^pipeline in flight: micro-batches at most stage 0 2 (bound 2), stage 1 1 (bound 1)" "$WORK/a.log" && pass ||
  { fail "bubble / in-flight lines"; grep "^pipeline" "$WORK/a.log"; }
grep "^pipeline bubble" "$WORK/a.log" | sed 's/^/  /'
grep -q "^pipeline trace: [0-9]* passes and waits of the last 4 step(s) written to" "$WORK/a.log" &&
  "$PYTHON" "$TESTS_DIR/check_pp_trace.py" "$WORK/a.trace.json" 2 4 4 && pass || fail "--pp-trace"
a=$(acc_of "$WORK/a.log")
[ -n "$a" ] && [ "$a" = "$(acc_of "$WORK/b.log")" ] && pass || fail "pp 2 printed $a%, one process $(acc_of "$WORK/b.log")%"
"$RINGTRAIN" eval --checkpoint "$WORK/a.st" --data "$WORK/toy" > "$WORK/a_eval.log" 2>&1 || fail "eval of the pp 2 checkpoint exited $?"
[ "$a" = "$(acc_of "$WORK/a_eval.log")" ] && pass || fail "pp 2 run printed $a%, one-process eval of its checkpoint $(acc_of "$WORK/a_eval.log")%"

train 2 "$WORK/g.log" $L48 --pp 2 --pp-schedule gpipe --pp-balance cost --micro-batches 3 --save "$WORK/g.st"
grep -q "^pipeline: gpipe, 3 micro-batch(es) of 16; stage 0: nodes 0-.* of the cost; stage 1" "$WORK/g.log" && pass ||
  fail "--pp-balance cost: no cost-balanced pipeline line"
train 0 "$WORK/g1.log" $L48 --micro-batches 3 --save "$WORK/g1.st"
expect_same "lenet5 pp 2 gpipe M=3 vs one process M=3" "$WORK/g.st" "$WORK/g1.st"
grep -q "^pipeline in flight: micro-batches at most stage 0 3 (bound 3), stage 1 3 (bound 3)" "$WORK/g.log" && pass ||
  { fail "gpipe holds M micro-batches"; grep "^pipeline" "$WORK/g.log"; }
train 2 "$WORK/u.log" $L48 --pp 2 --pp-split 1 --micro-batches 4 --save "$WORK/u.st"
grep -q "stage 0: nodes 0-0 (conv1 .. conv1)" "$WORK/u.log" && pass || fail "--pp-split 1 did not cut after conv1"
expect_same "lenet5 pp 2 split after conv1 vs one process" "$WORK/u.st" "$WORK/b.st"

# --precision bf16: the messages carry bf16 (half the bytes of the fp32 run's with the same cut: both
# balanced by cost, as measured times may cut elsewhere run to run); the stages then compute on
# rounded boundary values where one process keeps fp32, so the weights are close to, not equal to, one
# bf16 process's (per tensor ||a-b|| / ||a||, tests/cli/tensor_rel.py; bound 2e-2, measured below).
train 2 "$WORK/h.log" $L48 --pp 2 --pp-balance cost --micro-batches 4 --precision bf16 --save "$WORK/h.st"
bytes() { sed -n "s/^pipeline messages ($2): bytes sent a step stage 0 \([0-9]*\), stage 1 \([0-9]*\)$/\1 \2/p" "$1"; }
read -r f0 f1 <<<"$(bytes "$WORK/g.log" fp32)"; read -r h0 h1 <<<"$(bytes "$WORK/h.log" bf16)"
echo "  message bytes a step: fp32 $f0 $f1, bf16 $h0 $h1"
[ -n "$f0" ] && [ -n "$h0" ] && [ "$f0" -gt 0 ] && [ $((2 * h0)) = "$f0" ] && [ $((2 * h1)) = "$f1" ] && pass ||
  fail "bf16 messages are not half the fp32 bytes ($f0 $f1 vs $h0 $h1)"
train 0 "$WORK/h1.log" $L48 --micro-batches 4 --precision bf16 --save "$WORK/h1.st"
d=$("$PYTHON" "$TESTS_DIR/tensor_rel.py" "$WORK/h.st" "$WORK/h1.st")
echo "  bf16 pp 2 vs one bf16 process: worst ${d:-?}"
awk -v d="${d%% *}" 'BEGIN { exit !(d != "" && d <= 2e-2) }' && pass || fail "bf16 pp 2 vs one process: $d"

V="--model vit --batch-size 64 --max-steps 8"
train 2 "$WORK/v.log" $V --pp 2 --micro-batches 4 --save "$WORK/v.st"
train 0 "$WORK/v1.log" $V --micro-batches 4 --save "$WORK/v1.st"
expect_same "vit pp 2 1f1b M=4 vs one process M=4" "$WORK/v.st" "$WORK/v1.st"
# Node 6 is encoder layer 0's ln_2: a cut between the two residual halves of one layer.
train 2 "$WORK/vg.log" $V --pp 2 --pp-split 6 --pp-schedule gpipe --micro-batches 2 --save "$WORK/vg.st"
grep -q "stage 1: nodes 6-.*(encoder.layers.encoder_layer_0.ln_2 " "$WORK/vg.log" && pass || { fail "vit --pp-split 6"; grep "^pipeline:" "$WORK/vg.log"; }
train 0 "$WORK/vg1.log" $V --micro-batches 2 --save "$WORK/vg1.st"
expect_same "vit pp 2 gpipe M=2 cut inside a layer vs one process" "$WORK/vg.st" "$WORK/vg1.st"
R="--model resnet18 --batch-size 8 --max-steps 3"
train 2 "$WORK/r.log" $R --pp 2 --micro-batches 2 --save "$WORK/r.st"
train 0 "$WORK/r1.log" $R --micro-batches 2 --save "$WORK/r1.st"
expect_same "resnet18 pp 2 vs one process" "$WORK/r.st" "$WORK/r1.st"
MB="--model mobilenet_v2 --batch-size 8 --max-steps 3"  # inverted residuals: cuts between blocks
train 2 "$WORK/mb.log" $MB --pp 2 --micro-batches 4 --save "$WORK/mb.st"
train 0 "$WORK/mb1.log" $MB --micro-batches 4 --save "$WORK/mb1.st"
expect_same "mobilenet_v2 pp 2 vs one process" "$WORK/mb.st" "$WORK/mb1.st"

# 4 ranks (oversubscribed): the pipeline inside a bigger grid.
train 4 "$WORK/d4.log" $L --batch-size 24 --pp 2 --micro-batches 2 --allreduce ring --save "$WORK/d4.st"
grep -q "dp 2 x pp 2 x tp 1" "$WORK/d4.log" && pass || fail "header does not name dp 2 x pp 2"
train 2 "$WORK/d2.log" $L --batch-size 24 --micro-batches 2 --allreduce ring --save "$WORK/d2.st"
expect_same "lenet5 dp 2 x pp 2 vs dp 2" "$WORK/d4.st" "$WORK/d2.st"
# --shard-optimizer in the grid: each stage's Adam state sharded over its data-parallel group of 2.
train 4 "$WORK/s4.log" $L --batch-size 24 --pp 2 --micro-batches 2 --allreduce ring --shard-optimizer --save "$WORK/s4.st"
grep -q "^optimizer state sharded over 2 ranks" "$WORK/s4.log" && pass || fail "dp 2 x pp 2 --shard-optimizer: no sharding line"
expect_same "lenet5 dp 2 x pp 2 --shard-optimizer vs dp 2" "$WORK/s4.st" "$WORK/d2.st"
train 4 "$WORK/t4.log" --model vit --batch-size 32 --max-steps 4 --pp 2 --tp 2 --micro-batches 4 --save "$WORK/t4.st"
grep -q "dp 1 x pp 2 x tp 2" "$WORK/t4.log" && pass || fail "header does not name pp 2 x tp 2"
train 2 "$WORK/t2.log" --model vit --batch-size 32 --max-steps 4 --tp 2 --micro-batches 4 --save "$WORK/t2.st"
expect_same "vit pp 2 x tp 2 vs tp 2" "$WORK/t4.st" "$WORK/t2.st"
# Checkpoints written on a 4-rank grid evaluate anywhere with the same predictions: one process, and
# tensor-parallel (`mpirun -np 2 ringtrain eval --tp 2`: each rank holds its shard of the split layers).
train 4 "$WORK/v4.log" --model vit --batch-size 32 --max-steps 4 --pp 2 --micro-batches 2 --save "$WORK/v4.st"
grep -q "dp 2 x pp 2 x tp 1" "$WORK/v4.log" && pass || fail "header does not name dp 2 x pp 2 (vit)"
for st in d4 v4 t4; do
  "$RINGTRAIN" eval --checkpoint "$WORK/$st.st" --data "$WORK/toy" --predictions "$WORK/$st.p1" > "$WORK/$st.e1" 2>&1 &&
    "$MPIEXEC" -np 2 --oversubscribe --bind-to none "$RINGTRAIN" eval --tp 2 --checkpoint "$WORK/$st.st" --data "$WORK/toy" \
      --predictions "$WORK/$st.p2" > "$WORK/$st.e2" 2>&1 || { fail "eval of $st.st at 1 rank / --tp 2 failed"; tail -3 "$WORK/$st.e2"; continue; }
  [ "$(wc -l < "$WORK/$st.p1")" = 100 ] && cmp -s "$WORK/$st.p1" "$WORK/$st.p2" && [ "$(acc_of "$WORK/$st.e1")" = "$(acc_of "$WORK/$st.e2")" ] &&
    pass || fail "$st.st: predictions at 1 rank and at --tp 2 differ"
done
expect_error "eval --tp outside mpirun" "runs under mpirun" "$RINGTRAIN" eval --tp 2 --checkpoint "$WORK/v4.st" --data "$WORK/toy"
expect_error "eval --tp 3 for vit's 4 heads" "attention heads cannot be split evenly over 3" "$RINGTRAIN" eval --tp 3 --checkpoint "$WORK/v4.st" --data "$WORK/toy"

# Kill-and-resume at pp 2, and a pp 2 checkpoint resumed by one process.
RINGTRAIN_FAULT_KILL=1:12 "$MPIEXEC" -np 2 --oversubscribe "$RINGTRAIN" train $B $L48 --pp 2 --micro-batches 4 \
  --checkpoint-dir "$WORK/ck_k" --checkpoint-every 10 > "$WORK/k1.log" 2>&1 && fail "the killed job exited 0"
train 2 "$WORK/k2.log" $L48 --pp 2 --micro-batches 4 --checkpoint-dir "$WORK/ck_k" --checkpoint-every 10 --resume --save "$WORK/k.st"
grep -q "resumed from .*step-00000010" "$WORK/k2.log" && pass || { fail "pp 2 did not resume at step 10"; tail -3 "$WORK/k2.log"; }
expect_same "pp 2 kill-and-resume vs uninterrupted" "$WORK/k.st" "$WORK/a.st"
mkdir -p "$WORK/ck_1" && cp "$WORK/ck_a/step-00000010.safetensors" "$WORK/ck_1/"
train 0 "$WORK/o.log" $L48 --micro-batches 4 --checkpoint-dir "$WORK/ck_1" --resume --save "$WORK/o.st"
expect_same "pp 2 checkpoint resumed by one process vs uninterrupted" "$WORK/o.st" "$WORK/b.st"

# A hung stage (sleeps after step 3): the peer's watchdog names it; a killed one: mpirun's report.
for fault in hang kill; do
  var=RINGTRAIN_FAULT_HANG; [ $fault = kill ] && var=RINGTRAIN_FAULT_KILL
  start=$(date +%s)
  env $var=1:3 timeout 120 "$MPIEXEC" -np 2 --oversubscribe "$RINGTRAIN" train $B $L48 --pp 2 --micro-batches 4 \
    --timeout 3 > "$WORK/f.log" 2>&1
  rc=$? elapsed=$(( $(date +%s) - start ))
  want="point-to-point recv activation gradients\([0-9]+ bytes\) with rank 1 \(world rank 1\) did not finish within 3 s"
  [ $fault = kill ] && want="exited on signal 9|Killed|$want"
  echo "  $fault: rc $rc after ${elapsed}s: $(grep -Eo "$want" "$WORK/f.log" | head -1)"
  [ $rc != 0 ] && [ $rc != 124 ] && [ $elapsed -lt 40 ] && grep -Eq "$want" "$WORK/f.log" && pass ||
    { fail "pp 2 with a $fault stage: rc $rc after ${elapsed}s"; tail -5 "$WORK/f.log"; }
  [ $fault = hang ] && { grep -q "in the pipeline group (world rank 0)" "$WORK/f.log" && pass || fail "the message does not name the group"; }
done
# The same in a pp 2 x tp 2 grid (world rank 3: stage 1, tensor rank 1): its tensor-group peer names it and
# the all-reduce, the stage before names the point-to-point wait; a killed one: mpirun's report names it,
# and the ranks it then stops say what they were waiting in (the watchdog's SIGTERM report).
for fault in hang kill; do
  var=RINGTRAIN_FAULT_HANG; [ $fault = kill ] && var=RINGTRAIN_FAULT_KILL
  start=$(date +%s)
  env $var=3:3 timeout 120 "$MPIEXEC" -np 4 --oversubscribe --bind-to none "$RINGTRAIN" train $B --model vit --batch-size 32 \
    --max-steps 8 --pp 2 --tp 2 --micro-batches 4 --timeout 3 > "$WORK/f4.log" 2>&1
  rc=$? elapsed=$(( $(date +%s) - start ))
  want="in the tensor group \(world rank 2\): collective allreduce_sum\(float x [0-9]+, ring\) did not finish within 3 s \(--timeout\); a peer rank \(world rank 3\)|in the pipeline group \(world rank 1\): point-to-point recv [a-z ]+\([0-9]+ bytes\) with rank 1 \(world rank 3\) did not finish within 3 s"
  [ $fault = kill ] && want="process rank 3 with PID [0-9]+ on node [^ ]+ exited on signal 9"
  echo "  pp 2 x tp 2, $fault: rc $rc after ${elapsed}s: $(grep -Eo "$want" "$WORK/f4.log" | head -1)"
  [ $rc != 0 ] && [ $rc != 124 ] && [ $elapsed -lt 40 ] && grep -Eq "$want" "$WORK/f4.log" && pass ||
    { fail "pp 2 x tp 2 with a $fault rank: rc $rc after ${elapsed}s"; tail -5 "$WORK/f4.log"; }
  # Killed: the ranks mpirun then stops (SIGTERM) say what they were waiting in; one names world rank 3.
  stopped="stopped by the launcher \(signal 15: another rank of the job failed\) while waiting in [a-z -]+[a-z_ ]+\(.*world rank 3\)"
  if [ $fault = kill ]; then
    echo "  $(grep -Eo "$stopped" "$WORK/f4.log" | head -1)"
    grep -Eq "$stopped" "$WORK/f4.log" && pass || { fail "pp 2 x tp 2 kill: no rank says what it waited in"; grep "^ringtrain" "$WORK/f4.log"; }
  fi
done

expect_error "pp 3 of 2 ranks" "--pp 3 does not divide the world of 2" "$RINGTRAIN" train $B $L48 --pp 3 --nproc 2
expect_error "pp 8 for lenet5" "lenet5 has only 6 chain point(s)" "$RINGTRAIN" train $B $L48 --pp 8
expect_error "pp-split past the end" "--pp-split '99': node 99 does not start a later" "$RINGTRAIN" train $B $L48 --pp 2 --pp-split 99
expect_error "pp-split count" "gives 3 stage(s), --pp is 2" "$RINGTRAIN" train $B $L48 --pp 2 --pp-split 1,2
expect_error "pp-split inside a block" "is not a chain point" "$RINGTRAIN" train $B --model resnet18 --pp 2 --pp-split 5
expect_error "pp-split without pp" "need --pp 2 or more" "$RINGTRAIN" train $B $L48 --pp-split 1
expect_error "pp-trace without pp" "need --pp 2 or more" "$RINGTRAIN" train $B $L48 --pp-trace "$WORK/x.json"
expect_error "pp-balance value" "--pp-balance must be time or cost, got 'fast'" "$RINGTRAIN" train $B $L48 --pp 2 --pp-balance fast
expect_error "pp-balance with pp-split" "--pp-balance contradicts --pp-split" "$RINGTRAIN" train $B $L48 --pp 2 --pp-split 1 --pp-balance time
expect_error "pp-schedule" "--pp-schedule must be gpipe or 1f1b" "$RINGTRAIN" train $B $L48 --pp 2 --pp-schedule zb
finish
