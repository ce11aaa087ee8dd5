#!/usr/bin/env bash
# The model zoo through the command: every model trains, saves, and evaluates from its checkpoint alone
# (eval takes the model from the metadata and repeats the training run's final accuracy); --threads 2
# trains too, so do bf16/fp16 and 2 ranks (bf16 gradients at half the bytes); bad --model names, another
# model's checkpoint, --tp on a zoo model and bench --model are refused in one line; a resnet18 run killed
# mid-epoch resumes bit for bit (batch-norm buffers included).
: "${TESTS_DIR:?run through CTest, which sets TESTS_DIR, RINGTRAIN and PYTHON}"
source "$TESTS_DIR/lib.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
"$PYTHON" "$TESTS_DIR/make_idx.py" good "$WORK/toy" --train 192 --test 64
T="$RINGTRAIN train --data $WORK/toy --epochs 1 --batch-size 16 --log-every 0 --quiet --seed 3"

for m in resnet18 mobilenet_v2 vit; do
  $T --model "$m" --max-steps 4 --save "$WORK/$m.st" > "$WORK/$m.log" 2>&1 || { fail "$m: train exited $?"; tail -3 "$WORK/$m.log"; continue; }
  grep -q "^ringtrain: $m (" "$WORK/$m.log" && pass || fail "$m: the header does not name the model"
  trained=$(sed -n 's/^test accuracy: //p' "$WORK/$m.log")
  "$RINGTRAIN" eval --checkpoint "$WORK/$m.st" --data "$WORK/toy" > "$WORK/$m.eval" 2>&1 || { fail "$m: eval exited $?"; cat "$WORK/$m.eval"; continue; }
  grep -q "^model: $m$" "$WORK/$m.eval" && pass || fail "$m: eval did not take the model from the checkpoint"
  evaluated=$(sed -n 's/^test accuracy: //p' "$WORK/$m.eval")
  [ -n "$trained" ] && [ "$trained" = "$evaluated" ] && pass || fail "$m: eval says '$evaluated', training said '$trained'"
  $T --model "$m" --max-steps 2 --threads 2 > "$WORK/$m.t2.log" 2>&1 && pass || { fail "$m --threads 2 exited $?"; tail -3 "$WORK/$m.t2.log"; }
done
grep -q "layer1.0.bn1.num_batches_tracked" "$WORK/resnet18.st" && pass || fail "resnet18: no batch-norm counter in the checkpoint"

# Mixed precision and data parallelism for the zoo: bf16 and fp16 (loss scaling) train; 2 ranks all-reduce
# resnet18's gradients, in bf16 at half the bytes of fp32; the memory report shows the batch-norm buffers.
$T --model vit --precision bf16 --max-steps 3 > "$WORK/bf16.log" 2>&1 && grep -q "^test accuracy: " "$WORK/bf16.log" && pass ||
  { fail "vit --precision bf16"; tail -3 "$WORK/bf16.log"; }
$T --model mobilenet_v2 --precision fp16 --max-steps 3 > "$WORK/fp16.log" 2>&1 && grep -q "^fp16 loss scaling: " "$WORK/fp16.log" && pass ||
  { fail "mobilenet_v2 --precision fp16"; tail -3 "$WORK/fp16.log"; }
D="$RINGTRAIN train --model resnet18 --data $WORK/toy --epochs 1 --batch-size 8 --log-every 0 --max-steps 2 --nproc 2"
$D --allreduce ring > "$WORK/dp32.log" 2>&1 || { fail "resnet18 on 2 ranks"; tail -3 "$WORK/dp32.log"; }
$D --grad-comm bf16 > "$WORK/dp16.log" 2>&1 || { fail "resnet18 on 2 ranks, bf16 gradients"; tail -3 "$WORK/dp16.log"; }
b32=$(sed -n 's/^all-reduce bytes per step: \([0-9]*\) sent.*/\1/p' "$WORK/dp32.log")
b16=$(sed -n 's/^all-reduce bytes per step: \([0-9]*\) sent.*/\1/p' "$WORK/dp16.log")
[ -n "$b32" ] && [ -n "$b16" ] && [ $((2 * b16)) -eq "$b32" ] && pass || fail "resnet18 gradient bytes: fp32 '$b32', bf16 '$b16'"
grep -q "non-trainable buffers (batch-norm statistics): 38560 bytes" "$WORK/dp32.log" && pass ||
  fail "resnet18's memory report does not show its 9,600 running statistics and 20 counters"

expect_error "unknown model" "--model 'resnet50' is not one of lenet5, resnet18, mobilenet_v2, vit" $T --model resnet50
expect_error "another model's checkpoint" "is a resnet18 checkpoint, not vit" \
  "$RINGTRAIN" eval --checkpoint "$WORK/resnet18.st" --data "$WORK/toy" --model vit
expect_error "init from another model" "is a vit checkpoint, not mobilenet_v2" $T --model mobilenet_v2 --init-from "$WORK/vit.st"
expect_error "--tp on a model it cannot split" "--tp: tensor parallelism splits lenet5's fully connected layers and vit's encoder, not --model resnet18" $T --model resnet18 --tp 2
expect_error "bench --model" "--model 'alexnet' is not one of" "$RINGTRAIN" bench --model alexnet --data "$WORK/toy"

# Kill-and-resume, resnet18: 2 epochs of 12 steps, a checkpoint every 5 steps, killed after step 8.
R="$RINGTRAIN train --model resnet18 --data $WORK/toy --epochs 2 --batch-size 16 --log-every 0 --quiet --seed 5"
$R --save "$WORK/full.st" > "$WORK/full.log" 2>&1 || { fail "uninterrupted resnet18 run"; tail -3 "$WORK/full.log"; }
RINGTRAIN_FAULT_KILL="0:8" $R --checkpoint-dir "$WORK/ck" --checkpoint-every 5 > /dev/null 2>&1
[ -f "$WORK/ck/step-00000005.safetensors" ] && pass || fail "no checkpoint before the kill"
$R --checkpoint-dir "$WORK/ck" --checkpoint-every 5 --resume --save "$WORK/resumed.st" > "$WORK/resumed.log" 2>&1 ||
  { fail "resume exited $?"; tail -3 "$WORK/resumed.log"; }
grep -q "resumed from .*step-00000005" "$WORK/resumed.log" && pass || fail "did not resume from step 5"
cmp -s "$WORK/full.st" "$WORK/resumed.st" && pass ||
  fail "resumed resnet18 differs from the uninterrupted run ($("$PYTHON" "$TESTS_DIR/compare_weights.py" "$WORK/full.st" "$WORK/resumed.st"))"
finish
