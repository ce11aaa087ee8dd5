#!/usr/bin/env bash
# Training across emulated hosts (tests/net/hosts.sh: network namespaces on a private bridge, mpirun through
# an rsh agent, Open MPI's TCP transport between them, --bind-to none) gives the same bits as the same job on
# one host over shared memory: same ranks x per-rank batch, same --allreduce.
#  - LeNet-5 on the toy digits (tests/cli/make_idx.py), one epoch of 2 ranks x batch 8 (38 steps), with the
#    ring and with MPI_Allreduce;
#  - resnet18, 3 steps of 2 ranks x batch 4 (45 MB of gradients a step);
#  - LeNet-5 with 2 ranks a host (4 ranks x batch 4): shared memory inside a host, TCP between hosts;
#  - the weights saved by each run are cmp-equal to the one-host run's; each host's veth carried at least the
#    gradient bytes of the run (steps x the reported "all-reduce bytes per step", the ring's figure) in each
#    direction, so the traffic really crossed the emulated network;
#  - --progress-thread-us auto (the default) starts the progress thread across hosts, not on one host.
# Skips (77) where namespaces cannot be made (not root, no iproute2, no veth/bridge): it says why.
# Environment (as tests/cli): RINGTRAIN, PYTHON, TESTS_DIR (tests/cli), MPIEXEC; RINGTRAIN_NET_HOSTS (2-4,
# default 2) runs the same on more hosts.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/hosts.sh"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
FAILED=0; PASSED=0
fail() { echo "FAIL: $*"; FAILED=$((FAILED + 1)); }
pass() { PASSED=$((PASSED + 1)); }
MPIEXEC=${MPIEXEC:-mpirun}
N=${RINGTRAIN_NET_HOSTS:-2}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PMIX_MCA_gds=hash
export HOSTS_TIMEOUT=300

if ! why=$(hosts_check); then echo "SKIP: cannot emulate hosts here: $why"; exit 77; fi
hosts_up "$N" "$WORK/hosts" || { echo "FAIL: could not set up $N emulated hosts"; exit 1; }
echo "$N emulated hosts: $(tr '\n' ' ' < "$WORK/hosts/hostfile")(namespaces ${HOSTS_PREFIX}*)"
"$PYTHON" "$TESTS_DIR/make_idx.py" good "$WORK/toy" --train 600 --test 200 >/dev/null || { echo "make_idx failed"; exit 1; }

steps_of() { sed -n 's/^trained \([0-9]*\) steps.*/\1/p' "$1"; }
bytes_of() { sed -n 's/^all-reduce bytes per step: \([0-9]*\) sent.*/\1/p' "$1"; }

# case NAME ARGS...: the training command across the hosts and on one host; same bits, bytes on the wire.
case_() {
  local name=$1 i; shift
  local args=(train --data "$WORK/toy" --seed 3 --log-every 0 --timeout 120 "$@")
  local sent0=() recv0=()
  for ((i = 0; i < N; i++)); do sent0[i]=$(hosts_bytes $i sent); recv0[i]=$(hosts_bytes $i received); done
  local t0 t1 t2
  t0=$(date +%s.%N)
  hosts_mpirun "$RINGTRAIN" "${args[@]}" --save "$WORK/$name.hosts.st" > "$WORK/$name.hosts.log" 2>&1 ||
    { fail "$name across $N hosts exited $?"; cat "$WORK/$name.hosts.log"; return; }
  t1=$(date +%s.%N)
  local one_host=("$MPIEXEC")  # ONE_HOST_SPLIT=k: the one-host run split into artificial hosts of k ranks
  [ -n "${ONE_HOST_SPLIT:-}" ] && one_host=(env RINGTRAIN_RANKS_PER_HOST="$ONE_HOST_SPLIT" "$MPIEXEC")
  "${one_host[@]}" -np $((N * ${HOSTS_RANKS_PER_HOST:-1})) --oversubscribe --bind-to none "$RINGTRAIN" "${args[@]}" --save "$WORK/$name.one.st" \
    > "$WORK/$name.one.log" 2>&1 || { fail "$name on one host exited $?"; cat "$WORK/$name.one.log"; return; }
  t2=$(date +%s.%N)
  echo "$name: $N hosts $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}') s, one host $(awk -v a="$t1" -v b="$t2" 'BEGIN {printf "%.1f", b - a}') s; $(grep -E '^(trained|gradient wait)' "$WORK/$name.hosts.log" | tr '\n' ' ')"
  grep -q "$((N * ${HOSTS_RANKS_PER_HOST:-1})) rank(s) x batch" "$WORK/$name.hosts.log" && pass || { fail "$name: the hosts' run is not $((N * ${HOSTS_RANKS_PER_HOST:-1})) ranks"; cat "$WORK/$name.hosts.log"; }
  # --progress-thread-us auto: a progress thread across hosts, none on one host (unless split into hosts).
  local auto="a progress thread every 500 us (auto: the group spans hosts)"
  grep -q "$auto" "$WORK/$name.hosts.log" &&
    if [ -n "${ONE_HOST_SPLIT:-}" ]; then grep -q "$auto" "$WORK/$name.one.log"; else ! grep -q "a progress thread" "$WORK/$name.one.log"; fi &&
    pass ||
    { fail "$name: --progress-thread-us auto did not start the thread across hosts only"; grep "rank(s) x batch" "$WORK/$name.hosts.log" "$WORK/$name.one.log"; }
  cmp -s "$WORK/$name.hosts.st" "$WORK/$name.one.st" && pass ||
    fail "$name: weights across $N hosts differ from one host's (max relative difference $("$PYTHON" "$TESTS_DIR/compare_weights.py" "$WORK/$name.hosts.st" "$WORK/$name.one.st"))"
  local steps bytes need sent recv
  steps=$(steps_of "$WORK/$name.hosts.log"); bytes=$(bytes_of "$WORK/$name.hosts.log")
  [ -n "$steps" ] && [ -n "$bytes" ] || { fail "$name: no steps or all-reduce bytes in the log"; cat "$WORK/$name.hosts.log"; return; }
  # The ring sends what the run reports, 2(W-1)/W x the gradient bytes a step; MPI_Allreduce's algorithms
  # and hier (whose slices cross between hosts once) differ, but under any of them each rank sends and receives at least the gradient bytes (its values must
  # reach the others, theirs must reach it): W / (2(W-1)) x the report.
  need=$((steps * bytes))
  local w=$((N * ${HOSTS_RANKS_PER_HOST:-1}))
  case " $* " in *" --allreduce mpi "* | *" --allreduce hier "*) need=$((steps * bytes * w / (2 * (w - 1)))) ;; esac
  for ((i = 0; i < N; i++)); do
    sent=$(($(hosts_bytes $i sent) - sent0[i])); recv=$(($(hosts_bytes $i received) - recv0[i]))
    echo "  ${HOSTS_NAMES[$i]}: sent $sent bytes, received $recv over its veth (at least $need: $steps steps x $bytes reported)"
    [ "$sent" -ge "$need" ] && [ "$recv" -ge "$need" ] && pass ||
      fail "$name: ${HOSTS_NAMES[$i]} sent $sent / received $recv bytes over its veth, less than the $need of the gradients"
  done
}

# The same algorithm on both sides (auto calibrates each run by itself and may choose another one).
case_ lenet5_ring --epochs 1 --batch-size 8 --allreduce ring
case_ lenet5_mpi --epochs 1 --batch-size 8 --allreduce mpi
case_ resnet18 --model resnet18 --max-steps 3 --batch-size 4 --allreduce ring
# Two ranks a host, shared memory inside each host and TCP between them (the usual real layout): the ring
# 0 -> 1 -> 2 -> 3 -> 0 crosses between hosts twice, each host sends one rank's ring share over its veth.
HOSTS_RANKS_PER_HOST=2 HOSTS_BTL=tcp,vader,self case_ lenet5_2x2 --epochs 1 --batch-size 4 --allreduce ring
# hier finds the 2 hosts by name (MPI_Comm_split_type deadlocked here) and gives the same bits as the one-host
# run split into the same 2 artificial hosts (RINGTRAIN_RANKS_PER_HOST=2, hier's test split).
ONE_HOST_SPLIT=2 HOSTS_RANKS_PER_HOST=2 HOSTS_BTL=tcp,vader,self case_ lenet5_2x2_hier --epochs 1 --batch-size 4 --allreduce hier

echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
