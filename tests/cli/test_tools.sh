#!/usr/bin/env bash
# The user-facing tools: --metrics + plot, data expand (deterministic whatever the threads) + data show.
: "${TESTS_DIR:?run through CTest, which sets TESTS_DIR, RINGTRAIN and PYTHON}"
source "$TESTS_DIR/lib.sh"
"$PYTHON" "$TESTS_DIR/make_idx.py" good "$WORK/toy" --train 300 --test 100

is_png() { [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] && [ "$(stat -c %s "$1")" -gt 2000 ]; }

# Metrics: a line every log step and one per epoch with the test accuracy; plot draws them.
"$RINGTRAIN" train --data "$WORK/toy" --epochs 2 --batch-size 10 --log-every 5 --metrics "$WORK/m.jsonl" > "$WORK/train.log" 2>&1
[ "$(grep -c '"loss"' "$WORK/m.jsonl")" -eq 12 ] && pass || fail "expected 12 step lines in metrics, got $(grep -c '"loss"' "$WORK/m.jsonl")"
[ "$(grep -c '"test_accuracy"' "$WORK/m.jsonl")" -eq 2 ] && pass || fail "expected 2 epoch lines in metrics"
grep -q '"samples_per_s"' "$WORK/m.jsonl" && grep -q '"data_wait"' "$WORK/m.jsonl" && grep -q '"lr": 0.001' "$WORK/m.jsonl" && pass || fail "metrics lack samples_per_s, data_wait or lr"
"$RINGTRAIN" plot "$WORK/m.jsonl" -o "$WORK/curves.png" > /dev/null && is_png "$WORK/curves.png" && pass || fail "plot wrote no PNG"
echo '{"step": 1, "loss": }' > "$WORK/bad.jsonl"
expect_error "corrupt metrics" "$WORK/bad.jsonl:1" "$RINGTRAIN" plot "$WORK/bad.jsonl" -o "$WORK/x.png"
expect_error "missing metrics" "$WORK/none.jsonl" "$RINGTRAIN" plot "$WORK/none.jsonl"

# --quiet keeps only the epoch summaries and the final lines.
"$RINGTRAIN" train --data "$WORK/toy" --epochs 2 --batch-size 10 --log-every 5 --quiet > "$WORK/quiet.log" 2>&1
! grep -q "^epoch 1 batch" "$WORK/quiet.log" && grep -q "epoch 2 done" "$WORK/quiet.log" && pass || { fail "--quiet output"; cat "$WORK/quiet.log"; }

# data expand: same seed -> same bytes with 1 or 2 threads, another seed -> other bytes; train reads it.
"$RINGTRAIN" data expand --source "$WORK/toy" --count 2000 --seed 5 --threads 1 --out "$WORK/e1" > /dev/null 2>&1
"$RINGTRAIN" data expand --source "$WORK/toy" --count 2000 --seed 5 --threads 2 --out "$WORK/e2" > /dev/null 2>&1
"$RINGTRAIN" data expand --source "$WORK/toy" --count 2000 --seed 6 --threads 2 --out "$WORK/e3" > /dev/null 2>&1
cmp -s "$WORK/e1/train-images-idx3-ubyte" "$WORK/e2/train-images-idx3-ubyte" && pass || fail "expand depends on the thread count"
cmp -s "$WORK/e1/train-images-idx3-ubyte" "$WORK/e3/train-images-idx3-ubyte" && fail "expand ignores the seed" || pass
cmp -s "$WORK/toy/t10k-images-idx3-ubyte" "$WORK/e1/t10k-images-idx3-ubyte" && pass || fail "expand did not copy the real test split"
ls "$WORK/e1" | grep -q tmp && fail "expand left a temporary file" || pass
"$RINGTRAIN" train --data "$WORK/e1" --epochs 1 --batch-size 50 --log-every 0 > "$WORK/e.log" 2>&1 && grep -q "2000 train / 100 test" "$WORK/e.log" && pass || { fail "training on the expansion"; cat "$WORK/e.log"; }
expect_error "expand count 0" "--count" "$RINGTRAIN" data expand --source "$WORK/toy" --count 0 --out "$WORK/e4"

# data show: a PNG grid; bad indices are refused.
"$RINGTRAIN" data show "$WORK/e1/train-images-idx3-ubyte" --index 0-3,300,1999 --out "$WORK/grid.png" > /dev/null && is_png "$WORK/grid.png" && pass || fail "data show wrote no PNG"
expect_error "show index out of range" "2000" "$RINGTRAIN" data show "$WORK/e1/train-images-idx3-ubyte" --index 2000 --out "$WORK/g.png"
expect_error "show bad index" "--index" "$RINGTRAIN" data show "$WORK/e1/train-images-idx3-ubyte" --index 3-1 --out "$WORK/g.png"
expect_error "show labels file" "$WORK/e1/train-labels-idx1-ubyte: not an image file" "$RINGTRAIN" data show "$WORK/e1/train-labels-idx1-ubyte" --out "$WORK/g.png"
finish
