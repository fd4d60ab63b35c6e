// Seeded op programs (tests/fuzz/op_programs.h): many short programs of views, in-place and
// out-of-place ops, factories with edge scalars, reductions, products and conversions, each
// call either matching a float64 reference or throwing ember::Error. fuzz_ops runs the same
// programs from libFuzzer's inputs under the sanitizers.
#include <random>

#include "fuzz/op_programs.h"
#include "helpers.h"

using namespace ember;

TEST_CASE("seeded op programs give the reference's answer or an ember::Error") {
  std::mt19937_64 random(2024);
  constexpr int kPrograms = 20000;
  for (int program = 0; program < kPrograms; ++program) {
    std::vector<uint8_t> bytes(64 + program % 64);
    for (uint8_t& byte : bytes) byte = static_cast<uint8_t>(random());
    try {
      fuzzing::run_op_program(bytes.data(), bytes.size());
    } catch (const fuzzing::Finding& finding) {
      FAIL_CHECK("program " << program << ": " << std::string(finding.what()));
    } catch (const std::exception& error) {
      FAIL_CHECK("program " << program << " threw something other than ember::Error: " << std::string(error.what()));
    }
  }
}
