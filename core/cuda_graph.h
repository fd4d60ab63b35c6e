// CUDA graphs: a step of work recorded once and replayed, in the manner of PyTorch's
// torch.cuda.CUDAGraph. A small model's training step is hundreds of short kernels, and the
// host's time to launch them one by one exceeds the GPU's time to run them; a replay launches
// the whole recorded step at once.
//
//   step();                                   // warm-up, uncaptured: creates handles, grads
//   ember::cuda::CudaGraph graph;
//   graph.capture([&] { loss = step(); });    // recorded, not run
//   for (...) { copy the batch into x; graph.replay(); optimizer.step(); loss.item(); }
//
// What a captured step must respect, as in PyTorch:
//   - Static inputs: tensors made before the capture (the batch, the parameters) are read at
//     the same addresses on every replay; keep them alive, and change them in place (copy_).
//   - Static outputs: tensors the step creates (the loss, gradients it assigns) live in the
//     graph's private memory pool and are overwritten by each replay.
//   - No host wait inside: item(), cpu(), synchronize() or a copy from host memory fail the
//     capture with an ember::Error.
//   - Random ops (dropout, rand) draw fresh numbers on each replay: the generator's seed and
//     offset are written to device memory before each replay, so replay n draws exactly what
//     the n-th uncaptured run of the step would have drawn (core/random.h).
//   - The optimizers read their learning rate and step count on the host, so optimizer.step()
//     runs outside the graph, after replay(); a step called during a capture is refused.
#pragma once

#include <functional>
#include <memory>

namespace ember::cuda {

class CudaGraph {
 public:
  CudaGraph();
  ~CudaGraph();
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  // Records what `step` queues on cuda:`device`, without running it. Once per graph.
  void capture(const std::function<void()>& step, int device = 0);
  // Runs the recorded work on the current stream, after what is queued there; no host wait.
  void replay();
  bool is_captured() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Whether a CudaGraph capture is under way on this thread: ops that cannot be recorded
// correctly refuse to run then.
bool is_capturing_graph();

}  // namespace ember::cuda
