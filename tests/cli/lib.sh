# Shared helpers of the CLI tests: a scratch dir, and assertions that print what failed.
set -u
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
FAILED=0
PASSED=0

fail() { echo "FAIL: $*"; FAILED=$((FAILED + 1)); }
pass() { PASSED=$((PASSED + 1)); }

# expect_error "description" "expected substring" command...
# The command must exit non-zero, print exactly one line on stderr, containing the substring,
# and not crash (no signal exit codes).
expect_error() {
  local what=$1 needle=$2; shift 2
  "$@" >"$WORK/out" 2>"$WORK/err"
  local rc=$?
  local lines
  lines=$(grep -c . "$WORK/err")
  if [ $rc -eq 0 ]; then fail "$what: exit 0"; return; fi
  if [ $rc -ge 128 ]; then fail "$what: crashed with exit $rc"; cat "$WORK/err"; return; fi
  if [ "$lines" -ne 1 ]; then fail "$what: $lines lines on stderr"; cat "$WORK/err"; return; fi
  if ! grep -qF -- "$needle" "$WORK/err"; then fail "$what: stderr lacks '$needle':"; cat "$WORK/err"; return; fi
  pass
}

finish() {
  echo "$PASSED passed, $FAILED failed"
  [ "$FAILED" -eq 0 ]
}
