// Copies between layouts, dtypes and devices. Everything here is one strided copy kernel: CPU
// to CPU registers below; the CUDA backend registers the copies that involve a GPU.
#include "core/ops/copy.h"

#include <type_traits>

#include "core/autograd/record.h"
#include "core/cpu/blas.h"
#include "core/cpu/loops.h"
#include "core/dispatch.h"
#include "core/float_to_int.h"
#include "core/memory_overlap.h"
#include "core/ops/elementwise.h"
#include "core/ops/inplace.h"

namespace ember {
namespace kernels {
constinit KernelTable<void(const Tensor& dst, const Tensor& src)> copy{"copy"};
}  // namespace kernels

namespace {

// Whether a value of type T widens exactly to float32 and back: float32 and the 16-bit formats.
template <class T>
constexpr bool is_float32_or_16_bit = std::is_same_v<compute_type<T>, float>;

// A conversion between float32 and a 16-bit format of two contiguous tensors of one shape, as
// autocast makes them: one pass of the rung's row conversions over each thread's share, where
// the element loop would widen each block into scratch, copy it and round it.
template <class Out, class In>
bool converted_in_one_pass(const Tensor& dst, const Tensor& src) {
  constexpr bool widening = std::is_same_v<Out, float> && !std::is_same_v<In, float> && is_float32_or_16_bit<In>;
  constexpr bool rounding = std::is_same_v<In, float> && !std::is_same_v<Out, float> && is_float32_or_16_bit<Out>;
  if constexpr (widening || rounding) {
    if (!dst.is_contiguous() || !src.is_contiguous() || dst.sizes() != src.sizes()) return false;
    if constexpr (widening) {
      cpu::widen_contiguous(src, dst);
    } else {
      cpu::round_contiguous(src, dst);
    }
    return true;
  }
  return false;
}

void copy_cpu(const Tensor& dst, const Tensor& src) {
  visit_any_dtype(dst.dtype(), [&]<class Out>() {
    visit_any_dtype(src.dtype(), [&]<class In>() {
      if (converted_in_one_pass<Out, In>(dst, src)) return;
      if constexpr (is_float32_or_16_bit<Out> && is_float32_or_16_bit<In> &&
                    (!std::is_same_v<Out, float> || std::is_same_v<In, Float16>)) {
        // Through float32 (exact from any of them, one rounding into Out): the element loop
        // widens and rounds 16-bit rows in blocks (cpu/loops.h, F16C for float16), where a
        // conversion between the value types would run element by element. (bfloat16 to float32
        // is a shift, which the direct loop below vectorises best.)
        cpu::for_each_element<Out, In>(dst, {src}, [](float value) { return value; });
      } else {
        // A double or an integer rounds to a 16-bit type once, through the value type's own
        // conversion (core/half.h), not through float32. A floating value becomes an integer
        // through float_to_int: NaN, inf and values out of range are defined there.
        cpu::for_each_element<Out, In>(dst, {src}, [](In value) {
          if constexpr (std::is_same_v<Out, int64_t> && !std::is_integral_v<In>) {
            return float_to_int<int64_t>(static_cast<compute_type<In>>(value));
          } else {
            return static_cast<Out>(value);
          }
        });
      }
    });
  });
}
EMBER_REGISTER_KERNEL(kernels::copy, DeviceType::CPU, copy_cpu);

Device kernel_device(const Tensor& dst, const Tensor& src) { return dst.is_cpu() ? src.device() : dst.device(); }

// A fresh contiguous tensor holding src's values as `dtype` on `device`.
Tensor copied(const Tensor& src, DType dtype, Device device) {
  Tensor out = make_tensor(src.sizes(), dtype, device);
  kernels::copy[kernel_device(out, src)](out, src);
  return out;
}

}  // namespace

Tensor contiguous(const Tensor& x) {
  if (x.is_contiguous()) return x;
  Tensor out = copied(x, x.dtype(), x.device());
  return autograd::record("contiguous", out, {x}, [](const Tensor& grad) { return autograd::grads(grad); });
}

Tensor clone(const Tensor& x) {
  Tensor out = copied(x, x.dtype(), x.device());
  return autograd::record("clone", out, {x}, [](const Tensor& grad) { return autograd::grads(grad); });
}

Tensor to_dtype(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  Tensor out = copied(x, dtype, x.device());
  if (!is_floating_point(dtype) || !is_floating_point(x.dtype())) return autograd::non_differentiable("to", out);
  const DType from = x.dtype();
  return autograd::record("to", out, {x}, [from](const Tensor& grad) { return autograd::grads(grad.to(from)); });
}

Tensor to_device(const Tensor& x, Device device) {
  if (x.device() == device) return x;
  Tensor out = copied(x, x.dtype(), device);
  const Device from = x.device();
  return autograd::record("to", out, {x}, [from](const Tensor& grad) { return autograd::grads(grad.to(from)); });
}

Tensor& copy_(Tensor& dst, const Tensor& src) {
  EMBER_CHECK(dst.defined() && src.defined(), "copy_: tensor is undefined");
  EMBER_CHECK(dst.dtype() == src.dtype(), "copy_: dtype mismatch: destination is {}, source is {} (convert with "
              "to() first)", dst.dtype(), src.dtype());
  EMBER_CHECK(is_broadcastable_to(src.sizes(), dst.sizes()),
              "copy_: source of shape {} cannot be broadcast to destination of shape {}", shape_str(src.sizes()),
              shape_str(dst.sizes()));
  autograd::check_inplace("copy_", dst, {src});
  check_no_internal_overlap(dst, "copy_");
  const Tensor readable = input_safe_to_read(dst, src, "copy_");
  kernels::copy[kernel_device(dst, src)](dst, readable);
  mark_written_in_place(dst);
  const Shape src_shape = src.sizes();
  autograd::record_inplace("copy_", dst, {src}, [src_shape](const Tensor& grad) {
    // The old contents of dst were overwritten: they get no gradient.
    return autograd::grads(Tensor(), sum_to(grad, src_shape));
  });
  return dst;
}

// Tensor member shorthands for the ops above.
Tensor Tensor::contiguous() const { return ember::contiguous(*this); }
Tensor Tensor::clone() const { return ember::clone(*this); }
Tensor Tensor::to(DType dtype) const { return to_dtype(*this, dtype); }
Tensor Tensor::to(Device device) const { return to_device(*this, device); }
Tensor& Tensor::copy_(const Tensor& src) { return ember::copy_(*this, src); }

}  // namespace ember
