// The profiler: per-op kernel times and matmul FLOPs while on, nothing recorded while off.
#include <algorithm>

#include "helpers.h"

using namespace ember;

namespace {
const profiler::OpTime* find_op(const std::vector<profiler::OpTime>& ops, const std::string& name) {
  const auto it = std::find_if(ops.begin(), ops.end(), [&](const profiler::OpTime& op) { return op.name == name; });
  return it == ops.end() ? nullptr : &*it;
}
}  // namespace

TEST_CASE("the profiler times each op's kernels and counts matmul's FLOPs") {
  const Tensor a = randn({32, 64}), b = randn({64, 16});
  profiler::start();
  CHECK(profiler::is_on());
  Tensor c = matmul(a, b);
  c = matmul(a, b);
  const Tensor y = softmax(add(c, 1.0), -1);
  const std::vector<profiler::OpTime> ops = profiler::stop();
  CHECK_FALSE(profiler::is_on());

  const profiler::OpTime* matmul_time = find_op(ops, "matmul");
  REQUIRE(matmul_time != nullptr);
  CHECK(matmul_time->calls == 2);
  CHECK(matmul_time->flops == doctest::Approx(2 * 2.0 * 32 * 64 * 16));
  CHECK(matmul_time->seconds > 0);
  REQUIRE(find_op(ops, "add") != nullptr);
  CHECK(find_op(ops, "add")->calls == 1);
  REQUIRE(find_op(ops, "softmax") != nullptr);
  // Sorted by time, largest first.
  for (size_t i = 1; i < ops.size(); ++i) CHECK(ops[i - 1].seconds >= ops[i].seconds);
}

TEST_CASE("the profiler records nothing while off, and start() clears the last profile") {
  const Tensor a = randn({8, 8});
  profiler::start();
  matmul(a, a);
  CHECK(profiler::stop().size() == 1);
  matmul(a, a);  // off: not recorded
  profiler::start();
  const std::vector<profiler::OpTime> ops = profiler::stop();
  CHECK(ops.empty());
}

TEST_CASE("backward kernels are timed under their own names") {
  Tensor x = randn({16, 32});
  x.requires_grad_(true);
  profiler::start();
  gelu(x).sum().backward();
  const std::vector<profiler::OpTime> ops = profiler::stop();
  CHECK(find_op(ops, "gelu") != nullptr);
  CHECK(find_op(ops, "gelu_backward") != nullptr);
}
