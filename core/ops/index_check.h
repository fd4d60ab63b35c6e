// The range check every op that reads or writes at positions given by an int64 tensor runs
// first: embedding's ids, cross_entropy's and nll_loss's targets, index_select's and gather's
// index. After it, the kernels index without checks.
//
// On the CPU the check runs at once and throws. On a GPU it runs as a kernel: reading the
// index back to test it on the host would make every training step wait for the device. A bad
// value found there is reported, as the same ember::Error, at the next point where the host
// waits for the GPU anyway (item(), cpu(), to_vector(), ember::cuda::synchronize()), and the
// kernels that use the index skip it instead of reading out of bounds.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/dispatch.h"
#include "core/tensor.h"

namespace ember {

// The words of the error: "<subject> <value> (at flat position <p>) is out of range for <range>",
// e.g. subject "embedding: id", range "8000 embeddings".
struct IndexRangeMessage {
  std::string subject;
  std::string range;

  std::string format(int64_t value, int64_t position) const;
};

namespace kernels {
// Every value of the contiguous int64 `index` must lie in [0, limit), except values equal to
// `ignore` when there is one.
extern KernelTable<void(const Tensor& index, int64_t limit, std::optional<int64_t> ignore,
                        const IndexRangeMessage& message)>
    check_index_range;
}  // namespace kernels

// Throws (on the CPU) or reports at the next synchronisation (on a GPU) the first value of
// `index` outside [0, limit) that is not `ignore`.
void check_index_range(const Tensor& index, int64_t limit, std::optional<int64_t> ignore,
                       const IndexRangeMessage& message);

}  // namespace ember
