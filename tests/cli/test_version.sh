#!/usr/bin/env bash
# `ringtrain --version`: the version of CMakeLists.txt's project(), the git commit, the compiler, the ISA
# levels this CPU runs and the one --isa auto picks (RINGTRAIN_ISA overriding it), the MPI library.
: "${TESTS_DIR:?run through CTest, which sets TESTS_DIR, RINGTRAIN and PYTHON}"
source "$TESTS_DIR/lib.sh"

"$RINGTRAIN" --version > "$WORK/v" 2> "$WORK/err" && [ ! -s "$WORK/err" ] && pass || { fail "--version failed"; cat "$WORK/err"; }
version=$(sed -n 's/^project(ringtrain VERSION \([0-9.]*\) .*/\1/p' "$SOURCE_DIR/CMakeLists.txt")
[ -n "$version" ] && grep -qE "^ringtrain ${version//./\\.} \(commit ([0-9a-f]{7,}(-dirty)?|unknown)\)$" "$WORK/v" && pass ||
  { fail "no 'ringtrain $version (commit ...)' line"; cat "$WORK/v"; }
grep -qE "^compiler: (GNU|Clang) [0-9]+\.[0-9]+" "$WORK/v" && pass || { fail "no compiler line"; cat "$WORK/v"; }
grep -qE "^kernels: this CPU runs ref scalar( avx2)?( avx512)? \(with(out)? AVX512_BF16\); --isa auto picks (scalar|avx2|avx512)$" "$WORK/v" &&
  pass || { fail "no kernels line"; cat "$WORK/v"; }
# Without RINGTRAIN_ISA, auto is the best level the CPU runs: the last one listed.
best=$(sed -n 's/^kernels: this CPU runs \([a-z0-9 ]*\) (.*/\1/p' "$WORK/v" | awk '{print $NF}')
grep -q "auto picks $best$" "$WORK/v" && pass || { fail "auto does not pick the best level '$best'"; cat "$WORK/v"; }
RINGTRAIN_ISA=scalar "$RINGTRAIN" --version | grep -q "auto picks scalar (RINGTRAIN_ISA=scalar)$" && pass || fail "RINGTRAIN_ISA not reported"
grep -qE "^MPI: .*[0-9]+\.[0-9]+" "$WORK/v" && pass || { fail "no MPI library line"; cat "$WORK/v"; }
[ "$(wc -l < "$WORK/v")" -eq 4 ] && pass || { fail "not 4 lines"; cat "$WORK/v"; }
# The top-level usage points at it.
"$RINGTRAIN" --help | grep -q -- "--version" && pass || fail "ringtrain --help does not mention --version"
finish
