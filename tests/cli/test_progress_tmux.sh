#!/usr/bin/env bash
# The progress bar as a person sees it: `ringtrain train` in a real terminal (tmux). While an epoch runs
# the pane shows one bar line that is redrawn in place (step/total, samples/s, loss, ETA); when the
# epoch ends the bar is replaced by the epoch's summary line, so the finished screen holds one summary a
# epoch and no leftover bars.
: "${TESTS_DIR:?run through CTest, which sets TESTS_DIR, RINGTRAIN and PYTHON}"
source "$TESTS_DIR/lib.sh"
command -v tmux > /dev/null || { echo "tmux is not installed (scripts/setup.sh --dev installs it)"; exit 1; }
"$PYTHON" "$TESTS_DIR/make_idx.py" good "$WORK/toy" --train 6000 --test 200
SOCK="$WORK/tmux.sock"
# Reference kernels and batch 4: slow enough (several seconds an epoch) to catch the bar mid-epoch.
tmux -S "$SOCK" new-session -d -x 160 -y 40 \
  "'$RINGTRAIN' train --data '$WORK/toy' --epochs 2 --batch-size 4 --isa ref; echo EXIT=\$?; sleep 30"
saw_bar=0
for i in $(seq 1 600); do
  screen=$(tmux -S "$SOCK" capture-pane -p)
  if echo "$screen" | grep -Eq "^epoch 1 \[#*\.+\] [0-9]+/1500 [0-9]+ samples/s loss [0-9.]+ ETA [0-9]+:[0-9]{2}"; then
    saw_bar=1
    # Redrawn in place: exactly one bar line on the screen at any time.
    [ "$(echo "$screen" | grep -c '^epoch 1 \[')" -eq 1 ] && pass || fail "more than one bar line on screen"
    break
  fi
  sleep 0.1
done
[ $saw_bar -eq 1 ] && pass || fail "never saw a progress bar mid-epoch"
for i in $(seq 1 900); do
  screen=$(tmux -S "$SOCK" capture-pane -p)
  echo "$screen" | grep -q "^EXIT=" && break
  sleep 0.2
done
tmux -S "$SOCK" kill-server 2> /dev/null
echo "$screen" | grep -q "^EXIT=0" && pass || { fail "train did not finish"; echo "$screen"; }
[ "$(echo "$screen" | grep -c '^epoch [12] done in')" -eq 2 ] && pass || { fail "expected two epoch summary lines"; echo "$screen"; }
echo "$screen" | grep -q '\[#' && { fail "a bar was left on the finished screen"; echo "$screen"; } || pass
echo "$screen" | grep -q '^test accuracy: ' && pass || fail "no final accuracy line"
finish
