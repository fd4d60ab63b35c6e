// CaptureRollback (core/capture_rollback.h): one open rollback per thread, as one capture.
#include "core/capture_rollback.h"

#include "core/error.h"

namespace ember::cuda {
namespace {
thread_local CaptureRollback* open_rollback = nullptr;
}  // namespace

CaptureRollback::CaptureRollback() {
  EMBER_CHECK(open_rollback == nullptr, "CudaGraph::capture: another capture is under way on this thread; captures "
              "do not nest");
  open_rollback = this;
}

CaptureRollback::~CaptureRollback() {
  open_rollback = nullptr;
  if (committed_) return;
  for (auto undo = undo_.rbegin(); undo != undo_.rend(); ++undo) {
    try {
      (*undo)();
    } catch (...) {  // NOLINT(bugprone-empty-catch): the others must still run
    }
  }
}

void CaptureRollback::commit() { committed_ = true; }

void on_capture_failure(std::function<void()> undo) {
  if (open_rollback != nullptr) open_rollback->undo_.push_back(std::move(undo));
}

bool capture_rollback_is_open() { return open_rollback != nullptr; }

}  // namespace ember::cuda
