#!/usr/bin/env bash
# Every link in README.md and docs/*.md stays inside the repository and names a file that exists
# (a fresh clone has nothing outside it: no ../shared, no web pages needed to read the docs).
source "$TESTS_DIR/lib.sh"
cd "$SOURCE_DIR" || exit 1
for doc in README.md docs/*.md; do
  dir=$(dirname "$doc")
  # Markdown links [text](target) and images ![alt](target); the target up to ')' or a space.
  while IFS= read -r target; do
    path=${target%%#*}
    case "$target" in
      *://*|mailto:*) fail "$doc links outside the repository: $target"; continue ;;
      '#'*) pass; continue ;;   # a heading of the same page
    esac
    resolved=$(realpath -m "$dir/$path")
    case "$resolved" in
      "$PWD"/*) ;;
      *) fail "$doc links outside the repository: $target"; continue ;;
    esac
    [ -e "$resolved" ] && pass || fail "$doc links to a missing file: $target"
  done < <(grep -oE '\]\([^) ]+' "$doc" | sed 's/^](//')
  # Bare web addresses are links too in most renderers.
  if grep -nE 'https?://' "$doc" > "$WORK/urls"; then
    while IFS= read -r line; do fail "$doc has a web address: $line"; done < "$WORK/urls"
  fi
done
[ "$PASSED" -gt 10 ] || fail "only $PASSED links checked: is the pattern still right?"
finish
