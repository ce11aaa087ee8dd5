// --nproc: the mpirun command line that re-executes ringtrain.
#include <gtest/gtest.h>

#include <cstdlib>

#include "ringtrain/core/error.h"
#include "ringtrain/dist/launcher.h"

namespace ringtrain::dist {
namespace {

std::vector<std::string> plan_for(std::vector<std::string> args, int nproc, int cores, bool root, LaunchPlan* out = nullptr) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  unsetenv("MPIEXEC");
  LaunchPlan p = mpirun_plan(nproc, int(argv.size()), argv.data(), 2, "/abs/ringtrain", cores, root);
  if (out) *out = p;
  return p.argv;
}

TEST(Launcher, StripsNprocAndBindsWhenThereAreCores) {
  LaunchPlan p;
  auto a = plan_for({"build/ringtrain", "train", "--epochs", "1", "--nproc", "2", "--batch-size", "32"}, 2, 2, false, &p);
  EXPECT_EQ(a, (std::vector<std::string>{"mpirun", "-np", "2", "--bind-to", "core", "/abs/ringtrain", "train",
                                         "--epochs", "1", "--batch-size", "32"}));
  EXPECT_TRUE(p.env.empty());
}

TEST(Launcher, OversubscribesOnlyBeyondTheCores) {
  LaunchPlan p;
  auto a = plan_for({"ringtrain", "train", "--nproc=4"}, 4, 2, true, &p);
  EXPECT_EQ(a, (std::vector<std::string>{"mpirun", "-np", "4", "--oversubscribe", "--bind-to", "none",
                                         "/abs/ringtrain", "train"}));
  ASSERT_EQ(p.env.size(), 2u);
  EXPECT_EQ(p.env[0].first, "OMPI_ALLOW_RUN_AS_ROOT");
  EXPECT_EQ(p.env[1].first, "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM");
}

TEST(Launcher, HonoursMpiexecAndRejectsZero) {
  setenv("MPIEXEC", "/opt/mpi/bin/mpiexec", 1);
  std::string args[] = {"ringtrain", "train"};
  char* argv[] = {args[0].data(), args[1].data()};
  EXPECT_EQ(mpirun_plan(1, 2, argv, 2, "/x", 8, false).argv[0], "/opt/mpi/bin/mpiexec");
  EXPECT_THROW(mpirun_plan(0, 2, argv, 2, "/x", 8, false), Error);
  unsetenv("MPIEXEC");
}

}  // namespace
}  // namespace ringtrain::dist
