#!/usr/bin/env bash
# A rank that hangs, exits without MPI_Finalize, or is killed mid-run: the other ranks must stop within
# the --timeout (plus start-up slack), the job must exit non-zero, and the message must say what happened
# (for a hang: our watchdog naming the rank and the collective; for exit/kill: mpirun's report).
#   tests/mpi/rank_failure.sh path/to/test_rank_failure   [MPIEXEC=mpirun]
set -uo pipefail
exe=${1:?usage: rank_failure.sh path/to/test_rank_failure}
mpiexec=${MPIEXEC:-mpirun}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
timeout_s=2
slack_s=30    # mpirun start-up and teardown on a loaded machine
failures=0
for np in 2 3; do
  for fault in hang exit kill; do
    log=$(mktemp)
    start=$(date +%s.%N)
    timeout $((timeout_s + slack_s + 30)) "$mpiexec" -np "$np" --oversubscribe "$exe" --fault "$fault" --timeout "$timeout_s" >"$log" 2>&1
    rc=$?
    elapsed=$(echo "$(date +%s.%N) - $start" | bc)
    case $fault in
      hang) want="ringtrain: rank [0-9]+ of $np: collective allreduce_sum\(float x 61706, ring\) did not finish within $timeout_s s" ;;
      exit) want="exiting improperly|without calling .?finalize|abnormal termination" ;;
      kill) want="exited on signal 9|Killed" ;;
    esac
    problems=()
    (( rc != 0 )) || problems+=("exit status 0")
    (( rc != 124 )) || problems+=("job still running after $((timeout_s + slack_s + 30)) s")
    (( $(echo "$elapsed < $timeout_s + $slack_s" | bc) )) || problems+=("took ${elapsed}s")
    grep -Eq "$want" "$log" || problems+=("no message matching /$want/")
    if (( ${#problems[@]} )); then
      echo "FAIL np=$np fault=$fault: ${problems[*]} (rc=$rc)"; sed 's/^/    /' "$log" | tail -20
      failures=$((failures + 1))
    else
      printf 'ok   np=%d fault=%-4s rc=%-3d %.1fs  %s\n' "$np" "$fault" "$rc" "$elapsed" "$(grep -Eo "$want" "$log" | head -1)"
    fi
    rm -f "$log"
  done
done
exit $((failures > 0))
