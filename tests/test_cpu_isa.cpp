// The choice of the CPU kernels' instruction set (core/cpu/isa.h): EMBER_CPU_ISA lowers it, never
// raises it, and an unknown value is refused with the valid ones; and every rung's Philox gives
// core/random.h's numbers, and its dropout bits dropout's documented mask.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string_view>
#include <vector>

#include "core/cpu/isa.h"
#include "core/cpu/kernel_table.h"
#include "core/random.h"
#include "helpers.h"

namespace ember {
namespace {

using cpu::CpuIsa;

TEST_CASE("EMBER_CPU_ISA unset or empty: the CPU's highest rung") {
  for (const CpuIsa detected :
       {CpuIsa::kPortable, CpuIsa::kAvx2, CpuIsa::kAvx512, CpuIsa::kAvx512Bf16, CpuIsa::kAmxBf16}) {
    CHECK(cpu::choose_cpu_isa(std::nullopt, detected) == detected);
    CHECK(cpu::choose_cpu_isa(std::string_view(), detected) == detected);
  }
}

TEST_CASE("EMBER_CPU_ISA lowers the choice to any rung the CPU has") {
  CHECK(cpu::choose_cpu_isa("portable", CpuIsa::kAvx512Bf16) == CpuIsa::kPortable);
  CHECK(cpu::choose_cpu_isa("avx2", CpuIsa::kAvx512Bf16) == CpuIsa::kAvx2);
  CHECK(cpu::choose_cpu_isa("avx512", CpuIsa::kAvx512Bf16) == CpuIsa::kAvx512);
  CHECK(cpu::choose_cpu_isa("avx512_bf16", CpuIsa::kAvx512Bf16) == CpuIsa::kAvx512Bf16);
  CHECK(cpu::choose_cpu_isa("avx2", CpuIsa::kAvx2) == CpuIsa::kAvx2);
  CHECK(cpu::choose_cpu_isa("avx512_bf16", CpuIsa::kAmxBf16) == CpuIsa::kAvx512Bf16);
  CHECK(cpu::choose_cpu_isa("amx_bf16", CpuIsa::kAmxBf16) == CpuIsa::kAmxBf16);
}

TEST_CASE("EMBER_CPU_ISA cannot raise the choice past what the CPU has") {
  CHECK_THROWS_WITH_ALL(cpu::choose_cpu_isa("avx512", CpuIsa::kAvx2), "EMBER_CPU_ISA=avx512", "this CPU has no avx512",
                        "the highest it has is avx2", "valid here: portable, avx2");
  CHECK_THROWS_WITH_ALL(cpu::choose_cpu_isa("avx512_bf16", CpuIsa::kAvx512), "EMBER_CPU_ISA=avx512_bf16",
                        "the highest it has is avx512");
  CHECK_THROWS_WITH_ALL(cpu::choose_cpu_isa("amx_bf16", CpuIsa::kAvx512Bf16), "EMBER_CPU_ISA=amx_bf16",
                        "this CPU has no amx_bf16", "valid here: portable, avx2, avx512, avx512_bf16");
  CHECK_THROWS_WITH_ALL(cpu::choose_cpu_isa("avx2", CpuIsa::kPortable), "EMBER_CPU_ISA=avx2",
                        "the highest it has is portable", "valid here: portable");
}

TEST_CASE("EMBER_CPU_ISA refuses an unknown value and lists the valid ones") {
  for (const std::string_view unknown : {"sse4", "AVX2", "avx-512", "native", " avx2"}) {
    CAPTURE(unknown);
    CHECK_THROWS_WITH_ALL(cpu::choose_cpu_isa(unknown, CpuIsa::kAvx2), "unknown instruction set",
                          "portable, avx2, avx512, avx512_bf16, amx_bf16", "this CPU has up to avx2");
  }
}

TEST_CASE("the rung in use is the CPU's, or lower, and names itself") {
  CHECK(cpu::cpu_isa() <= cpu::detected_cpu_isa());
  CHECK(cpu::kernels().isa == cpu::cpu_isa());
  const std::string described = cpu::describe_cpu_isa();
  CHECK(described.starts_with(cpu::cpu_isa_name(cpu::cpu_isa())));
  for (const CpuIsa rung :
       {CpuIsa::kPortable, CpuIsa::kAvx2, CpuIsa::kAvx512, CpuIsa::kAvx512Bf16, CpuIsa::kAmxBf16}) {
    CHECK(cpu::kernel_table(rung).isa == rung);
  }
}

TEST_CASE("every rung's Philox gives philox4x32's words, in stream order, for any count and counter") {
  // Counts that end inside a vector and across several; counters whose low word wraps inside the
  // draw; keys with high bits set.
  const std::vector<std::pair<uint64_t, uint64_t>> starts{
      {7, 0}, {~uint64_t{0}, 0xFFFFFFF0u}, {0x0123456789ABCDEFu, (uint64_t{1} << 33) - 77}, {3, ~uint64_t{0} - 40}};
  for (int rung = 0; rung <= static_cast<int>(cpu::detected_cpu_isa()); ++rung) {
    const cpu::KernelTable& table = cpu::kernel_table(static_cast<CpuIsa>(rung));
    CAPTURE(cpu::cpu_isa_name(table.isa));
    for (const auto& [key, first] : starts) {
      for (const int64_t count : {1, 7, 8, 9, 16, 17, 31, 64, 65, 100, 200}) {
        std::vector<uint32_t> words(static_cast<size_t>(4 * count) + 1, 0xDEADBEEFu);
        table.philox4x32_counters(key, first, count, words.data());
        bool same = true;
        for (int64_t j = 0; j < count; ++j) {
          const std::array<uint32_t, 4> expected = philox4x32(key, first + static_cast<uint64_t>(j));
          for (int w = 0; w < 4; ++w) same = same && words[static_cast<size_t>(4 * j + w)] == expected[w];
        }
        CAPTURE(key);
        CAPTURE(first);
        CAPTURE(count);
        CHECK(same);
        CHECK(words.back() == 0xDEADBEEFu);  // nothing written past the draw
      }
    }
  }
}

TEST_CASE("every rung's dropout bits are the float test uniform_float(word) >= p, made on integers") {
  for (int rung = 0; rung <= static_cast<int>(cpu::detected_cpu_isa()); ++rung) {
    const cpu::KernelTable& table = cpu::kernel_table(static_cast<CpuIsa>(rung));
    CAPTURE(cpu::cpu_isa_name(table.isa));
    // Probabilities at the ends, between representable thresholds, and one rounding up to 1.0f.
    for (const double p : {1e-9, 0.1, 0.5, 0.3333333, 0.9, 1.0 - 1e-9}) {
      const auto threshold = static_cast<uint32_t>(std::ceil(static_cast<double>(static_cast<float>(p)) * 16777216.0));
      for (const int64_t counters : {8, 64, 72, 200}) {
        const uint64_t key = 0xFEEDFACECAFEBEEFu, first = 0xFFFFFFFFu - 100;
        std::vector<uint32_t> bits(static_cast<size_t>(counters / 8) + 1, 0xA5A5A5A5u);
        table.dropout_keep_bits(key, first, counters, threshold, bits.data());
        int64_t wrong = 0;
        for (int64_t e = 0; e < 4 * counters; ++e) {
          const uint32_t word = philox4x32(key, first + static_cast<uint64_t>(e / 4))[static_cast<size_t>(e % 4)];
          const bool keep = uniform_float(word) >= static_cast<float>(p);
          wrong += keep != (((bits[static_cast<size_t>(e / 32)] >> (e % 32)) & 1u) != 0);
        }
        CAPTURE(p);
        CAPTURE(counters);
        CHECK(wrong == 0);
        CHECK(bits.back() == 0xA5A5A5A5u);  // nothing written past the draw's bits
      }
    }
  }
}

TEST_CASE("every rung applies dropout's bits as x * (bit ? scale : 0), NaN for a dropped NaN or infinity") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x;
  for (int i = 0; i < 100; ++i) x.push_back(static_cast<float>(i % 7) - 3.25f);
  x[3] = inf;
  x[4] = -inf;
  x[40] = nan;
  x[41] = -0.0f;
  const std::vector<uint32_t> bits{0x0F0F00F5u, 0xFFFF0000u, 0x12345678u, 0x0u};
  for (int rung = 0; rung <= static_cast<int>(cpu::detected_cpu_isa()); ++rung) {
    const cpu::KernelTable& table = cpu::kernel_table(static_cast<CpuIsa>(rung));
    CAPTURE(cpu::cpu_isa_name(table.isa));
    for (const int64_t count : {100, 97, 8, 3}) {
      std::vector<float> out(x.size() + 1, 42.0f);
      table.apply_keep_bits(x.data(), bits.data(), count, 1.25f, out.data());
      for (int64_t i = 0; i < count; ++i) {
        const float expected = x[static_cast<size_t>(i)] *
                               (static_cast<float>((bits[static_cast<size_t>(i / 32)] >> (i % 32)) & 1u) * 1.25f);
        CAPTURE(i);
        CHECK(std::memcmp(&out[static_cast<size_t>(i)], &expected, sizeof(float)) == 0);
      }
      CHECK(out[static_cast<size_t>(count)] == 42.0f);  // nothing past count
    }
  }
}

}  // namespace
}  // namespace ember
