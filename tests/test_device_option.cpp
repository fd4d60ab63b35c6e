// --device and --threads: accepted names, and the errors for the others.
#include "helpers.h"
#include "nn/train/device_option.h"

using namespace ember;
using namespace ember::testing;

TEST_CASE("parse_device accepts cpu") { CHECK(train::parse_device("cpu") == kCPU); }

TEST_CASE("parse_device names the accepted devices when given another") {
  for (const char* name : {"gpu", "CPU", "cuda:", "cuda:x", "cuda:-1", ""}) {
    CAPTURE(name);
    CHECK_THROWS_WITH_ALL(train::parse_device(name), "--device", "unknown device", "expected cpu, cuda or cuda:N");
  }
}

TEST_CASE("parse_device refuses CUDA devices this machine does not have") {
  if (!cuda::is_available()) {
    CHECK_THROWS_WITH_ALL(train::parse_device("cuda"), "--device cuda: no CUDA device is available on this machine");
    CHECK_THROWS_WITH_ALL(train::parse_device("cuda:1"), "--device cuda:1: no CUDA device is available");
  } else {
    CHECK(train::parse_device("cuda") == Device::cuda(0));
    const std::string beyond = "cuda:" + std::to_string(cuda::device_count());
    CHECK_THROWS_WITH_ALL(train::parse_device(beyond), beyond.c_str(), "this machine has");
  }
}

TEST_CASE("set_threads sets the thread count; 0 leaves it; a negative count is refused") {
  const int before = train::thread_count();
  train::set_threads(1);
  CHECK(train::thread_count() == 1);
  train::set_threads(0);
  CHECK(train::thread_count() == 1);
  train::set_threads(before);
  CHECK(train::thread_count() == before);
  CHECK_THROWS_WITH_ALL(train::set_threads(-2), "--threads", "-2");
}
