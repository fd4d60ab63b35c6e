// The choice of core/cpu/isa.h: what the CPU has, read with cpuid, lowered by EMBER_CPU_ISA.
#include "core/cpu/isa.h"

#include <array>
#include <cstdint>
#include <cstdlib>
#include <mutex>

#include "core/error.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace ember::cpu {
namespace {

constexpr std::array<std::string_view, 5> kNames = {"portable", "avx2", "avx512", "avx512_bf16", "amx_bf16"};

// The rungs from portable up to `highest`, comma-separated: the valid values on some CPU.
std::string names_up_to(CpuIsa highest) {
  std::string names;
  for (int rung = 0; rung <= static_cast<int>(highest); ++rung) {
    if (!names.empty()) names += ", ";
    names += kNames[static_cast<size_t>(rung)];
  }
  return names;
}

#if defined(__x86_64__)
struct CpuidRegisters {
  uint32_t eax = 0, ebx = 0, ecx = 0, edx = 0;
};

// cpuid of `leaf` and `subleaf`, all zero when the CPU has no such leaf.
CpuidRegisters cpuid(uint32_t leaf, uint32_t subleaf) {
  CpuidRegisters r;
  if (__get_cpuid_max(0, nullptr) < leaf) return r;
  __cpuid_count(leaf, subleaf, r.eax, r.ebx, r.ecx, r.edx);
  return r;
}

bool bit(uint32_t word, int index) { return (word >> index & 1u) != 0; }

// XCR0: which register states the operating system saves on a context switch. A CPU may have
// AVX-512 while the system does not save the 512-bit registers; then the instructions fault.
uint64_t enabled_register_state() {
  uint32_t low = 0, high = 0;
  __asm__ volatile("xgetbv" : "=a"(low), "=d"(high) : "c"(0));
  return static_cast<uint64_t>(high) << 32 | low;
}

// Linux saves the tile registers' 8 KB only for processes that ask (arch_prctl
// ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA); without the permission the first tile
// instruction kills the process with SIGILL. The permission covers every thread of the process.
bool tile_registers_permitted() {
#if defined(__linux__)
  constexpr long kRequestPermission = 0x1023, kTileData = 18;
  return syscall(SYS_arch_prctl, kRequestPermission, kTileData) == 0;
#else
  return false;
#endif
}
#endif

}  // namespace

std::string_view cpu_isa_name(CpuIsa isa) { return kNames[static_cast<size_t>(isa)]; }

CpuIsa detected_cpu_isa() {
#if defined(__x86_64__)
  const CpuidRegisters features = cpuid(1, 0), extended = cpuid(7, 0), extended1 = cpuid(7, 1);
  // xgetbv itself exists only where the system has enabled it (OSXSAVE).
  if (!bit(features.ecx, 27)) return CpuIsa::kPortable;
  const uint64_t state = enabled_register_state();
  constexpr uint64_t kVectorState = 0x6;        // the 128-bit and 256-bit halves of the vectors
  constexpr uint64_t kAvx512State = 0xe0;       // the mask registers and the upper 512-bit halves
  const bool avx = bit(features.ecx, 28) && (state & kVectorState) == kVectorState;
  const bool avx2 = avx && bit(extended.ebx, 5) && bit(features.ecx, 12) /* FMA */ && bit(features.ecx, 29) /* F16C */;
  if (!avx2) return CpuIsa::kPortable;
  const bool avx512 = (state & kAvx512State) == kAvx512State && bit(extended.ebx, 16) /* F */ &&
                      bit(extended.ebx, 30) /* BW */ && bit(extended.ebx, 31) /* VL */;
  if (!avx512) return CpuIsa::kAvx2;
  if (!bit(extended1.eax, 5)) return CpuIsa::kAvx512;
  constexpr uint64_t kTileState = 0x60000;  // the tile configuration and the tiles' data
  const bool amx = (state & kTileState) == kTileState && bit(extended.edx, 24) /* AMX-TILE */ &&
                   bit(extended.edx, 22) /* AMX-BF16 */;
  // Asked once: the answer does not change within a process.
  static const bool permitted = amx && tile_registers_permitted();
  return permitted ? CpuIsa::kAmxBf16 : CpuIsa::kAvx512Bf16;
#else
  return CpuIsa::kPortable;  // only the portable kernels are compiled off x86-64
#endif
}

CpuIsa choose_cpu_isa(std::optional<std::string_view> requested, CpuIsa detected) {
  if (!requested || requested->empty()) return detected;
  for (size_t rung = 0; rung < kNames.size(); ++rung) {
    if (*requested != kNames[rung]) continue;
    const auto isa = static_cast<CpuIsa>(rung);
    EMBER_CHECK(isa <= detected,
                "EMBER_CPU_ISA={}: this CPU has no {} (the highest it has is {}; valid here: {}); the variable can "
                "lower the kernels' instruction set, never raise it",
                *requested, *requested, cpu_isa_name(detected), names_up_to(detected));
    return isa;
  }
  fail("EMBER_CPU_ISA={}: unknown instruction set; valid values are {} (this CPU has up to {})", *requested,
       names_up_to(CpuIsa::kAmxBf16), cpu_isa_name(detected));
}

CpuIsa cpu_isa() {
  // Decided once: every kernel of the process then agrees. A refused EMBER_CPU_ISA throws at every
  // call, so the first op to ask reports it.
  static std::once_flag decided;
  static CpuIsa chosen = CpuIsa::kPortable;
  std::call_once(decided, [] {
    const char* requested = std::getenv("EMBER_CPU_ISA");
    chosen = choose_cpu_isa(requested ? std::optional<std::string_view>(requested) : std::nullopt,
                            detected_cpu_isa());
  });
  return chosen;
}

std::string describe_cpu_isa() {
  const CpuIsa chosen = cpu_isa(), detected = detected_cpu_isa();
  if (chosen == detected) return std::string(cpu_isa_name(chosen));
  return fmt::format("{} (EMBER_CPU_ISA; this CPU has {})", cpu_isa_name(chosen), cpu_isa_name(detected));
}

}  // namespace ember::cpu
