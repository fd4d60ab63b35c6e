// The index range check: its message, the op, and the CPU kernel. The CUDA kernel is in
// cuda/ops/index_check.cpp.
#include "core/ops/index_check.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/ops/copy.h"

namespace ember {
namespace kernels {
constinit KernelTable<void(const Tensor& index, int64_t limit, std::optional<int64_t> ignore,
                           const IndexRangeMessage& message)>
    check_index_range{"check_index_range"};
}  // namespace kernels

std::string IndexRangeMessage::format(int64_t value, int64_t position) const {
  return fmt::format("{} {} (at flat position {}) is out of range for {}", subject, value, position, range);
}

namespace {

// A vectorised min/max pass first, so the common all-valid case costs one read of the index;
// the first bad value is searched for only when the extremes fall outside the range (which an
// ignore value such as -100 also makes them do).
void check_index_range_cpu(const Tensor& index, int64_t limit, std::optional<int64_t> ignore,
                           const IndexRangeMessage& message) {
  const int64_t* values = index.data_ptr<int64_t>();
  const int64_t count = index.numel();
  if (count == 0) return;
  int64_t lowest = values[0], highest = values[0];
#pragma omp simd reduction(min : lowest) reduction(max : highest)
  for (int64_t k = 0; k < count; ++k) {
    lowest = std::min(lowest, values[k]);
    highest = std::max(highest, values[k]);
  }
  if (lowest >= 0 && highest < limit) return;
  for (int64_t k = 0; k < count; ++k) {
    const int64_t value = values[k];
    if ((value < 0 || value >= limit) && value != ignore) throw Error(message.format(value, k));
  }
}
EMBER_REGISTER_KERNEL(kernels::check_index_range, DeviceType::CPU, check_index_range_cpu);

}  // namespace

void check_index_range(const Tensor& index, int64_t limit, std::optional<int64_t> ignore,
                       const IndexRangeMessage& message) {
  EMBER_CHECK(index.dtype() == kInt64, "{}: values must be int64, got {}", message.subject, index.dtype());
  if (index.numel() == 0) return;
  kernels::check_index_range[index.device()](contiguous(index), limit, ignore, message);
}

}  // namespace ember
