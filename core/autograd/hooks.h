// Hooks into the backward pass: a function run when a leaf's gradient for the pass is complete
// (PyTorch's register_post_accumulate_grad_hook), and callbacks run once when the pass ends.
// Data-parallel training uses both: it starts reducing a bucket of gradients as soon as they are
// all final, while the rest of the backward pass still runs, and waits for the reductions at the end.
#pragma once

#include <cstdint>
#include <functional>

#include "core/tensor.h"

namespace ember::autograd {

// Called with the leaf once every gradient the backward pass sends it has been added into its
// .grad (which stays undefined when every one of them was zero/undefined). A leaf the pass does
// not reach is not called.
using PostAccumulateGradHook = std::function<void(const Tensor& leaf)>;
using HookId = int64_t;

// Registers `hook` on a leaf that requires grad; throws for a non-leaf or a tensor that does not
// require grad. The hook lives until removed or until the leaf is destroyed.
HookId register_post_accumulate_grad_hook(const Tensor& leaf, PostAccumulateGradHook hook);
// Removes a hook; an id already removed is ignored.
void remove_post_accumulate_grad_hook(HookId id);

// Queues `callback` to run when the backward pass now running ends (after every gradient is
// accumulated and every hook has run). Only valid inside a backward pass, from a hook or a node's
// backward; throws otherwise.
void queue_callback(std::function<void()> callback);

namespace detail {
// For the engine: whether any hook is registered (so a pass without hooks counts nothing), the
// hooks of one leaf, and the callback queue of the current pass.
bool has_post_accumulate_grad_hooks();
void run_post_accumulate_grad_hooks(const std::shared_ptr<TensorImpl>& leaf);
// Opens the callback queue of a backward pass for the lifetime of the scope; run() empties it.
class CallbackScope {
 public:
  CallbackScope();
  ~CallbackScope();
  CallbackScope(const CallbackScope&) = delete;
  CallbackScope& operator=(const CallbackScope&) = delete;
  void run();
};
}  // namespace detail

}  // namespace ember::autograd
