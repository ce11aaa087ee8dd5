#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) for the file parsers and runs each for
# FUZZ_SECONDS (default 60) from small valid seeds. Exits non-zero on any finding (crash, sanitizer
# report, timeout or out-of-memory), leaving the reproducer in build-fuzz/.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${FUZZ_SECONDS:-60}
OUT=build-fuzz
mkdir -p "$OUT"
FLAGS=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Isrc)
clang++ "${FLAGS[@]}" tests/fuzz/fuzz_idx.cpp src/ringtrain/data/idx.cpp src/ringtrain/data/byte_source.cpp \
  src/ringtrain/data/gzip_whole.cpp src/ringtrain/data/atomic_file.cpp -lz -ldeflate -o "$OUT/fuzz_idx"
clang++ "${FLAGS[@]}" tests/fuzz/fuzz_safetensors.cpp src/ringtrain/train/safetensors.cpp \
  src/ringtrain/core/tensor.cpp src/ringtrain/core/json_error.cpp -o "$OUT/fuzz_safetensors"
python3 tests/fuzz/make_seeds.py "$OUT/seeds"
for target in idx safetensors; do
  mkdir -p "$OUT/corpus_$target"
  echo "== fuzz_$target for ${SECONDS_EACH}s"
  status=0
  (cd "$OUT" && ./fuzz_$target -max_total_time="$SECONDS_EACH" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
     "corpus_$target" "seeds/$target") > "$OUT/fuzz_$target.log" 2>&1 || status=$?
  grep -E "^(Done|stat::number_of_executed_units|SUMMARY)" "$OUT/fuzz_$target.log" || true
  # A finding: a non-zero exit, and libFuzzer's crash-*/leak-*/timeout-*/oom-* reproducer.
  if [ "$status" -ne 0 ] || ls "$OUT"/crash-* "$OUT"/leak-* "$OUT"/timeout-* "$OUT"/oom-* >/dev/null 2>&1; then
    tail -30 "$OUT/fuzz_$target.log"
    echo "fuzz_$target: FINDING (exit $status), see $OUT/"; exit 1
  fi
done
echo "fuzz: no findings"
