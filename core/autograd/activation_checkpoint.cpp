// autograd::checkpoint: a node that keeps its block's inputs and recomputes the block in backward.
#include "core/autograd/activation_checkpoint.h"

#include <array>

#include "core/autocast.h"
#include "core/autograd/grad.h"
#include "core/autograd/record.h"
#include "core/random.h"

namespace ember::autograd {
namespace {

// The autocast state of every device type, to recompute in the forward's precision.
struct AutocastState {
  std::array<bool, kNumDeviceTypes> enabled{};
  std::array<DType, kNumDeviceTypes> dtype{};

  static AutocastState current() {
    AutocastState state;
    for (int d = 0; d < kNumDeviceTypes; ++d) {
      state.enabled[d] = autocast::is_enabled(static_cast<DeviceType>(d));
      state.dtype[d] = autocast::dtype(static_cast<DeviceType>(d));
    }
    return state;
  }
};

// For the recomputation: the forward's random state, grad mode on and the forward's autocast
// state; everything put back on exit, even when fn throws.
class Replay {
 public:
  Replay(const PhiloxState& random_state, const AutocastState& autocast_state)
      : random_state_(Generator::global().state()), grad_mode_(true) {
    Generator::global().set_state(random_state);
    cpu_.emplace(DeviceType::CPU, autocast_state.dtype[0], autocast_state.enabled[0]);
    cuda_.emplace(DeviceType::CUDA, autocast_state.dtype[1], autocast_state.enabled[1]);
  }
  ~Replay() {
    cuda_.reset();
    cpu_.reset();
    Generator::global().set_state(random_state_);
  }
  Replay(const Replay&) = delete;
  Replay& operator=(const Replay&) = delete;

 private:
  PhiloxState random_state_;
  GradModeGuard grad_mode_;
  std::optional<AutocastGuard> cpu_, cuda_;
};

}  // namespace

Tensor checkpoint(const std::function<Tensor(const std::vector<Tensor>&)>& fn, const std::vector<Tensor>& inputs) {
  if (!any_requires_grad(inputs)) return fn(inputs);  // nothing will ask for a backward
  const PhiloxState random_state = Generator::global().state();
  const AutocastState autocast_state = AutocastState::current();
  Tensor output;
  {
    NoGradGuard no_grad;
    output = fn(inputs);
  }
  EMBER_CHECK(output.defined(), "checkpoint: fn returned an undefined tensor");
  // fn may have returned one of its inputs unchanged; the node needs a tensor of its own.
  for (const Tensor& input : inputs) {
    if (input.defined() && input.impl() == output.impl()) output = output.detach();
  }

  std::vector<SavedTensor> saved;
  std::vector<bool> needs_grad;
  for (const Tensor& input : inputs) {
    saved.emplace_back(input);
    needs_grad.push_back(input.defined() && input.requires_grad());
  }
  return record("checkpoint", output, inputs,
                [fn, saved = std::move(saved), needs_grad, random_state, autocast_state](const Tensor& grad_output) {
                  EMBER_CHECK(!GradMode::is_enabled(),
                              "has no second derivative: its recomputation accumulates into .grad, so it cannot "
                              "record a differentiable backward (create_graph); call fn without checkpoint");
                  EMBER_CHECK(!detail::in_grad_call(),
                              "cannot run inside autograd::grad: its recomputation backpropagates into the "
                              "parameters' .grad, which grad() must not touch; use backward()");
                  std::vector<Tensor> replay_inputs;
                  for (size_t i = 0; i < saved.size(); ++i) {
                    Tensor input = saved[i].get();
                    if (needs_grad[i]) {
                      input = input.detach();
                      input.requires_grad_();
                    }
                    replay_inputs.push_back(input);
                  }
                  {
                    Replay replay(random_state, autocast_state);
                    const Tensor recomputed = fn(replay_inputs);
                    EMBER_CHECK(recomputed.defined() && recomputed.sizes() == grad_output.sizes(),
                                "recomputing fn gave shape {}, the forward gave {}",
                                recomputed.defined() ? shape_str(recomputed.sizes()) : "(undefined)",
                                shape_str(grad_output.sizes()));
                    if (recomputed.requires_grad()) recomputed.backward(grad_output);
                  }
                  std::vector<Tensor> gradients;
                  for (size_t i = 0; i < saved.size(); ++i) {
                    gradients.push_back(needs_grad[i] ? replay_inputs[i].grad() : Tensor());
                  }
                  return gradients;
                });
}

}  // namespace ember::autograd
