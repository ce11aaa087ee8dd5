// `ringtrain --version`: what was built and what this machine offers it, one fact a line.
#pragma once
#include <string>

namespace ringtrain::cli {

// "ringtrain 0.4.0 (commit abc1234)", the compiler, the kernel ISA levels this CPU runs and the one
// --isa auto picks, and the MPI library's own version string.
std::string version_report();

}  // namespace ringtrain::cli
