# Emulated hosts on one machine, for multi-host tests and benchmarks (sourced; bash).
#
# Each host is a network namespace with one interface, eth0, on a private address; a veth pair joins it to
# a bridge that lives in a namespace of its own (the "switch"), which is also the login node mpirun runs
# on. Nothing is added to the calling namespace's networking: the only names outside the namespaces are
# the namespaces themselves (/run/netns/rt-<pid>-*), unique per process, so parallel runs (ctest -j) never
# clash and may all use the same addresses.
#
#     switch namespace rt-<pid>-sw: br0 10.213.0.254/24 (mpirun, the launcher) + p0..p{N-1} on br0
#                                    |                     |
#     host namespace rt-<pid>-h0: eth0 10.213.0.1    rt-<pid>-h1: eth0 10.213.0.2    ... (hostA, hostB, ...)
#
# mpirun reaches a host through an rsh agent ($HOSTS_DIR/agent: `ip netns exec <namespace> sh -c "<command>"`
# for the host named, ssh's semantics, in a UTS namespace of its own whose hostname is the host's name), the
# way it reaches a real machine through ssh; the hosts share this machine's filesystem, so the same binary
# path and data are on every host.
#
#   hosts_check            0 if namespaces, veth pairs and bridges can be made here; else prints why, returns 1
#   hosts_up N DIR         N hosts (2-4) hostA..: namespaces, links, addresses; DIR gets agent and hostfile;
#                          sets an EXIT trap (keeping the caller's) that takes everything down
#   hosts_mpirun ARGS...   mpirun from the switch namespace: $HOSTS_RANKS_PER_HOST ranks a host (default 1),
#                          btl $HOSTS_BTL (default tcp,self: TCP even between ranks of one host; tcp,vader,self
#                          for shared memory inside a host), --bind-to none; killed after $HOSTS_TIMEOUT s (600)
#   hosts_bytes I sent|received   bytes host I has sent / received over its veth so far (counted at the switch)
#   hosts_rate RATE        tbf rate limit (e.g. 1gbit) on every veth, both directions
#   hosts_down             kills what still runs in the namespaces, deletes them (their veths and bridge go too)
#
# Needs root (or CAP_NET_ADMIN + CAP_SYS_ADMIN), iproute2 (ip, tc) and the kernel's veth and bridge drivers.

HOSTS_PREFIX=rt-$$-
HOSTS_SUBNET=10.213.0
HOSTS_NAMES=(hostA hostB hostC hostD)
HOSTS_N=0
HOSTS_DIR=
HOSTS_MADE=()

# Namespaces left by a run that was killed (SIGKILL skips the EXIT trap): rt-<pid>-* whose pid is gone.
hosts__reap_stale() {
  local ns pid
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^rt-[0-9]+-(sw|h[0-9]|probe)$'); do
    pid=${ns#rt-}; pid=${pid%%-*}
    kill -0 "$pid" 2>/dev/null && continue
    hosts__kill_in "$ns"
    ip netns del "$ns" 2>/dev/null
  done
}

# Ends the processes still inside namespace $1 (mpirun, orted, ranks of a failed run), by pid.
hosts__kill_in() {
  local pids
  pids=$(ip netns pids "$1" 2>/dev/null) || return 0
  [ -n "$pids" ] || return 0
  kill $pids 2>/dev/null
  sleep 0.5
  pids=$(ip netns pids "$1" 2>/dev/null)
  [ -n "$pids" ] && kill -9 $pids 2>/dev/null
  return 0
}

hosts_check() {
  if ! command -v ip >/dev/null 2>&1; then echo "no 'ip' command (Debian package iproute2)"; return 1; fi
  local probe=${HOSTS_PREFIX}probe err who=
  [ "$(id -u)" -eq 0 ] || who=" (not root: namespaces need CAP_NET_ADMIN and CAP_SYS_ADMIN)"
  if ! err=$(ip netns add "$probe" 2>&1); then echo "cannot create a network namespace$who: $err"; return 1; fi
  if ! err=$( { ip netns exec "$probe" unshare --uts sh -c "echo probe > /proc/sys/kernel/hostname" && ip -n "$probe" link add br0 type bridge &&
               ip -n "$probe" link add p0 type veth peer name p1; } 2>&1); then
    ip netns del "$probe" 2>/dev/null
    echo "cannot enter a namespace or make a bridge / veth pair in it$who: $err"; return 1
  fi
  ip netns del "$probe"
  return 0
}

hosts_down() {
  local ns
  for ns in "${HOSTS_MADE[@]}"; do
    hosts__kill_in "$ns"
    ip netns del "$ns" 2>/dev/null
  done
  HOSTS_MADE=()
  return 0
}

hosts_up() {
  local n=$1 i ns sw=${HOSTS_PREFIX}sw
  HOSTS_DIR=$2
  [ "$n" -ge 2 ] && [ "$n" -le ${#HOSTS_NAMES[@]} ] || { echo "hosts_up: 2-${#HOSTS_NAMES[@]} hosts, not $n" >&2; return 1; }
  mkdir -p "$HOSTS_DIR" || return 1
  # Take everything down on exit, after whatever the caller had set (its scratch directory, usually).
  local prev
  eval "set -- $(trap -p EXIT)"
  prev=${3:-}
  trap "hosts_down; $prev" EXIT
  trap 'exit 130' INT TERM HUP
  hosts__reap_stale
  HOSTS_N=$n
  ip netns add "$sw" || return 1
  HOSTS_MADE+=("$sw")
  ip -n "$sw" link set lo up &&
    ip -n "$sw" link add br0 type bridge &&
    ip -n "$sw" addr add "$HOSTS_SUBNET.254/24" dev br0 &&
    ip -n "$sw" link set br0 up || return 1
  for ((i = 0; i < n; i++)); do
    ns=${HOSTS_PREFIX}h$i
    ip netns add "$ns" || return 1
    HOSTS_MADE+=("$ns")
    # Made inside the switch, its peer straight into the host: neither end ever appears outside.
    ip -n "$sw" link add "p$i" type veth peer name eth0 netns "$ns" &&
      ip -n "$sw" link set "p$i" master br0 up &&
      ip -n "$ns" link set lo up &&
      ip -n "$ns" addr add "$HOSTS_SUBNET.$((i + 1))/24" dev eth0 &&
      ip -n "$ns" link set eth0 up || return 1
  done
  # The rsh agent: mpirun calls it as `agent HOST COMMAND...`, as it would call ssh.
  {
    echo '#!/bin/sh'
    echo '# rsh agent for emulated hosts (tests/net/hosts.sh): runs the command in the host'"'"'s namespace.'
    echo 'host=$1; shift'
    echo 'case $host in'
    for ((i = 0; i < n; i++)); do
      echo "  $HOSTS_SUBNET.$((i + 1))) host=${HOSTS_NAMES[$i]} ;;"
    done
    echo 'esac'
    echo 'case $host in'
    for ((i = 0; i < n; i++)); do
      echo "  ${HOSTS_NAMES[$i]}) ns=${HOSTS_PREFIX}h$i ;;"
    done
    echo '  *) echo "agent: no emulated host $host" >&2; exit 255 ;;'
    echo 'esac'
    # Its own hostname too (a UTS namespace): Open MPI names its session directory and the shared-memory
    # segments after the host, and two daemons under one name collide ("mkdir ... File exists", crashes).
    echo 'exec ip netns exec "$ns" unshare --uts /bin/sh -c '"'"'echo "$0" > /proc/sys/kernel/hostname && exec /bin/sh -c "$1"'"'"' "$host" "$*"'
  } > "$HOSTS_DIR/agent" && chmod +x "$HOSTS_DIR/agent" || return 1
  : > "$HOSTS_DIR/hostfile"
  for ((i = 0; i < n; i++)); do echo "${HOSTS_NAMES[$i]} slots=1" >> "$HOSTS_DIR/hostfile"; done
  return 0
}

hosts_mpirun() {
  local k=${HOSTS_RANKS_PER_HOST:-1} where=(--hostfile "$HOSTS_DIR/hostfile") i list=
  if [ "$k" -gt 1 ]; then
    for ((i = 0; i < HOSTS_N; i++)); do list+=${list:+,}${HOSTS_NAMES[$i]}:$k; done
    where=(-H "$list")
  fi
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PMIX_MCA_gds=hash \
    timeout "${HOSTS_TIMEOUT:-600}" ip netns exec "${HOSTS_PREFIX}sw" "${MPIEXEC:-mpirun}" "${where[@]}" \
    -np $((HOSTS_N * k)) --mca plm_rsh_agent "$HOSTS_DIR/agent" --mca btl "${HOSTS_BTL:-tcp,self}" \
    --mca btl_tcp_if_include "$HOSTS_SUBNET.0/24" --mca oob_tcp_if_include "$HOSTS_SUBNET.0/24" --bind-to none "$@"
}

hosts_bytes() {  # the switch's end of the pair receives what the host sends
  local dir
  case $2 in sent) dir=rx ;; received) dir=tx ;; *) echo "hosts_bytes: sent or received, not '$2'" >&2; return 1 ;; esac
  ip netns exec "${HOSTS_PREFIX}sw" cat "/sys/class/net/p$1/statistics/${dir}_bytes"
}

hosts_rate() {
  local i
  for ((i = 0; i < HOSTS_N; i++)); do
    tc -n "${HOSTS_PREFIX}sw" qdisc replace dev "p$i" root tbf rate "$1" burst 256kb latency 50ms || return 1
    tc -n "${HOSTS_PREFIX}h$i" qdisc replace dev eth0 root tbf rate "$1" burst 256kb latency 50ms || return 1
  done
}
