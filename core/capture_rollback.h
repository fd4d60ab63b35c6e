// What a failed CUDA graph capture must undo outside the graph. A captured step runs on the
// host as usual while CUDA only records its kernels, so it changes host-side state as it goes:
// parameters get gradients in the graph's private memory, an optimizer marks itself captured.
// If the step throws, or CUDA refuses to record it, the graph is dropped and that state would
// point at memory nothing will ever write. Code that changes such state during a capture
// registers how to put it back; CudaGraph::capture (cuda/graph/graph.cpp) opens a CaptureRollback
// around the step and commits it only once the graph exists.
//
// Plain C++ with no CUDA call, so the CPU tests exercise it (tests/test_capture_rollback.cpp).
#pragma once

#include <functional>
#include <vector>

namespace ember::cuda {

class CaptureRollback {
 public:
  // Opens this thread's rollback; captures do not nest, and neither do rollbacks.
  CaptureRollback();
  // Unless commit() was called: runs every registered undo, the last registered first. An undo
  // that throws is skipped (a destructor cannot throw), and the others still run.
  ~CaptureRollback();
  CaptureRollback(const CaptureRollback&) = delete;
  CaptureRollback& operator=(const CaptureRollback&) = delete;

  // The capture succeeded: what the step changed stays as it is.
  void commit();

 private:
  std::vector<std::function<void()>> undo_;
  bool committed_ = false;
  friend void on_capture_failure(std::function<void()> undo);
  friend bool capture_rollback_is_open();
};

// Registers `undo` with this thread's open rollback; does nothing when none is open (no capture
// is under way), so callers may call it unconditionally, though checking
// capture_rollback_is_open() first avoids building the closure.
void on_capture_failure(std::function<void()> undo);
bool capture_rollback_is_open();

}  // namespace ember::cuda
