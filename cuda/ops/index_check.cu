// The index range check as a kernel: one thread per value, and a record of the first bad one.
#include "cuda/runtime/check.h"
#include "cuda/ops/index_check_kernels.h"
#include "cuda/runtime/launch.h"
#include "cuda/runtime/stream.h"

namespace ember::cuda {
namespace {

__global__ void check_index_range_elements(const int64_t* index, int64_t count, int64_t limit, bool has_ignore,
                                           int64_t ignore, int message, IndexErrorRecord* record) {
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < count; k += int64_t(gridDim.x) * blockDim.x) {
    const int64_t value = index[k];
    if ((value < 0 || value >= limit) && !(has_ignore && value == ignore)) record_bad_index(record, message, value, k);
  }
}

}  // namespace

void launch_check_index_range(const int64_t* index, int64_t count, int64_t limit, bool has_ignore, int64_t ignore,
                              int message, IndexErrorRecord* record) {
  if (count == 0) return;
  check_index_range_elements<<<blocks_for(count), kThreadsPerBlock, 0, current_stream()>>>(
      index, count, limit, has_ignore, ignore, message, record);
  check_launch("check_index_range");
}

}  // namespace ember::cuda
