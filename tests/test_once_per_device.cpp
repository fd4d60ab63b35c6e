// OncePerDevice (cuda/runtime/once_per_device.h), which CUDA kernels' shared-memory opt-ins go through:
// a setup done for one kernel on one device is not taken as done on another device, nor for
// another kernel of the same signature on the same device.
#include <doctest/doctest.h>

#include "cuda/runtime/once_per_device.h"

namespace {
void first_kernel() {}
void second_kernel() {}
}  // namespace

TEST_CASE("OncePerDevice: a setup is done per kernel and per device") {
  ember::cuda::OncePerDevice done;
  const void* first = reinterpret_cast<const void*>(&first_kernel);
  const void* second = reinterpret_cast<const void*>(&second_kernel);
  CHECK_FALSE(done.is_done(first, 0));
  done.mark_done(first, 0);
  CHECK(done.is_done(first, 0));
  CHECK_FALSE(done.is_done(first, 1));   // the second GPU must be set up too
  CHECK_FALSE(done.is_done(second, 0));  // the same signature, another kernel
  done.mark_done(first, 1);
  CHECK(done.is_done(first, 1));
}
