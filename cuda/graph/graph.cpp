// CudaGraph (core/cuda_graph.h): capture on a stream of its own, replay on the current one.
//
// Capture. The legacy default stream cannot be captured, so the capture gets a non-blocking
// stream and current_stream() returns it meanwhile (cuda/runtime/stream.h): every ember launch, copy and
// cuBLAS call then goes to it. Allocations go to the graph's private pool (cuda/runtime/block_pools.h),
// and GPU random draws are recorded relative to a (seed, offset) pair in device memory
// (core/random.h). Whatever happens inside the step, the stream, the pool routing and the
// generator are restored before capture() returns or throws.
//
// Replay. The generator reserves the counters one replay draws, a one-thread kernel writes the
// pair, and the graph is launched after it on the current stream.
#include <cuda_runtime_api.h>

#include "core/capture_rollback.h"
#include "core/cuda.h"
#include "core/cuda_graph.h"
#include "core/error.h"
#include "core/ops/factory.h"
#include "core/random.h"
#include "core/tensor.h"
#include "cuda/runtime/check.h"
#include "cuda/runtime/cublas_handle.h"
#include "cuda/graph/graph_kernels.h"
#include "cuda/graph/graph_pool.h"
#include "cuda/runtime/stream.h"

namespace ember::cuda {

namespace {
thread_local bool capturing = false;
}  // namespace

bool is_capturing_graph() { return capturing; }

struct CudaGraph::State {
  int device = 0;
  cudaGraphExec_t exec = nullptr;
  uint64_t pool = 0;
  bool has_pool = false;
  Tensor seed_and_offset;  // two uint64 on the device, read by the replays' random kernels
  uint64_t counters_per_replay = 0;
};

CudaGraph::CudaGraph() : state_(std::make_unique<State>()) {}

// A destructor cannot throw: failures here are cleared, not reported.
CudaGraph::~CudaGraph() {
  if (state_->exec != nullptr && cudaGraphExecDestroy(state_->exec) != cudaSuccess) cudaGetLastError();
  if (state_->has_pool) release_graph_pool(state_->device, state_->pool);
}

bool CudaGraph::is_captured() const { return state_->exec != nullptr; }

namespace {

// What capture() changes, put back in its destructor, in reverse order.
class CaptureScope {
 public:
  CaptureScope(int device, uint64_t pool, const uint64_t* seed_and_offset) : device_(device) {
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "CudaGraph::capture: cudaStreamCreate");
    previous_stream_ = exchange_current_stream(stream_);
    route_allocations_to(device, pool);
    Generator::global().begin_graph_capture(seed_and_offset);
    capturing = true;
  }
  ~CaptureScope() {
    capturing = false;
    if (Generator::global().is_capturing()) Generator::global().end_graph_capture();
    end_allocation_routing(device_);
    exchange_current_stream(previous_stream_);
    if (cudaStreamDestroy(stream_) != cudaSuccess) cudaGetLastError();
  }
  CaptureScope(const CaptureScope&) = delete;
  CaptureScope& operator=(const CaptureScope&) = delete;

  cudaStream_t stream() const { return stream_; }

 private:
  int device_;
  cudaStream_t stream_ = nullptr;
  cudaStream_t previous_stream_ = nullptr;
};

// Ends a capture that the step's failure interrupted, dropping what it recorded.
void abandon_capture(cudaStream_t stream) {
  cudaGraph_t partial = nullptr;
  if (cudaStreamEndCapture(stream, &partial) != cudaSuccess) cudaGetLastError();
  if (partial != nullptr) cudaGraphDestroy(partial);
}

}  // namespace

void CudaGraph::capture(const std::function<void()>& step, int device) {
  EMBER_CHECK(!is_captured(), "CudaGraph::capture: this graph holds a capture already; make another CudaGraph");
  EMBER_CHECK(!capturing, "CudaGraph::capture: another capture is under way; captures do not nest");
  check_device(device);
  State& state = *state_;
  state.device = device;
  // Made before the capture, outside the graph's pool: the replays' random kernels read it.
  state.seed_and_offset = zeros({2}, TensorOptions(kInt64).device(Device::cuda(device)));
  // The capture's stream does not wait for the default stream's queued work: let it finish.
  synchronize();
  if (!state.has_pool) {
    state.pool = create_graph_pool(device);
    state.has_pool = true;
  }
  // cuBLAS cannot create a handle inside a capture, and its workspace must not come from the
  // graph's pool: both are made now, if the process has not made them yet.
  prepare_cublas(device);
  // Whatever the step changes outside the graph is undone if the capture fails (declared before
  // the scope, so the undo runs after the pool routing has ended).
  CaptureRollback rollback;
  cudaGraph_t graph = nullptr;
  {
    CaptureScope scope(device, state.pool, reinterpret_cast<const uint64_t*>(state.seed_and_offset.data_ptr<int64_t>()));
    check(cudaStreamBeginCapture(scope.stream(), cudaStreamCaptureModeThreadLocal), "CudaGraph::capture");
    try {
      step();
    } catch (const std::exception& error) {
      abandon_capture(scope.stream());
      fail("CudaGraph::capture: the step failed while it was captured: {} (a captured step may not wait for the "
           "GPU: no item(), cpu(), synchronize() or copy from host memory inside it)",
           error.what());
    }
    const cudaError_t ended = cudaStreamEndCapture(scope.stream(), &graph);
    if (ended != cudaSuccess) {
      cudaGetLastError();
      fail("CudaGraph::capture: CUDA could not record the step ({}): something in it waited for the GPU or used "
           "another stream",
           cudaGetErrorString(ended));
    }
    state.counters_per_replay = Generator::global().end_graph_capture();
  }
  const cudaError_t instantiated = cudaGraphInstantiate(&state.exec, graph, 0);
  cudaGraphDestroy(graph);
  check(instantiated, "CudaGraph::capture: cudaGraphInstantiate");
  rollback.commit();
}

void CudaGraph::replay() {
  EMBER_CHECK(is_captured(), "CudaGraph::replay: nothing captured; call capture(step) first");
  State& state = *state_;
  if (state.counters_per_replay > 0) {
    const PhiloxState base = Generator::global().reserve(state.counters_per_replay);
    launch_write_seed_and_offset(reinterpret_cast<uint64_t*>(state.seed_and_offset.data_ptr<int64_t>()), base.seed,
                                 base.offset, current_stream());
  }
  check(cudaGraphLaunch(state.exec, current_stream()), "CudaGraph::replay: cudaGraphLaunch");
}

}  // namespace ember::cuda
