// Registers the CUDA index range check and keeps what it needs on the host: the pinned record
// kernels write a bad index into, and the messages, each handed out as a small id that fits
// in the record (a kernel cannot hold a std::string).
#include <cuda_runtime_api.h>

#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/ops/index_check.h"
#include "cuda/runtime/check.h"
#include "cuda/ops/index_check_kernels.h"

namespace ember::cuda {
namespace {

// The messages by id. A program checks few distinct (op, range) pairs, so the table stays small
// however long it trains.
class MessageTable {
 public:
  int id_of(const IndexRangeMessage& message) {
    const std::lock_guard lock(mutex_);
    const std::string key = message.subject + '\n' + message.range;
    const auto [it, inserted] = ids_.try_emplace(key, static_cast<int>(messages_.size()));
    if (inserted) messages_.push_back(message);
    return it->second;
  }
  IndexRangeMessage at(int id) {
    const std::lock_guard lock(mutex_);
    return messages_.at(static_cast<size_t>(id));
  }

 private:
  std::mutex mutex_;
  std::unordered_map<std::string, int> ids_;
  std::vector<IndexRangeMessage> messages_;
};

MessageTable& messages() {
  static MessageTable* table = new MessageTable;  // outlives every static that may report
  return *table;
}

// The record, in page-locked host memory mapped into the GPU's address space: kernels write it
// directly (only when they find a bad index) and the host reads it without a copy. Portable, so
// every GPU of the machine may write it. Made at the first check, which runs on a GPU.
struct PinnedRecord {
  IndexErrorRecord* host = nullptr;
  IndexErrorRecord* device = nullptr;
};

std::once_flag record_made;
PinnedRecord pinned_record;

PinnedRecord& record() {
  std::call_once(record_made, [] {
    void* memory = nullptr;
    check(cudaHostAlloc(&memory, sizeof(IndexErrorRecord), cudaHostAllocMapped | cudaHostAllocPortable),
          "check_index_range");
    pinned_record.host = static_cast<IndexErrorRecord*>(memory);
    *pinned_record.host = IndexErrorRecord{0, 0, 0, 0};
    void* device = nullptr;
    check(cudaHostGetDevicePointer(&device, memory, 0), "check_index_range");
    pinned_record.device = static_cast<IndexErrorRecord*>(device);
  });
  return pinned_record;
}

void check_index_range_cuda(const Tensor& index, int64_t limit, std::optional<int64_t> ignore,
                            const IndexRangeMessage& message) {
  launch_check_index_range(index.data_ptr<int64_t>(), index.numel(), limit, ignore.has_value(), ignore.value_or(0),
                           messages().id_of(message), record().device);
}
EMBER_REGISTER_KERNEL(kernels::check_index_range, DeviceType::CUDA, check_index_range_cuda);

}  // namespace

void report_index_errors() {
  IndexErrorRecord* const host = pinned_record.host;
  if (host == nullptr) return;  // no check has run yet
  volatile IndexErrorRecord* const seen = host;
  if (seen->found == 0) return;
  const IndexErrorRecord found{1, seen->message, seen->value, seen->position};
  seen->found = 0;
  throw Error(messages().at(found.message).format(found.value, found.position) +
              " (found on the GPU by a kernel queued before this point, where the host waited for the GPU)");
}

}  // namespace ember::cuda
