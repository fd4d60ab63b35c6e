// ember's dtypes and reductions as NCCL's: a plain mapping, checked without a GPU wherever ember
// is built with NCCL.
#include "cuda/distributed/nccl_types.h"

#include <doctest/doctest.h>

using namespace ember;
using distributed::ReduceOp;

TEST_CASE("every dtype has the NCCL datatype of its size and kind") {
  CHECK(distributed::nccl_datatype(kFloat32) == ncclFloat32);
  CHECK(distributed::nccl_datatype(kFloat64) == ncclFloat64);
  CHECK(distributed::nccl_datatype(kInt64) == ncclInt64);
  CHECK(distributed::nccl_datatype(kBool) == ncclUint8);
  CHECK(distributed::nccl_datatype(kBFloat16) == ncclBfloat16);
  CHECK(distributed::nccl_datatype(kFloat16) == ncclFloat16);
}

TEST_CASE("a sum is NCCL's sum, a mean its average, and a sum of bools a max (logical or)") {
  CHECK(distributed::nccl_reduction(kFloat32, ReduceOp::Sum) == ncclSum);
  CHECK(distributed::nccl_reduction(kFloat64, ReduceOp::Mean) == ncclAvg);
  CHECK(distributed::nccl_reduction(kInt64, ReduceOp::Sum) == ncclSum);
  CHECK(distributed::nccl_reduction(kBool, ReduceOp::Sum) == ncclMax);
}

TEST_CASE("the build that has this test has the NCCL backend registered") {
  CHECK(distributed::has_backend(distributed::Backend::NCCL));
  CHECK_NOTHROW(distributed::require_backend(distributed::Backend::NCCL));
}
