#!/usr/bin/env bash
# `ringtrain train --shard-optimizer` (ZeRO-1) end to end, on a toy dataset (tests/cli/make_idx.py):
#  - 2, 3 and 4 ranks: the saved checkpoint is bit-identical to the unsharded run's with --allreduce ring (the default recipe,
#    Adam + EMA), and each rank holds at most 1/W of the optimizer state + 1% (the printed shard line);
#  - fp16 with loss scaling (3 ranks), --tp 2 on 4 ranks (sharded over each dp group of 2), --micro-batches 4
#    (3 ranks) and resnet18 (2 ranks, a few steps): bit-identical too;
#  - a sharded periodic checkpoint holds the same whole tensors as an unsharded one, and a run resumed
#    from it on another world size (2 -> 3 ranks, sharded) ends bit-identical to the unsharded 2 -> 3 resume;
#  - the default: sharded at 2 ranks on one host under --allreduce auto, same bits as --no-shard-optimizer; whole at
#    3 ranks, with --allreduce-calibration or 16-bit traffic; both flags together refused;
#  - --shard-optimizer with 16-bit gradient traffic is refused with a one-line error.
# Environment (as tests/cli): RINGTRAIN (binary), PYTHON, TESTS_DIR (tests/cli, for make_idx.py), MPIEXEC.
set -u
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
FAILED=0; PASSED=0
fail() { echo "FAIL: $*"; FAILED=$((FAILED + 1)); }
pass() { PASSED=$((PASSED + 1)); }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
MPIEXEC=${MPIEXEC:-mpirun}
"$PYTHON" "$TESTS_DIR/make_idx.py" good "$WORK/toy" --train 600 --test 200 >/dev/null || { echo "make_idx failed"; exit 1; }
run() {  # run NP LOG ARGS...: ringtrain train on the toy data under mpirun
  local np=$1 log=$2; shift 2
  "$MPIEXEC" -np "$np" --oversubscribe "$RINGTRAIN" train --data "$WORK/toy" --seed 5 --batch-size 8 --log-every 0 \
    --timeout 120 --allreduce ring "$@" > "$log" 2>&1 || { fail "mpirun -np $np train $* exited $?"; tail -5 "$log"; }
}
# Every tensor (weights, buffers, optim.*) of two checkpoints bit for bit; the metadata may differ.
same_tensors() { "$PYTHON" "$TESTS_DIR/same_tensors.py" "$1" "$2" > /dev/null; }

for W in 2 3 4; do
  run "$W" "$WORK/p$W.log" --epochs 1 --save "$WORK/p$W.st"
  run "$W" "$WORK/s$W.log" --epochs 1 --save "$WORK/s$W.st" --shard-optimizer
  cmp -s "$WORK/p$W.st" "$WORK/s$W.st" && pass || fail "$W ranks: --shard-optimizer weights differ from unsharded"
  line=$(grep "^optimizer state sharded over $W ranks" "$WORK/s$W.log")
  share=$(echo "$line" | sed -n 's/.*the most on one rank \([0-9.]*\)% of the whole.*/\1/p')
  awk -v s="$share" -v w="$W" 'BEGIN { exit !(s != "" && s <= 100 / w + 1) }' && pass ||
    fail "$W ranks: optimizer share '$share'% above 1/W + 1% ($line)"
  grep -q "optimizer state sharded" "$WORK/p$W.log" && fail "$W ranks: unsharded run reports a shard" || pass
done

run 3 "$WORK/p16.log" --epochs 1 --precision fp16 --save "$WORK/p16.st"
run 3 "$WORK/s16.log" --epochs 1 --precision fp16 --save "$WORK/s16.st" --shard-optimizer
cmp -s "$WORK/p16.st" "$WORK/s16.st" && pass || fail "fp16, 3 ranks: sharded weights differ"

run 4 "$WORK/ptp.log" --epochs 1 --tp 2 --save "$WORK/ptp.st"
run 4 "$WORK/stp.log" --epochs 1 --tp 2 --save "$WORK/stp.st" --shard-optimizer
cmp -s "$WORK/ptp.st" "$WORK/stp.st" && pass || fail "--tp 2 on 4 ranks (dp 2): sharded weights differ"

run 2 "$WORK/pr.log" --model resnet18 --epochs 1 --max-steps 3 --batch-size 4 --save "$WORK/pr.st"
run 2 "$WORK/sr.log" --model resnet18 --epochs 1 --max-steps 3 --batch-size 4 --save "$WORK/sr.st" --shard-optimizer
cmp -s "$WORK/pr.st" "$WORK/sr.st" && pass || fail "resnet18, 2 ranks: sharded weights differ"

# Gradient accumulation: micro-batches' sums, then one sharded step (3 ranks, batch 8 in 4 micro-batches).
run 3 "$WORK/pmb.log" --epochs 1 --micro-batches 4 --save "$WORK/pmb.st"
run 3 "$WORK/smb.log" --epochs 1 --micro-batches 4 --save "$WORK/smb.st" --shard-optimizer
cmp -s "$WORK/pmb.st" "$WORK/smb.st" && pass || fail "--micro-batches 4, 3 ranks: sharded weights differ"

# Periodic checkpoint at step 20 on 2 ranks, then resumed on 3 (2 epochs of 38 steps in all).
for mode in plain shard; do
  flag=$([ $mode = shard ] && echo --shard-optimizer)
  run 2 "$WORK/$mode-a.log" --epochs 2 --max-steps 20 --checkpoint-dir "$WORK/ck-$mode" --checkpoint-every 20 $flag
  run 3 "$WORK/$mode-b.log" --epochs 2 --checkpoint-dir "$WORK/ck-$mode" --resume --save "$WORK/$mode-resumed.st" $flag
  grep -q "^resumed from .* (written by 2 rank(s))" "$WORK/$mode-b.log" && pass || fail "$mode: no resume from the 2-rank checkpoint"
done
first=$(ls "$WORK/ck-shard" | head -1)
same_tensors "$WORK/ck-plain/$first" "$WORK/ck-shard/$first" && pass ||
  fail "sharded periodic checkpoint $first does not hold the unsharded run's tensors"
cmp -s "$WORK/plain-resumed.st" "$WORK/shard-resumed.st" && pass || fail "2 -> 3 rank resume: sharded differs from unsharded"

# The default (neither flag, --allreduce auto): sharded with 2 ranks on one host, the same bits as the whole
# state kept (--no-shard-optimizer); whole with 3 ranks, and whenever the user named an algorithm (above).
auto() {  # auto NP LOG ARGS...: as run, but with the default --allreduce auto
  local np=$1 log=$2; shift 2
  "$MPIEXEC" -np "$np" --oversubscribe "$RINGTRAIN" train --data "$WORK/toy" --seed 5 --batch-size 8 --log-every 0 \
    --timeout 120 --epochs 1 "$@" > "$log" 2>&1 || { fail "mpirun -np $np train (auto) $* exited $?"; tail -5 "$log"; }
}
auto 2 "$WORK/a2.log" --save "$WORK/a2.st"
auto 2 "$WORK/n2.log" --save "$WORK/n2.st" --no-shard-optimizer
grep -q "optimizer state sharded (auto: 2 data-parallel ranks on one host" "$WORK/a2.log" && pass ||
  { fail "2 ranks, default: no automatic sharding"; head -3 "$WORK/a2.log"; }
grep -q "^optimizer state sharded over 2 ranks" "$WORK/a2.log" && pass || fail "2 ranks, default: no shard report"
grep -q "optimizer state sharded" "$WORK/n2.log" && fail "--no-shard-optimizer sharded" || pass
grep -q "^all-reduce auto (" "$WORK/n2.log" && pass || fail "--no-shard-optimizer: no all-reduce plan"
cmp -s "$WORK/a2.st" "$WORK/n2.st" && pass || fail "2 ranks: the automatic sharding changed the weights"
cmp -s "$WORK/a2.st" "$WORK/p2.st" && pass || fail "2 ranks: auto differs from --allreduce ring"
auto 3 "$WORK/a3.log"
grep -q "optimizer state sharded" "$WORK/a3.log" && fail "3 ranks, default: sharded" || pass
auto 2 "$WORK/cal.log" --allreduce-calibration "$WORK/cal.json"
grep -q "optimizer state sharded" "$WORK/cal.log" && fail "--allreduce-calibration at 2 ranks: sharded, the file unused" || pass
[ -s "$WORK/cal.json" ] && pass || fail "--allreduce-calibration at 2 ranks wrote no file"
"$MPIEXEC" -np 2 --oversubscribe "$RINGTRAIN" train --data "$WORK/toy" --shard-optimizer --no-shard-optimizer > "$WORK/both.log" 2>&1
[ $? -ne 0 ] && grep -q "shard-optimizer contradicts --no-shard-optimizer" "$WORK/both.log" && pass ||
  { fail "--shard-optimizer --no-shard-optimizer not refused"; cat "$WORK/both.log"; }
# 16-bit gradient traffic keeps the whole state by default (no reduce-scatter), without an error.
auto 2 "$WORK/b16.log" --grad-comm bf16 --max-steps 3
grep -q "optimizer state sharded" "$WORK/b16.log" && fail "--grad-comm bf16 at 2 ranks: sharded" || pass

"$MPIEXEC" -np 2 --oversubscribe "$RINGTRAIN" train --data "$WORK/toy" --shard-optimizer --grad-comm bf16 > "$WORK/bad.log" 2>&1
[ $? -ne 0 ] && grep -q "shard-optimizer needs --grad-comm fp32" "$WORK/bad.log" && pass ||
  { fail "--shard-optimizer --grad-comm bf16 not refused"; cat "$WORK/bad.log"; }

echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
