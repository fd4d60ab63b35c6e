// Data-parallel training's gradient averaging (nn/parallel/distributed_data_parallel.h).
#include "nn/parallel/distributed_data_parallel.h"

#include <chrono>
#include <unordered_set>

#include "core/autograd/grad_mode.h"
#include "core/ops/factory.h"

namespace ember::nn {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

Module& checked(const std::shared_ptr<Module>& module) {
  EMBER_CHECK(module != nullptr, "DistributedDataParallel: the module is null");
  return *module;
}

}  // namespace

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<Module> module,
                                                 DistributedDataParallelOptions options)
    : DistributedDataParallel(checked(module), options) {
  owner_ = std::move(module);
}

DistributedDataParallel::DistributedDataParallel(Module& module, DistributedDataParallelOptions options)
    : module_(module), options_(options) {
  EMBER_CHECK(distributed::is_initialized(),
              "DistributedDataParallel: the process group is not initialised (call distributed::init() first, in "
              "a program started by mpirun)");
  EMBER_CHECK(options_.bucket_cap_bytes >= 1, "DistributedDataParallel: bucket_cap_bytes must be at least 1, got {}",
              options_.bucket_cap_bytes);
  // Every rank starts from rank 0's weights. broadcast checks that the ranks' tensors agree in
  // dtype and size, so two different models fail here rather than in the first backward.
  {
    NoGradGuard no_grad;
    for (const auto& [name, parameter] : module_.named_parameters()) distributed::broadcast(parameter, 0);
    for (const auto& [name, buffer] : module_.named_buffers()) distributed::broadcast(buffer, 0);
  }

  std::unordered_set<const TensorImpl*> seen;  // a shared parameter is reduced once
  for (const Tensor& parameter : module_.parameters()) {
    if (parameter.requires_grad() && seen.insert(parameter.impl()).second) parameters_.push_back(parameter);
  }
  std::vector<size_t> reverse(parameters_.size());
  for (size_t i = 0; i < reverse.size(); ++i) reverse[i] = reverse.size() - 1 - i;
  plan_buckets(reverse);
  for (size_t i = 0; i < parameters_.size(); ++i) {
    hooks_.push_back(autograd::register_post_accumulate_grad_hook(parameters_[i],
                                                                  [this, i](const Tensor&) { on_gradient_ready(i); }));
  }
}

void DistributedDataParallel::plan_buckets(const std::vector<size_t>& order) {
  buckets_ = plan_gradient_buckets(parameters_, options_.bucket_cap_bytes, order);
  bucket_of_.assign(parameters_.size(), 0);
  flat_.clear();
  for (size_t b = 0; b < buckets_.size(); ++b) {
    for (size_t i : buckets_[b].parameters) bucket_of_[i] = b;
    flat_.push_back(empty({buckets_[b].numel}, TensorOptions(buckets_[b].dtype).device(buckets_[b].device)));
  }
}

// Rank 0's arrival order, with the parameters it got no gradient for after the others, becomes
// every rank's bucket order: the ranks' buckets must match one for one.
void DistributedDataParallel::replan_from_arrival_order() {
  std::vector<bool> arrived(parameters_.size(), false);
  std::vector<int64_t> order;
  for (size_t i : arrival_) {
    arrived[i] = true;
    order.push_back(static_cast<int64_t>(i));
  }
  for (size_t i = parameters_.size(); i-- > 0;) {
    if (!arrived[i]) order.push_back(static_cast<int64_t>(i));
  }
  Tensor shared = tensor(order, {static_cast<int64_t>(order.size())});
  distributed::broadcast(shared, 0);
  std::vector<size_t> planned;
  for (int64_t i : shared.to_vector<int64_t>()) planned.push_back(static_cast<size_t>(i));
  plan_buckets(planned);
  arrival_.clear();
  replanned_ = true;
}

DistributedDataParallel::~DistributedDataParallel() {
  for (autograd::HookId id : hooks_) autograd::remove_post_accumulate_grad_hook(id);
}

void DistributedDataParallel::on_gradient_ready(size_t parameter) {
  if (!sync_enabled_) return;
  if (!step_running_) {
    step_running_ = true;
    pending_in_bucket_.clear();
    for (const GradientBucket& bucket : buckets_) pending_in_bucket_.push_back(static_cast<int64_t>(bucket.parameters.size()));
    ready_.assign(parameters_.size(), false);
    work_.assign(buckets_.size(), distributed::Work());
    next_to_launch_ = 0;
    autograd::queue_callback([this] { finish_step(); });
  }
  EMBER_CHECK(!ready_[parameter],
              "DistributedDataParallel: parameter {} got its gradient twice in one synchronised step (did an "
              "earlier backward() stop part way?)",
              parameter);
  ready_[parameter] = true;
  if (!replanned_) arrival_.push_back(parameter);
  --pending_in_bucket_[bucket_of_[parameter]];
  if (options_.overlap) {
    const size_t before = next_to_launch_;
    launch_ready_buckets();
    stats_.buckets_overlapped += static_cast<int64_t>(next_to_launch_ - before);
  }
  // MPI moves a non-blocking collective forward only inside MPI calls: testing the ones in flight
  // here, between the backward pass's ops, is what lets them overlap it.
  for (size_t b = 0; b < next_to_launch_; ++b) work_[b].test();
}

void DistributedDataParallel::launch_ready_buckets() {
  // In bucket order on every rank, whatever order this rank's gradients came in: the ranks' MPI
  // and NCCL calls must match one for one.
  while (next_to_launch_ < buckets_.size() && pending_in_bucket_[next_to_launch_] == 0) launch(next_to_launch_++);
}

void DistributedDataParallel::launch(size_t b) {
  const auto start = std::chrono::steady_clock::now();
  const GradientBucket& bucket = buckets_[b];
  Tensor& flat = flat_[b];
  NoGradGuard no_grad;
  for (size_t k = 0; k < bucket.parameters.size(); ++k) {
    const Tensor& parameter = parameters_[bucket.parameters[k]];
    Tensor slot = flat.narrow(0, bucket.offsets[k], parameter.numel());
    const Tensor& grad = parameter.grad();
    if (grad.defined()) {
      slot.copy_(grad.reshape({parameter.numel()}));
    } else {
      slot.zero_();  // no gradient on this rank this step: it adds nothing to the average
    }
  }
  work_[b] = distributed::all_reduce_async(flat, distributed::ReduceOp::Mean);
  stats_.bytes_reduced += bucket.numel * static_cast<int64_t>(element_size(bucket.dtype));
  stats_.launch_seconds += seconds_since(start);
}

void DistributedDataParallel::finish_step() {
  // Buckets whose parameters did not all get a gradient on this rank start now, as zeros.
  while (next_to_launch_ < buckets_.size()) launch(next_to_launch_++);
  const auto start = std::chrono::steady_clock::now();
  for (distributed::Work& work : work_) work.wait();
  stats_.exposed_seconds += seconds_since(start);
  // Each .grad becomes a view of its bucket: no copy back, and the next step's copy into the
  // bucket comes from whatever tensor backward makes then.
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const GradientBucket& bucket = buckets_[b];
    for (size_t k = 0; k < bucket.parameters.size(); ++k) {
      const Tensor& parameter = parameters_[bucket.parameters[k]];
      parameter.impl()->grad = flat_[b].narrow(0, bucket.offsets[k], parameter.numel()).view(parameter.sizes());
    }
  }
  step_running_ = false;
  ++stats_.steps;
  // The .grad views keep the old buckets' memory alive: replanning allocates new ones.
  if (!replanned_) replan_from_arrival_order();
}

}  // namespace ember::nn
