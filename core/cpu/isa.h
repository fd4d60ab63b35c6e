// Which x86 instruction sets ember's hand-written CPU kernels use: chosen once, at run time, from
// what this CPU has, so one build runs on any x86-64 CPU and uses the best kernels each one has.
//
// The kernels that are written with vector intrinsics (the packed gemms of core/cpu/kernels/,
// Philox) are compiled once per instruction set, each copy in its own translation unit with its
// own compiler flags (core/cpu/kernels/kernel_table.cpp, CMakeLists.txt), and the copy for the
// chosen set is the one called. OpenBLAS's DYNAMIC_ARCH builds and oneDNN choose their kernels
// the same way. The sets form a ladder; each includes everything below it:
//
//   portable      plain C++ for any x86-64 CPU (and any other CPU)
//   avx2          AVX2, FMA and F16C: 256-bit vectors, fused multiply-add, float16 conversions
//   avx512        AVX-512 F, BW and VL: 512-bit vectors and masked 16-bit loads and stores
//   avx512_bf16   AVX512-BF16: vdpbf16ps, two bfloat16 products per float32 lane
//   amx_bf16      AMX-TILE and AMX-BF16: tile registers and tdpbf16ps, a 16 x 16 x 32 bfloat16
//                 product per instruction (Intel Xeon from Sapphire Rapids on)
//
// The environment variable EMBER_CPU_ISA can lower the choice, to time or test a lower rung on
// a CPU that has a higher one (the test suite runs once per rung this way); it can never raise it
// past what the CPU has, and an unknown value is an error that lists the valid ones.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace ember::cpu {

enum class CpuIsa : int { kPortable = 0, kAvx2 = 1, kAvx512 = 2, kAvx512Bf16 = 3, kAmxBf16 = 4 };

// "portable", "avx2", "avx512", "avx512_bf16" or "amx_bf16": the names EMBER_CPU_ISA takes.
std::string_view cpu_isa_name(CpuIsa isa);

// The highest rung this CPU and its operating system support (cpuid, and xgetbv for the
// registers' state being saved across context switches; for AMX, Linux's permission for this
// process to use the tile registers, asked for here), within what this build compiled.
CpuIsa detected_cpu_isa();

// The rung the kernels use: `requested` (EMBER_CPU_ISA's value, or nullopt when it is unset or
// empty) on a CPU whose highest is `detected`. Throws an ember::Error naming EMBER_CPU_ISA when
// the value is unknown (listing the valid ones) or above `detected` (saying what this CPU has).
CpuIsa choose_cpu_isa(std::optional<std::string_view> requested, CpuIsa detected);

// The rung in use in this process: choose_cpu_isa of EMBER_CPU_ISA and detected_cpu_isa(),
// decided at the first call and fixed from then on.
CpuIsa cpu_isa();

// "avx2", or "avx512 (EMBER_CPU_ISA; this CPU has avx512_bf16)" when the variable lowered the
// choice: what the examples print beside the device.
std::string describe_cpu_isa();

}  // namespace ember::cpu
