// The hook registry and the end-of-pass callback queue of core/autograd/hooks.h.
#include "core/autograd/hooks.h"

#include <deque>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace ember::autograd {
namespace {

struct RegisteredHook {
  HookId id;
  std::weak_ptr<TensorImpl> leaf;  // a new tensor at a recycled address must not inherit the hook
  PostAccumulateGradHook hook;
};

struct Registry {
  std::mutex mutex;
  HookId next_id = 1;
  std::unordered_map<const TensorImpl*, std::vector<RegisteredHook>> by_leaf;
  std::unordered_map<HookId, const TensorImpl*> leaf_of;
};

Registry& registry() {
  static Registry instance;
  return instance;
}

// One queue per thread: a backward pass runs on the thread that called backward().
thread_local std::vector<std::function<void()>>* current_callbacks = nullptr;

}  // namespace

HookId register_post_accumulate_grad_hook(const Tensor& leaf, PostAccumulateGradHook hook) {
  EMBER_CHECK(leaf.defined(), "register_post_accumulate_grad_hook: tensor is undefined");
  EMBER_CHECK(leaf.is_leaf() && leaf.requires_grad(),
              "register_post_accumulate_grad_hook: expected a leaf that requires grad, got a tensor of shape {} "
              "that {}",
              shape_str(leaf.sizes()), leaf.requires_grad() ? "was computed by an op" : "does not require grad");
  EMBER_CHECK(hook != nullptr, "register_post_accumulate_grad_hook: the hook is empty");
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  const TensorImpl* key = leaf.impl();
  std::vector<RegisteredHook>& hooks = r.by_leaf[key];
  if (!hooks.empty() && hooks.front().leaf.expired()) {
    for (const RegisteredHook& stale : hooks) r.leaf_of.erase(stale.id);
    hooks.clear();
  }
  const HookId id = r.next_id++;
  hooks.push_back({id, leaf.impl_ptr(), std::move(hook)});
  r.leaf_of[id] = key;
  return id;
}

void remove_post_accumulate_grad_hook(HookId id) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  auto found = r.leaf_of.find(id);
  if (found == r.leaf_of.end()) return;
  auto hooks = r.by_leaf.find(found->second);
  if (hooks != r.by_leaf.end()) {
    std::erase_if(hooks->second, [id](const RegisteredHook& h) { return h.id == id; });
    if (hooks->second.empty()) r.by_leaf.erase(hooks);
  }
  r.leaf_of.erase(found);
}

void queue_callback(std::function<void()> callback) {
  EMBER_CHECK(current_callbacks != nullptr,
              "queue_callback: no backward pass is running (call it from a hook or a node's backward)");
  current_callbacks->push_back(std::move(callback));
}

namespace detail {

bool has_post_accumulate_grad_hooks() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  return !r.by_leaf.empty();
}

void run_post_accumulate_grad_hooks(const std::shared_ptr<TensorImpl>& leaf) {
  std::vector<PostAccumulateGradHook> to_run;
  {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    auto hooks = r.by_leaf.find(leaf.get());
    if (hooks == r.by_leaf.end()) return;
    for (const RegisteredHook& h : hooks->second) {
      if (h.leaf.lock() == leaf) to_run.push_back(h.hook);
    }
  }
  // Outside the lock: a hook may register or remove hooks.
  const Tensor tensor(leaf);
  for (const PostAccumulateGradHook& hook : to_run) hook(tensor);
}

namespace {
// Nested passes (a callback may run a backward of its own); a deque keeps references to the
// outer queues valid while an inner one is pushed.
thread_local std::deque<std::vector<std::function<void()>>> callback_stack;
}

CallbackScope::CallbackScope() {
  callback_stack.emplace_back();
  current_callbacks = &callback_stack.back();
}

CallbackScope::~CallbackScope() {
  callback_stack.pop_back();
  current_callbacks = callback_stack.empty() ? nullptr : &callback_stack.back();
}

void CallbackScope::run() {
  // A callback may queue another (it still runs in this pass); index, since the vector may grow.
  std::vector<std::function<void()>>& callbacks = callback_stack.back();
  for (size_t i = 0; i < callbacks.size(); ++i) {
    std::function<void()> callback = std::move(callbacks[i]);
    callback();
  }
  callbacks.clear();
}

}  // namespace detail
}  // namespace ember::autograd
