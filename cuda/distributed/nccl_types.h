// ember's dtypes and reductions as NCCL's: plain mappings, kept apart from the communicator so a
// CPU-only test can check them.
#pragma once

#include <nccl.h>

#include "core/distributed/process_group.h"
#include "core/dtype.h"

namespace ember::distributed {

inline ncclDataType_t nccl_datatype(DType dtype) {
  switch (dtype) {
    case DType::Float32: return ncclFloat32;
    case DType::Float64: return ncclFloat64;
    case DType::Int64: return ncclInt64;
    case DType::Bool: return ncclUint8;  // one byte, 0 or 1
    case DType::BFloat16: return ncclBfloat16;
    case DType::Float16: return ncclFloat16;
  }
  fail("distributed: dtype {} has no NCCL datatype", dtype);
}

// A sum of bools is their logical or: the max of bytes that are 0 or 1. A mean is NCCL's average
// (NCCL 2.10 and later), computed in one pass with the sum.
inline ncclRedOp_t nccl_reduction(DType dtype, ReduceOp op) {
  if (dtype == DType::Bool) return ncclMax;
  return op == ReduceOp::Mean ? ncclAvg : ncclSum;
}

}  // namespace ember::distributed
