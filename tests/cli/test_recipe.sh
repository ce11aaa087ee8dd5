#!/usr/bin/env bash
# The training recipe (docs/RECIPE.md) end to end: --lr-schedule/--lr-decay-epochs/--lr-min-factor set the
# logged rate per step; --ema evaluates and --save writes the averaged weights (eval agrees; the checkpoint's
# optim.ema equals them); with the whole default recipe (label smoothing, EMA, 1-px shifts) plus a schedule,
# a killed run resumes bit for bit, 2 ranks x batch 12 equal 1 rank x batch 24, --tp 2 and --precision
# bf16/fp16 train; bad values are one-line errors.
: "${TESTS_DIR:?run through CTest, which sets TESTS_DIR, RINGTRAIN and PYTHON}"
source "$TESTS_DIR/lib.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
"$PYTHON" "$TESTS_DIR/make_idx.py" good "$WORK/toy" --train 600 --test 200
accuracy() { sed -n 's/^test accuracy: \([0-9.]*\)%$/\1/p' "$1"; }

# The defaults are the recipe, and say so.
"$RINGTRAIN" train --help > "$WORK/help" 2>&1
for o in "label-smoothing 0.2" "ema 0.99" "augment-shift 1" "lr-schedule constant"; do
  grep -q -- "^  --${o% *} .*(default: ${o#* })$" "$WORK/help" && pass || { fail "help lacks --${o% *} with default ${o#* }"; cat "$WORK/help"; }
done

# The rate per step from the metrics: step decay over the last epoch of 3 (25 steps an epoch).
"$RINGTRAIN" train --data "$WORK/toy" --epochs 3 --batch-size 24 --log-every 1 --quiet --lr-schedule step \
  --lr-decay-epochs 1 --lr-min-factor 0.1 --metrics "$WORK/m.jsonl" > "$WORK/m.log" 2>&1 || { fail "step schedule run"; cat "$WORK/m.log"; }
"$PYTHON" - "$WORK/m.jsonl" <<'EOF' && pass || fail "step schedule: wrong rates in the metrics"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if '"lr"' in l]
assert len(recs) == 75, len(recs)
for r in recs:
    want = 1e-3 if r["epoch"] < 3 else 1e-4
    assert abs(r["lr"] - want) < 1e-6 * want, (r["step"], r["lr"], want)
EOF
"$RINGTRAIN" train --data "$WORK/toy" --epochs 2 --batch-size 24 --log-every 1 --quiet --lr-schedule linear \
  --metrics "$WORK/l.jsonl" > "$WORK/l.log" 2>&1 || fail "linear schedule run"
"$PYTHON" - "$WORK/l.jsonl" <<'EOF' && pass || fail "linear schedule: wrong rates in the metrics"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if '"lr"' in l]
assert len(recs) == 50, len(recs)
for i, r in enumerate(recs):  # step i starts at position i * 24 / 600 epochs of 2
    want = 1e-3 * (1 - min(1.0, i * 24 / 600) / 2 if r["epoch"] == 1 else 1 - (1 + (i - 25) * 24 / 600) / 2)
    assert abs(r["lr"] - want) < 1e-6 * 1e-3, (i, r["lr"], want)
EOF

# --ema: --save holds the averaged weights, which eval scores as train did; its optim.ema equals them.
run() { "$RINGTRAIN" train --data "$WORK/toy" --epochs 2 --batch-size 16 --seed 3 --log-every 0 --quiet "$@"; }
run --save "$WORK/ema.st" > "$WORK/ema.log" 2>&1 || { fail "default recipe run"; cat "$WORK/ema.log"; }
acc=$(accuracy "$WORK/ema.log")
awk -v a="$acc" 'BEGIN { exit !(a >= 95) }' && pass || fail "default recipe toy accuracy '$acc' < 95%"
"$RINGTRAIN" eval --checkpoint "$WORK/ema.st" --data "$WORK/toy" > "$WORK/eval.log" 2>&1
[ "$(accuracy "$WORK/eval.log")" = "$acc" ] && pass || fail "eval of the saved EMA weights: $(accuracy "$WORK/eval.log")% != train's $acc%"
"$PYTHON" - "$WORK/ema.st" <<'EOF' && pass || fail "optim.ema.* do not equal the saved weights"
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
assert h["__metadata__"]["optim.state"] == "exp_avg,exp_avg_sq,ema", h["__metadata__"]["optim.state"]
get = lambda t: raw[8 + n + h[t]["data_offsets"][0]: 8 + n + h[t]["data_offsets"][1]]
names = [k for k in h if k != "__metadata__" and not k.startswith("optim.")]
assert len(names) == 10 and all(get(k) == get("optim.ema." + k) for k in names)
EOF
run --ema 0 --save "$WORK/raw.st" > /dev/null 2>&1
cmp -s "$WORK/ema.st" "$WORK/raw.st" && fail "--ema 0 saved the same weights" || pass
run --label-smoothing 0 --save "$WORK/nols.st" > /dev/null 2>&1
cmp -s "$WORK/ema.st" "$WORK/nols.st" && fail "--label-smoothing 0 saved the same weights" || pass

# The whole recipe plus a schedule: kill mid-epoch, resume, same bits; ranks x batch = 1 x global batch.
job() {  # job NPROC CKDIR extra...: 3 epochs, global batch 24
  local n=$1 dir=$2; shift 2
  timeout 300 "$RINGTRAIN" train --nproc "$n" --data "$WORK/toy" --epochs 3 --batch-size $((24 / n)) --seed 5 \
    --log-every 0 --quiet --timeout 60 --lr-schedule cosine --lr-decay-epochs 2 --lr-min-factor 0.05 \
    --checkpoint-dir "$dir" --checkpoint-every 7 "$@"
}
job 1 "$WORK/b1" --save "$WORK/b1.st" > "$WORK/b1.log" 2>&1 || { fail "1-rank recipe run"; cat "$WORK/b1.log"; }
RINGTRAIN_FAULT_KILL="0:37" job 1 "$WORK/k1" > /dev/null 2>&1
[ -e "$WORK/k1/step-00000035.safetensors" ] && [ ! -e "$WORK/k1/step-00000042.safetensors" ] && pass || fail "the 1-rank run was not killed at step 37"
job 1 "$WORK/k1" --resume --save "$WORK/r1.st" > "$WORK/r1.log" 2>&1 || { fail "1-rank resume"; cat "$WORK/r1.log"; }
cmp -s "$WORK/b1.st" "$WORK/r1.st" && pass || fail "1-rank resume differs: $("$PYTHON" "$TESTS_DIR/compare_weights.py" "$WORK/b1.st" "$WORK/r1.st")"
job 2 "$WORK/b2" --save "$WORK/b2.st" > "$WORK/b2.log" 2>&1 || { fail "2-rank recipe run"; cat "$WORK/b2.log"; }
d=$("$PYTHON" "$TESTS_DIR/compare_weights.py" "$WORK/b1.st" "$WORK/b2.st")
awk -v d="$d" 'BEGIN { exit !(d < 1e-5) }' && pass || fail "2 ranks x 12 vs 1 rank x 24: relative difference $d >= 1e-5"
RINGTRAIN_FAULT_KILL="1:30" job 2 "$WORK/k2" > /dev/null 2>&1
job 2 "$WORK/k2" --resume --save "$WORK/r2.st" > "$WORK/r2.log" 2>&1 || { fail "2-rank resume"; cat "$WORK/r2.log"; }
cmp -s "$WORK/b2.st" "$WORK/r2.st" && pass || fail "2-rank resume differs: $("$PYTHON" "$TESTS_DIR/compare_weights.py" "$WORK/b2.st" "$WORK/r2.st")"
# Resuming a run written with another --ema is refused by the checkpoint (one kept state buffer more).
RINGTRAIN_FAULT_KILL="0:20" job 1 "$WORK/k3" > /dev/null 2>&1
job 1 "$WORK/k3" --resume --ema 0 > "$WORK/k3.log" 2>&1
grep -q "optimizer state is 'exp_avg,exp_avg_sq,ema' but this optimizer keeps 'exp_avg,exp_avg_sq'" "$WORK/k3.log" && pass ||
  { fail "resume with --ema 0 from an EMA checkpoint: no message"; cat "$WORK/k3.log"; }

# Tensor parallelism averages its shards: --tp 2 (dp 1) saves what 1 rank does, to rounding.
timeout 300 "$RINGTRAIN" train --nproc 2 --tp 2 --data "$WORK/toy" --epochs 2 --batch-size 16 --seed 3 --log-every 0 --quiet \
  --timeout 60 --save "$WORK/tp.st" > "$WORK/tp.log" 2>&1 || { fail "--tp 2 recipe run"; cat "$WORK/tp.log"; }
d=$("$PYTHON" "$TESTS_DIR/compare_weights.py" "$WORK/ema.st" "$WORK/tp.st")
awk -v d="$d" 'BEGIN { exit !(d < 1e-4) }' && pass || fail "--tp 2 vs 1 rank: relative difference $d >= 1e-4"

# Mixed precision with the recipe (the average is kept in fp32 beside the master weights): learns, deterministic.
for p in bf16 fp16; do
  run --precision "$p" --save "$WORK/$p.st" > "$WORK/$p.log" 2>&1 || { fail "$p recipe run"; cat "$WORK/$p.log"; }
  a=$(accuracy "$WORK/$p.log")
  awk -v a="$a" 'BEGIN { exit !(a >= 95) }' && pass || fail "$p recipe toy accuracy '$a' < 95%"
  run --precision "$p" --save "$WORK/$p.again.st" > /dev/null 2>&1
  cmp -s "$WORK/$p.st" "$WORK/$p.again.st" && pass || fail "$p recipe: same seed gave different weights"
done

expect_error "bad schedule" "--lr-schedule" "$RINGTRAIN" train --data "$WORK/toy" --lr-schedule exponential
expect_error "bad min factor" "--lr-min-factor" "$RINGTRAIN" train --data "$WORK/toy" --lr-schedule linear --lr-min-factor 2
expect_error "bad decay epochs" "--lr-decay-epochs" "$RINGTRAIN" train --data "$WORK/toy" --lr-decay-epochs -1
expect_error "ema 1" "--ema" "$RINGTRAIN" train --data "$WORK/toy" --ema 1
expect_error "negative ema" "--ema" "$RINGTRAIN" train --data "$WORK/toy" --ema -0.5
expect_error "label smoothing 1" "--label-smoothing" "$RINGTRAIN" train --data "$WORK/toy" --label-smoothing 1
finish
