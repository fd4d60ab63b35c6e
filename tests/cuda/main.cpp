// The doctest runner of the CUDA suites. On a machine without a GPU the suite has nothing to
// compare, so it exits with 77, which ctest reports as skipped (SKIP_RETURN_CODE), not passed.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "core/cuda.h"

int main(int argc, char** argv) {
  if (!ember::cuda::is_available()) {
    std::printf("skipped: no CUDA device on this machine (ember::cuda::device_count() == 0)\n");
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
