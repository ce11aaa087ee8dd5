#include "ringtrain/ops/cpu/amx.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace ringtrain::ops::cpu {
namespace {

constexpr long kArchReqXcompPerm = 0x1023;  // arch_prctl code (asm/prctl.h)
constexpr long kXfeatureXtiledata = 18;     // the XSAVE component of the 8 KB tile data

bool cpu_has_amx_bf16() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool amx_bf16 = d & (1u << 22), amx_tile = d & (1u << 24);
  return amx_bf16 && amx_tile;
}

}  // namespace

bool amx_bf16_usable() {
  // Linux (5.16+) keeps the tile data out of a process's state until it asks; without the grant the first
  // tile instruction faults. A kernel or hypervisor that refuses answers non-zero: then no AMX.
  static const bool ok = cpu_has_amx_bf16() && syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  return ok;
}

}  // namespace ringtrain::ops::cpu
