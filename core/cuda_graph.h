// CUDA graphs: a step of work recorded once and replayed, in the manner of PyTorch's
// torch.cuda.CUDAGraph. A small model's training step is hundreds of short kernels, and the
// host's time to launch them one by one exceeds the GPU's time to run them; a replay launches
// the whole recorded step at once.
//
//   auto training_step = [&] {                 // forward, backward, clipping, optimizer step
//     optimizer.zero_grad();
//     Tensor loss = loss_fn(model.forward(x), y);
//     loss.backward();
//     nn::clip_grad_norm_(model.parameters(), 1.0);
//     optimizer.step();
//     return loss;
//   };
//   training_step();                           // warm-up, uncaptured: makes handles and state
//   ember::cuda::CudaGraph graph;
//   Tensor loss;
//   graph.capture([&] { loss = training_step(); });   // recorded, not run
//   for (...) {
//     x.copy_(next_x); y.copy_(next_y);        // the batch, into the captured inputs
//     scheduler.step();                        // the learning rate, into device memory
//     graph.replay();
//     fmt::print("{}\n", loss.item<double>());
//   }
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
//   - The optimizers read their learning rate and step counts from device memory
//     (core/ops/optimizer_steps.h): set the rate (set_lr, a Scheduler) between replays, never
//     inside the captured step. Their first step makes their state, so it runs uncaptured, and
//     their other hyper-parameters stay as they were at capture (changing one is refused).
//   - Shapes are fixed: a batch of another shape needs a graph of its own (nn/train/
//     graphed_steps.h keeps one per shape).
//   - A capture that fails (the step throws, or CUDA refuses to record it) leaves nothing
//     behind: the gradients the step assigned and the optimizer's captured mark are put back
//     (core/capture_rollback.h), so the step can run uncaptured or be captured again.
//   - Once an optimizer's step is captured, its state tensors stay where the graph recorded
//     them: load_state_dict and to_parameter_devices are refused; build them before capturing.
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
