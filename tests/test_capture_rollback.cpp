// CaptureRollback (core/capture_rollback.h): what a failed CUDA graph capture undoes outside the
// graph. Checked on the CPU: the registry itself, and the gradients a backward pass assigns
// while a rollback is open, which a failed capture must give back to the leaves.
#include <vector>

#include "core/capture_rollback.h"
#include "helpers.h"

using namespace ember;
using ember::cuda::CaptureRollback;

TEST_CASE("CaptureRollback runs the registered undos, last first, unless committed") {
  std::vector<int> order;
  CHECK_FALSE(cuda::capture_rollback_is_open());
  cuda::on_capture_failure([&] { order.push_back(0); });  // nothing open: not kept
  {
    CaptureRollback rollback;
    CHECK(cuda::capture_rollback_is_open());
    cuda::on_capture_failure([&] { order.push_back(1); });
    cuda::on_capture_failure([] { throw Error("an undo that fails"); });  // skipped, the others run
    cuda::on_capture_failure([&] { order.push_back(2); });
  }
  CHECK(order == std::vector<int>{2, 1});
  CHECK_FALSE(cuda::capture_rollback_is_open());
  {
    CaptureRollback rollback;
    cuda::on_capture_failure([&] { order.push_back(3); });
    rollback.commit();
  }
  CHECK(order == std::vector<int>{2, 1});
}

TEST_CASE("CaptureRollback: rollbacks do not nest") {
  CaptureRollback outer;
  CHECK_THROWS_WITH_AS(CaptureRollback(), doctest::Contains("captures do not nest"), Error);
  CHECK(cuda::capture_rollback_is_open());  // the refused one did not close the outer
}

TEST_CASE("CaptureRollback: a failed capture gives each leaf back the gradient it had before the step") {
  Tensor fresh = randn({3}, TensorOptions(kFloat64).requires_grad(true));
  Tensor accumulated = randn({3}, TensorOptions(kFloat64).requires_grad(true));
  accumulated.mutable_grad() = full({3}, 5.0, kFloat64);
  const Tensor before = accumulated.grad();
  {
    CaptureRollback rollback;
    sum(mul(fresh, accumulated)).backward();
    sum(fresh).backward();  // a second accumulation into the same leaf
    CHECK(fresh.grad().defined());
    CHECK(accumulated.grad().data_ptr<double>() != before.data_ptr<double>());
  }  // not committed: the capture failed
  CHECK_FALSE(fresh.grad().defined());
  CHECK(accumulated.grad().data_ptr<double>() == before.data_ptr<double>());
  CHECK(accumulated.grad().to_vector<double>() == std::vector<double>{5.0, 5.0, 5.0});
  {
    CaptureRollback rollback;
    sum(fresh).backward();
    rollback.commit();
  }
  CHECK(fresh.grad().defined());  // a committed capture keeps what the step assigned
}

TEST_CASE("CaptureRollback: an undo outlives no leaf") {
  {
    CaptureRollback rollback;
    Tensor gone = randn({2}, TensorOptions(kFloat64).requires_grad(true));
    sum(gone).backward();
  }  // the leaf was freed before the undo ran: nothing to put back, and no crash
  CHECK_FALSE(cuda::capture_rollback_is_open());
}
