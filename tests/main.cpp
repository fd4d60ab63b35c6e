// The doctest runner shared by every suite.
//
// Some suites are registered once more per rung of CPU instruction sets (tests/CMakeLists.txt),
// with EMBER_CPU_ISA naming the rung and EMBER_TEST_SKIP_MISSING_ISA set: on a CPU without that
// rung such a run reports itself skipped (ctest's SKIP_RETURN_CODE 77) instead of failing on the
// refusal, so one test list serves every machine.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "core/cpu/isa.h"
#include "core/error.h"

int main(int argc, char** argv) {
  const char* requested = std::getenv("EMBER_CPU_ISA");
  if (requested != nullptr && std::getenv("EMBER_TEST_SKIP_MISSING_ISA") != nullptr) {
    try {
      ember::cpu::choose_cpu_isa(std::string_view(requested), ember::cpu::detected_cpu_isa());
    } catch (const ember::Error& error) {
      std::printf("skipped: %s\n", error.what());
      return 77;
    }
  }
  doctest::Context context(argc, argv);
  return context.run();
}
