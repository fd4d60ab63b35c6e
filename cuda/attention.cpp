// Registers the fused CUDA attention kernels (cuda/attention.cu) into core's tables. The
// forward returns the log-sum-exp of each row of scores [*batch, L], which is all its backward
// needs besides the inputs and the output: memory stays linear in the sequence lengths.
#include "core/ops/attention.h"
#include "core/ops/factory.h"
#include "cuda/attention_kernels.h"
#include "cuda/attention_tensor_layout.h"

namespace ember::cuda {
namespace {

// [*batch, L]: the shape of one value per query row.
Shape row_values_shape(const Tensor& q) { return Shape(q.sizes().begin(), q.sizes().end() - 1); }

template <class T>
AttentionPointers<T> pointers_of(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v,
                                 const kernels::AttentionArgs& args) {
  AttentionPointers<T> pointers;
  pointers.q = q.data_ptr<T>();
  pointers.k = k.data_ptr<T>();
  pointers.v = v.data_ptr<T>();
  pointers.out = out.data_ptr<T>();
  if (args.mask.defined()) {
    if (args.mask.dtype() == kBool) {
      pointers.allowed = args.mask.data_ptr<bool>();
    } else {
      pointers.added = args.mask.data_ptr<T>();
    }
  }
  pointers.is_causal = args.is_causal;
  pointers.scale = static_cast<T>(args.scale);
  pointers.dropout_p = static_cast<float>(args.dropout_p);
  pointers.dropout_state = args.dropout_state;
  return pointers;
}

Tensor attention_cuda(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v,
                      const kernels::AttentionArgs& args) {
  const Tensor log_sum_exp = make_tensor(row_values_shape(q), q.dtype(), q.device());
  const AttentionLayout layout =
      attention_layout({&q, &k, &v, &out, args.mask.defined() ? &args.mask : nullptr, nullptr, nullptr, nullptr,
                        nullptr});
  visit_floating(q.dtype(), "attention", [&]<class T>() {
    AttentionPointers<T> pointers = pointers_of<T>(out, q, k, v, args);
    pointers.log_sum_exp = log_sum_exp.data_ptr<T>();
    launch_attention_forward<T>(layout, pointers);
  });
  return log_sum_exp;
}
EMBER_REGISTER_KERNEL(kernels::attention, DeviceType::CUDA, attention_cuda);

void attention_backward_cuda(const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v,
                             const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                             const Tensor& out, const Tensor& log_sum_exp, const kernels::AttentionArgs& args) {
  const bool need_scores = grad_q.defined() || grad_k.defined();
  const Tensor out_dot_grad = need_scores ? make_tensor(row_values_shape(q), q.dtype(), q.device()) : Tensor();
  // Every key tile adds its share of grad_q.
  if (grad_q.defined()) kernels::fill[grad_q.device()](grad_q, 0.0);
  const AttentionLayout layout =
      attention_layout({&q, &k, &v, &out, args.mask.defined() ? &args.mask : nullptr, &grad_out, &grad_q, &grad_k,
                        &grad_v});
  visit_floating(q.dtype(), "attention_backward", [&]<class T>() {
    AttentionPointers<T> pointers = pointers_of<T>(out, q, k, v, args);
    pointers.log_sum_exp = log_sum_exp.data_ptr<T>();
    pointers.grad_out = grad_out.data_ptr<T>();
    if (grad_q.defined()) pointers.grad_q = grad_q.data_ptr<T>();
    if (grad_k.defined()) pointers.grad_k = grad_k.data_ptr<T>();
    if (grad_v.defined()) pointers.grad_v = grad_v.data_ptr<T>();
    if (need_scores) pointers.out_dot_grad = out_dot_grad.data_ptr<T>();
    launch_attention_backward<T>(layout, pointers);
  });
}
EMBER_REGISTER_KERNEL(kernels::attention_backward, DeviceType::CUDA, attention_backward_cuda);

}  // namespace
}  // namespace ember::cuda
