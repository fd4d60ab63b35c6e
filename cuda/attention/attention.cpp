// Registers the fused CUDA attention kernels (cuda/attention/attention.cu) into core's tables. The
// forward returns the log-sum-exp of each row of scores [*batch, L], which is all its backward
// needs besides the inputs and the output: memory stays linear in the sequence lengths. For
// bfloat16 and float16 the log-sum-exp is float32, and grad_q adds up in a float32 buffer that
// is rounded once into grad_q at the end.
#include "core/ops/attention.h"
#include "core/ops/factory.h"
#include "cuda/attention/attention_kernels.h"
#include "cuda/attention/attention_tensor_layout.h"
#include "cuda/ops/copy_kernels.h"
#include "cuda/ops/device_elements.h"
#include "cuda/ops/tensor_layout.h"

namespace ember::cuda {
namespace {

// [*batch, L] values of q's compute type (float32 for 16-bit q): one per query row.
Tensor row_values(const Tensor& q) {
  const DType dtype = is_16_bit_floating_point(q.dtype()) ? kFloat32 : q.dtype();
  return make_tensor(Shape(q.sizes().begin(), q.sizes().end() - 1), dtype, q.device());
}

// T: the host element type; the pointers are of its device type.
template <class T>
AttentionPointers<device_element_t<T>> pointers_of(const Tensor& out, const Tensor& q, const Tensor& k,
                                                   const Tensor& v, const kernels::AttentionArgs& args) {
  AttentionPointers<device_element_t<T>> pointers;
  pointers.q = device_data<T>(q);
  pointers.k = device_data<T>(k);
  pointers.v = device_data<T>(v);
  pointers.out = device_data<T>(out);
  if (args.mask.defined()) {
    if (args.mask.dtype() == kBool) {
      pointers.allowed = args.mask.data_ptr<bool>();
    } else {
      pointers.added = device_data<T>(args.mask);
    }
  }
  pointers.is_causal = args.is_causal;
  pointers.scale = static_cast<compute_type<T>>(args.scale);
  pointers.dropout_p = static_cast<float>(args.dropout_p);
  if (args.dropout_p > 0) pointers.dropout_keep_scale = static_cast<compute_type<T>>(1.0 / (1.0 - args.dropout_p));
  pointers.dropout_state = args.dropout_state;
  return pointers;
}

Tensor attention_cuda(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v,
                      const kernels::AttentionArgs& args) {
  const Tensor log_sum_exp = row_values(q);
  const AttentionLayout layout =
      attention_layout({&q, &k, &v, &out, args.mask.defined() ? &args.mask : nullptr, nullptr, nullptr, nullptr,
                        nullptr});
  visit_any_floating(q.dtype(), "attention", [&]<class T>() {
    AttentionPointers<device_element_t<T>> pointers = pointers_of<T>(out, q, k, v, args);
    pointers.log_sum_exp = log_sum_exp.data_ptr<compute_type<T>>();
    launch_attention_forward<device_element_t<T>>(layout, pointers);
  });
  return log_sum_exp;
}
EMBER_REGISTER_KERNEL(kernels::attention, DeviceType::CUDA, attention_cuda);

void attention_backward_cuda(const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v,
                             const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                             const Tensor& out, const Tensor& log_sum_exp, const kernels::AttentionArgs& args) {
  const bool need_scores = grad_q.defined() || grad_k.defined();
  const Tensor out_dot_grad = need_scores ? row_values(q) : Tensor();
  // Every key tile adds its share of grad_q atomically: into grad_q itself, or for 16-bit q
  // into a float32 buffer (16-bit atomics would round at every addition), rounded at the end.
  const bool widened_grad_q = grad_q.defined() && is_16_bit_floating_point(q.dtype());
  const Tensor grad_q_sum = widened_grad_q ? make_tensor(grad_q.sizes(), kFloat32, grad_q.device()) : grad_q;
  if (grad_q_sum.defined()) kernels::fill[grad_q_sum.device()](grad_q_sum, 0.0);
  const AttentionLayout layout =
      attention_layout({&q, &k, &v, &out, args.mask.defined() ? &args.mask : nullptr, &grad_out, &grad_q_sum,
                        &grad_k, &grad_v});
  visit_any_floating(q.dtype(), "attention_backward", [&]<class T>() {
    using C = compute_type<T>;
    AttentionPointers<device_element_t<T>> pointers = pointers_of<T>(out, q, k, v, args);
    pointers.log_sum_exp = log_sum_exp.data_ptr<C>();
    pointers.grad_out = device_data<T>(grad_out);
    if (grad_q_sum.defined()) pointers.grad_q = grad_q_sum.data_ptr<C>();
    if (grad_k.defined()) pointers.grad_k = device_data<T>(grad_k);
    if (grad_v.defined()) pointers.grad_v = device_data<T>(grad_v);
    if (need_scores) pointers.out_dot_grad = out_dot_grad.data_ptr<C>();
    launch_attention_backward<device_element_t<T>>(layout, pointers);
    if (widened_grad_q) {
      launch_convert<device_element_t<T>, float>(strided_layout<2>("attention_backward", {&grad_q, &grad_q_sum}),
                                                 grad_q.numel(), device_data<T>(grad_q), grad_q_sum.data_ptr<float>());
    }
  });
}
EMBER_REGISTER_KERNEL(kernels::attention_backward, DeviceType::CUDA, attention_backward_cuda);

}  // namespace
}  // namespace ember::cuda
