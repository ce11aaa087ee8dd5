#include "ringtrain/dist/launcher.h"

#include <limits.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "ringtrain/core/error.h"

namespace ringtrain::dist {

LaunchPlan mpirun_plan(int nproc, int argc, char** argv, int first, const std::string& exe, int cores, bool root) {
  check(nproc >= 1, "--nproc must be at least 1, got " + std::to_string(nproc));
  LaunchPlan plan;
  const char* mpiexec = std::getenv("MPIEXEC");
  plan.argv = {mpiexec && *mpiexec ? mpiexec : "mpirun", "-np", std::to_string(nproc)};
  if (nproc > cores) {
    plan.argv.insert(plan.argv.end(), {"--oversubscribe", "--bind-to", "none"});
  } else {
    plan.argv.insert(plan.argv.end(), {"--bind-to", "core"});
  }
  plan.argv.push_back(exe);
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i >= first && a == "--nproc") {
      ++i;  // and its value
      continue;
    }
    if (i >= first && a.rfind("--nproc=", 0) == 0) continue;
    plan.argv.push_back(a);
  }
  if (root) plan.env = {{"OMPI_ALLOW_RUN_AS_ROOT", "1"}, {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}};
  return plan;
}

LaunchPlan mpirun_plan_for_self(int nproc, int argc, char** argv, int first) {
  char exe[PATH_MAX];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  check(len > 0, std::string("--nproc: cannot find this program's path: ") + std::strerror(errno));
  exe[len] = '\0';
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  return mpirun_plan(nproc, argc, argv, first, exe, int(cores > 0 ? cores : 1), geteuid() == 0);
}

int run_plan(const LaunchPlan& plan) {
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  check(pid >= 0, std::string("--nproc: cannot fork: ") + std::strerror(errno));
  if (pid == 0) {
    for (const auto& [k, v] : plan.env) setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> args;
    for (const auto& a : plan.argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::fprintf(stderr, "ringtrain: --nproc: cannot run %s: %s\n", plan.argv[0].c_str(), std::strerror(errno));
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    check(errno == EINTR, std::string("--nproc: waiting for mpirun failed: ") + std::strerror(errno));
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

void exec_under_mpirun(int nproc, int argc, char** argv, int first) {
  LaunchPlan plan = mpirun_plan_for_self(nproc, argc, argv, first);
  for (const auto& [k, v] : plan.env) setenv(k.c_str(), v.c_str(), 1);
  std::vector<char*> args;
  for (auto& a : plan.argv) args.push_back(a.data());
  args.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  execvp(args[0], args.data());
  throw Error("--nproc: cannot run " + plan.argv[0] + ": " + std::strerror(errno) +
              " (install OpenMPI, or set MPIEXEC, or start the ranks with mpirun yourself)");
}

}  // namespace ringtrain::dist
