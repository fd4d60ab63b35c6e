// The doctest runner of the suites that run as several processes under mpirun. Every rank runs
// the same test cases in the same order (their collectives must match); rank 0 reports in full,
// the others print only their failures; a check that fails on any rank fails every rank's exit
// code, so mpirun, and ctest, see it.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <fmt/format.h>

#include "ember.h"

int main(int argc, char** argv) {
  using namespace ember;
  distributed::init();
  doctest::Context context(argc, argv);
  if (distributed::rank() != 0) {
    context.setOption("minimal", true);
    context.setOption("no-colors", true);
  }
  const int failed = context.run();
  if (context.shouldExit()) return failed;
  if (failed != 0) fmt::print(stderr, "rank {}: test cases failed\n", distributed::rank());
  Tensor any_failed = tensor({static_cast<int64_t>(failed != 0)}, {1}, kInt64);
  distributed::all_reduce(any_failed);
  return any_failed.item<int64_t>() != 0 ? 1 : 0;
}
