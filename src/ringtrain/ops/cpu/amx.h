// Intel AMX (Advanced Matrix Extensions) tiles for the bf16 GEMMs: whether this process may use them.
// Plain code (no ISA flags): safe to call on every CPU.
#pragma once

namespace ringtrain::ops::cpu {

// True when the CPU has AMX-TILE and AMX-BF16 (cpuid leaf 7) and Linux granted this process the tile data
// state (arch_prctl ARCH_REQ_XCOMP_PERM, asked once, on the first call; the permission covers every thread).
bool amx_bf16_usable();

}  // namespace ringtrain::ops::cpu
