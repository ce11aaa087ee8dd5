#include "ringtrain/cli/version.h"

#include <mpi.h>

#include <cstdlib>

#include "ringtrain/cli/build_info.h"
#include "ringtrain/ops/kernels.h"
#include "ringtrain/ops/lowp.h"

namespace ringtrain::cli {

namespace {

std::string kernels_line() {
  std::string out = "kernels: this CPU runs";
  for (ops::IsaLevel level : ops::supported_isas()) out += std::string(" ") + ops::isa_name(level);
  out += ops::cpu_has_avx512_bf16() ? " (with AVX512_BF16)" : " (without AVX512_BF16)";
  out += std::string("; --isa auto picks ") + ops::isa_name(ops::default_isa());
  if (const char* env = std::getenv("RINGTRAIN_ISA"); env && *env) out += std::string(" (RINGTRAIN_ISA=") + env + ")";
  return out;
}

// MPI_Get_library_version may be called before MPI_Init. The text is NUL-terminated (Open MPI counts the
// NUL in its length) and may run over several lines: the first says which library and version.
std::string mpi_line() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING + 1] = {};
  int length = 0;
  if (MPI_Get_library_version(text, &length) != MPI_SUCCESS) return "MPI: unknown";
  const std::string version(text);
  return "MPI: " + version.substr(0, version.find('\n'));
}

}  // namespace

std::string version_report() {
  return std::string("ringtrain ") + RINGTRAIN_VERSION + " (commit " + RINGTRAIN_GIT_COMMIT + ")\n" +
         "compiler: " + RINGTRAIN_COMPILER + "\n" + kernels_line() + "\n" + mpi_line() + "\n";
}

}  // namespace ringtrain::cli
