// The unary ops' float32 vector functions (core/cpu/kernels/vector_functions.h: exp, tanh,
// sigmoid, erf, the GELUs and their backward) run over tensors of any strides: the rung's kernel
// is called on blocks of contiguous float32, a 16-bit tensor's blocks widened to float32 before
// and rounded once after, and an operand that is not contiguous in out's shape (a view, a
// broadcast) gathered into a contiguous copy first.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "core/cpu/half_rows.h"
#include "core/cpu/kernel_table.h"
#include "core/cpu/loops.h"
#include "core/parallel.h"
#include "core/tensor.h"

namespace ember::cpu {

namespace detail {

// Elements per block: a few float32 blocks of this size sit in L1.
inline constexpr int64_t kVectorFunctionBlock = 1024;

// t's elements in out's shape, contiguous: t itself where it already is, else a gathered copy.
template <class T>
Tensor contiguous_in_shape_of(const Tensor& t, const Tensor& out) {
  if (t.is_contiguous() && t.sizes() == out.sizes()) return t;
  Tensor dense = make_tensor(out.sizes(), t.dtype(), out.device());
  for_each_element<T, T>(dense, {t}, [](compute_type<T> v) { return v; });
  return dense;
}

}  // namespace detail

// out = kernel(inputs...) elementwise, where kernel(const float* in..., int64_t count, float* out)
// runs on contiguous float32 blocks. T is float or a 16-bit format.
template <class T, class Kernel, class... Inputs>
void run_on_float32_blocks(const Tensor& out, Kernel kernel, const Inputs&... inputs) {
  constexpr int64_t kBlock = detail::kVectorFunctionBlock;
  const std::array<Tensor, sizeof...(Inputs)> dense{detail::contiguous_in_shape_of<T>(inputs, out)...};
  const Tensor target = out.is_contiguous() ? out : make_tensor(out.sizes(), out.dtype(), out.device());
  std::array<const T*, sizeof...(Inputs)> sources;
  for (size_t i = 0; i < sources.size(); ++i) sources[i] = dense[i].template data_ptr<T>();
  T* const result = target.data_ptr<T>();
  const int64_t n = out.numel();
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  parallel_for(blocks, 8 * kBlock, [&](int64_t begin, int64_t end) {
    for (int64_t block = begin; block < end; ++block) {
      const int64_t start = block * kBlock, count = std::min(kBlock, n - start);
      [&]<size_t... I>(std::index_sequence<I...>) {
        if constexpr (std::is_same_v<T, float>) {
          kernel((sources[I] + start)..., count, result + start);
        } else {
          float widened[sizeof...(Inputs)][kBlock];
          float results[kBlock];
          (widen_row(sources[I] + start, count, widened[I]), ...);
          kernel(widened[I]..., count, results);
          round_row(results, count, result + start);
        }
      }(std::index_sequence_for<Inputs...>{});
    }
  });
  if (!out.is_contiguous()) for_each_element<T, T>(out, {target}, [](compute_type<T> v) { return v; });
}

// out = f(x) by the rung's float32 kernel, for float32 and 16-bit tensors.
template <class T>
void map_vector_function(VectorFunction f, const Tensor& out, const Tensor& x) {
  const KernelTable& table = kernels();
  run_on_float32_blocks<T>(
      out, [&](const float* in, int64_t count, float* result) { table.map_f32(f, in, count, result); }, x);
}

// grad_x = grad * f'(x) by the rung's float32 kernel (f a GELU), for float32 and 16-bit tensors.
template <class T>
void vector_function_backward(VectorFunction f, const Tensor& grad_x, const Tensor& grad, const Tensor& x) {
  const KernelTable& table = kernels();
  run_on_float32_blocks<T>(
      grad_x,
      [&](const float* g, const float* in, int64_t count, float* result) {
        table.activation_backward_f32(f, g, in, count, result);
      },
      grad, x);
}

}  // namespace ember::cpu
