#!/usr/bin/env bash
# Issue 8, acceptance 2: N kill-and-resume trials (random rank, random step, 2-3 ranks, SIGKILL through
# RINGTRAIN_FAULT_KILL), each resumed and compared bit for bit with the uninterrupted run.
#   bench/kill_resume_trials.sh [BUILD_DIR] [TRIALS]     (default build, 20)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
RINGTRAIN=$PWD/$BUILD/ringtrain PYTHON=${PYTHON:-python3} TESTS_DIR=$PWD/tests/cli RESUME_TRIALS=${2:-20} \
  bash tests/cli/test_resume.sh
