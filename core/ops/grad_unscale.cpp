// The CPU kernel of kernels::unscale_grads (core/ops/grad_unscale.h): one pass over each
// gradient, the multiply and the check together, split across threads by parallel_for.
#include "core/ops/grad_unscale.h"

#include <atomic>
#include <cmath>

#include "core/dtype.h"
#include "core/ops/inplace.h"
#include "core/parallel.h"

namespace ember {
namespace kernels {
constinit KernelTable<void(std::span<const Tensor> grads, double inverse_scale, const Tensor& found_inf)>
    unscale_grads{"unscale_grads"};
}  // namespace kernels

namespace {

// A strided gradient (an op's backward can leave a view) goes through the same loop on a
// contiguous copy, copied back.
template <class T>
bool unscale_dense(T* values, int64_t count, double inverse_scale) {
  using C = compute_type<T>;
  const C inverse = static_cast<C>(inverse_scale);
  std::atomic<bool> found{false};
  parallel_for(count, 1, [&](int64_t begin, int64_t end) {
    bool chunk_found = false;
    for (int64_t i = begin; i < end; ++i) {
      const T stored = static_cast<T>(static_cast<C>(values[i]) * inverse);
      values[i] = stored;
      chunk_found |= !std::isfinite(static_cast<C>(stored));
    }
    if (chunk_found) found.store(true, std::memory_order_relaxed);
  });
  return found.load();
}

void unscale_grads_cpu(std::span<const Tensor> grads, double inverse_scale, const Tensor& found_inf) {
  bool found = false;
  for (const Tensor& grad : grads) {
    visit_any_floating(grad.dtype(), "unscale_grads", [&]<class T>() {
      if (grad.is_contiguous()) {
        found |= unscale_dense(grad.data_ptr<T>(), grad.numel(), inverse_scale);
      } else {
        const Tensor dense = grad.contiguous();
        found |= unscale_dense(dense.data_ptr<T>(), dense.numel(), inverse_scale);
        Tensor target = grad;
        target.copy_(dense);
      }
    });
  }
  if (found) found_inf.data_ptr<float>()[0] = 1.0f;
}
EMBER_REGISTER_KERNEL(kernels::unscale_grads, DeviceType::CPU, unscale_grads_cpu);

}  // namespace

void unscale_grads(std::span<const Tensor> grads, double inverse_scale, const Tensor& found_inf) {
  kernels::unscale_grads[found_inf.device()](grads, inverse_scale, found_inf);
  mark_written_in_place(grads);
}

}  // namespace ember
