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

# Option parsing (CLI11) names the option however it is wrong: unknown, missing value, a value for a flag,
# a stray positional, out of range (also where the value would wrap around when narrowed to int).
"$RINGTRAIN" train --data="$WORK/good" --epochs=1 --max-steps=2 --batch-size=10 --log-every=0 --quiet > "$WORK/eq.log" 2>&1 &&
  grep -q "^trained 2 steps" "$WORK/eq.log" && pass || { fail "--name=VALUE options"; cat "$WORK/eq.log"; }
expect_error "unknown option of a data subcommand" "--bogus" "$RINGTRAIN" data show "$WORK/good/train-images-idx3-ubyte" --bogus
expect_error "unknown short option" "-x" "$RINGTRAIN" eval -x
expect_error "missing value, --name= form" "--epochs" "$RINGTRAIN" train --data "$WORK/good" --epochs=
expect_error "missing value at the end" "--out" "$RINGTRAIN" data show "$WORK/good/train-images-idx3-ubyte" --out
expect_error "flag given a value" "quiet" "$RINGTRAIN" train --data "$WORK/good" --quiet=yes
expect_error "unexpected positional" "'stray'" "$RINGTRAIN" train --data "$WORK/good" stray
expect_error "epochs past int" "--epochs" "$RINGTRAIN" train --data "$WORK/good" --epochs 4294967297
expect_error "batch size past int" "--batch-size" "$RINGTRAIN" train --data "$WORK/good" --batch-size 4294967297
expect_error "threads 0 (--name=VALUE)" "--threads" "$RINGTRAIN" train --data "$WORK/good" --threads=0
expect_error "seed negative" "--seed" "$RINGTRAIN" train --data "$WORK/good" --seed -1
expect_error "eval batch size past int" "--batch-size" "$RINGTRAIN" eval --checkpoint "$WORK/x.st" --batch-size 4294967297
expect_error "show zoom past int" "--zoom" "$RINGTRAIN" data show "$WORK/good/train-images-idx3-ubyte" --zoom 4294967297
expect_error "expand rotation" "--rotation" "$RINGTRAIN" data expand --source "$WORK/good" --rotation 1e300 --out "$WORK/ex"
expect_error "expand translation" "--translation" "$RINGTRAIN" data expand --source "$WORK/good" --translation 40 --out "$WORK/ex"
expect_error "bench batch size" "--batch-size" "$RINGTRAIN" bench --data "$WORK/good" --batch-size 0
finish
