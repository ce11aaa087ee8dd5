# What the scripts that time the zoo's `ringtrain train` runs share (zoo_speed.sh, zoo_bf16.sh). Sourced after
# `set -euo pipefail`, it moves to the repository root, takes the build folder from the script's first argument
# (default build) into BUILD, stops unless $BUILD/ringtrain is built, and takes the settings the scripts share
# from the environment: MODELS (default "resnet18 mobilenet_v2 vit") and DATA (default digits). The script sets
# STEPS and PIN (the array its runs start under, e.g. taskset, flock) before calling train_rate.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD=${1:-build}
MODELS=${MODELS:-"resnet18 mobilenet_v2 vit"}
DATA=${DATA:-digits}
[[ -x $BUILD/ringtrain ]] || { echo "$(basename "$0"): $BUILD/ringtrain not built (cmake --build $BUILD --target ringtrain)" >&2; exit 1; }

cpu_model() { grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs; }
load_average() { cut -d' ' -f1-3 /proc/loadavg; }
# The median of the numbers on stdin, one a line (the mean of the middle two for an even count).
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

# train_rate MODEL [train options...]: samples/s of one run of `ringtrain train` under PIN, batch 64, STEPS
# steps of the plain recipe (no EMA, label smoothing, shifts or loader workers) on DATA: the trainer's own
# "trained N steps ... samples/s" (the whole step: loader, forward, backward, optimizer; the first step included).
# With TRAIN_LOG set, the run's whole output is also written to that file (e.g. for its "step time" line).
train_rate() {
  local model=$1
  shift
  local out
  out=$("${PIN[@]}" "$BUILD/ringtrain" train --model "$model" --data "$DATA" --epochs 1 --max-steps "$STEPS" \
    --batch-size 64 --ema 0 --label-smoothing 0 --augment-shift 0 --workers 0 --log-every 0 --quiet "$@" 2>&1) ||
    { echo "$out" >&2; return 1; }  # a failed run says why and stops the script (set -e: the caller's assignment fails)
  [[ -z ${TRAIN_LOG:-} ]] || echo "$out" > "$TRAIN_LOG"
  echo "$out" | sed -n 's/^trained .* (\([0-9.]*\) samples\/s.*/\1/p'
}

# step_part NAME FILE: the ms a step of part NAME (data, forward, loss, backward, optimizer, other) in the
# "step time" line of a ringtrain train output in FILE.
step_part() { sed -n "s/^step time .*[:,] $1 \([0-9.]*\).*/\1/p" "$2"; }
