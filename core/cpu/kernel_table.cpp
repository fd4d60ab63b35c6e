// The choice of core/cpu/kernel_table.h: one table per rung, compiled in core/cpu/kernels/rung.cpp.
#include "core/cpu/kernel_table.h"

#include <array>
#include <cstdlib>
#include <memory>

#include "core/error.h"

// Each compilation of core/cpu/kernels/rung.cpp defines the table of its rung.
#define EMBER_DECLARE_RUNG(name) \
  namespace ember::cpu::name {   \
  const KernelTable& table();    \
  }
EMBER_DECLARE_RUNG(isa_portable)
#if defined(__x86_64__)
EMBER_DECLARE_RUNG(isa_avx2)
EMBER_DECLARE_RUNG(isa_avx512)
EMBER_DECLARE_RUNG(isa_avx512_bf16)
EMBER_DECLARE_RUNG(isa_amx_bf16)
#endif
#undef EMBER_DECLARE_RUNG

namespace ember::cpu {

const KernelTable& kernel_table(CpuIsa isa) {
  switch (isa) {
#if defined(__x86_64__)
    case CpuIsa::kAmxBf16:
      return isa_amx_bf16::table();
    case CpuIsa::kAvx512Bf16:
      return isa_avx512_bf16::table();
    case CpuIsa::kAvx512:
      return isa_avx512::table();
    case CpuIsa::kAvx2:
      return isa_avx2::table();
#endif
    default:
      return isa_portable::table();
  }
}

const KernelTable& kernels() {
  static const KernelTable& chosen = kernel_table(cpu_isa());
  return chosen;
}

void* thread_scratch(int slot, int64_t bytes) {
  EMBER_CHECK(slot >= 0 && slot < 4 && bytes >= 0, "thread_scratch: slot {} of 0-3, {} bytes", slot, bytes);
  struct Buffer {
    std::unique_ptr<char[]> memory;
    int64_t capacity = 0;
  };
  constexpr int64_t kAlign = 64;
  thread_local std::array<Buffer, 4> buffers;
  Buffer& buffer = buffers[static_cast<size_t>(slot)];
  if (buffer.capacity < bytes) {
    buffer.memory = std::make_unique_for_overwrite<char[]>(static_cast<size_t>(bytes + kAlign));
    buffer.capacity = bytes;
  }
  const auto address = reinterpret_cast<uintptr_t>(buffer.memory.get());
  return buffer.memory.get() + (kAlign - address % kAlign) % kAlign;
}

}  // namespace ember::cpu
