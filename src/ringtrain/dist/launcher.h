// `--nproc N`: re-executes the same command line under mpirun with N ranks on this machine, so
// `ringtrain train --nproc 4 ...` == `mpirun -np 4 ringtrain train ...`. Under mpirun/srun the command
// just joins the job (launched_by_mpi()); ringtrain never starts ranks itself otherwise.
#pragma once
#include <string>
#include <vector>

namespace ringtrain::dist {

struct LaunchPlan {
  std::vector<std::string> argv;                           // mpirun and its arguments
  std::vector<std::pair<std::string, std::string>> env;    // variables to set before exec
};

// mpirun (or $MPIEXEC) -np N [--oversubscribe --bind-to none | --bind-to core] <exe> <args without --nproc>.
// --oversubscribe only when N > cores (ranks then share cores, so they are not bound); the root
// permission variables only when running as root. exe is the absolute path of this program.
LaunchPlan mpirun_plan(int nproc, int argc, char** argv, int first, const std::string& exe, int cores, bool root);

// The plan for this process: exe from /proc/self/exe, cores online, euid.
LaunchPlan mpirun_plan_for_self(int nproc, int argc, char** argv, int first);

// Runs the plan as a child process and waits for it; returns its exit status (128 + signal if killed).
int run_plan(const LaunchPlan& plan);

// Builds the plan for this process (exe from /proc/self/exe, cores online, euid) and execs it.
// Returns only by throwing Error (mpirun not found, exec failed).
[[noreturn]] void exec_under_mpirun(int nproc, int argc, char** argv, int first);

}  // namespace ringtrain::dist
