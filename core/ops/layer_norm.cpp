// layer_norm: a fused forward that normalises each row (the trailing normalized_shape dims)
// and saves its mean and rstd, and a fused backward that produces dx, dweight and dbias in
// one pass over the rows.
#include "core/ops/layer_norm.h"

#include <cmath>
#include <vector>

#include "core/autocast.h"
#include "core/autograd/record.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/reduce.h"
#include "core/ops/unary.h"
#include "core/parallel.h"

namespace ember {
namespace kernels {
constinit KernelTable<void(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                           const Tensor& weight, const Tensor& bias, double eps)>
    layer_norm{"layer_norm"};
constinit KernelTable<void(const Tensor& grad_x, const Tensor& grad_weight, const Tensor& grad_bias,
                           const Tensor& grad_y, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                           const Tensor& weight)>
    layer_norm_backward{"layer_norm_backward"};
}  // namespace kernels

namespace {

// Two passes over a row that sits in cache: the mean, then the variance of x - mean, which
// stays accurate when the mean is large compared with the spread. A 16-bit x (with weight and
// bias of its dtype) is computed on in float32, its mean and rstd are kept in float32 and each
// output is rounded once.
void layer_norm_cpu(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& weight,
                    const Tensor& bias, double eps) {
  visit_any_floating(x.dtype(), "layer_norm", [&]<class T>() {
    using C = compute_type<T>;
    const int64_t rows = mean.numel();
    const int64_t n = rows == 0 ? 0 : x.numel() / rows;
    const T* in = x.data_ptr<T>();
    const T* w = weight.defined() ? weight.data_ptr<T>() : nullptr;
    const T* b = bias.defined() ? bias.data_ptr<T>() : nullptr;
    T* out = y.data_ptr<T>();
    C* mean_out = mean.data_ptr<C>();
    C* rstd_out = rstd.data_ptr<C>();
    const C inverse_n = C(1) / static_cast<C>(n);
    parallel_for(rows, 3 * n, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const T* row = in + r * n;
        T* out_row = out + r * n;
        C sum = 0;
#pragma omp simd reduction(+ : sum)
        for (int64_t i = 0; i < n; ++i) sum += C(row[i]);
        const C mu = sum * inverse_n;
        // Prefetching the next row (input for reading, output for writing) while this one is
        // in cache overlaps its memory traffic with this row's arithmetic.
        if (r + 1 < end) {
          constexpr int64_t kLine = 64 / static_cast<int64_t>(sizeof(T));
          for (int64_t i = 0; i < n; i += kLine) {
            __builtin_prefetch(row + n + i);
            __builtin_prefetch(out_row + n + i, 1);
          }
        }
        C squares = 0;
#pragma omp simd reduction(+ : squares)
        for (int64_t i = 0; i < n; ++i) squares += (C(row[i]) - mu) * (C(row[i]) - mu);
        const C sigma_inverse = C(1) / std::sqrt(squares * inverse_n + static_cast<C>(eps));
        mean_out[r] = mu;
        rstd_out[r] = sigma_inverse;
        if (w != nullptr && b != nullptr) {
#pragma omp simd
          for (int64_t i = 0; i < n; ++i) out_row[i] = T((C(row[i]) - mu) * sigma_inverse * C(w[i]) + C(b[i]));
        } else if (w != nullptr) {
#pragma omp simd
          for (int64_t i = 0; i < n; ++i) out_row[i] = T((C(row[i]) - mu) * sigma_inverse * C(w[i]));
        } else if (b != nullptr) {
#pragma omp simd
          for (int64_t i = 0; i < n; ++i) out_row[i] = T((C(row[i]) - mu) * sigma_inverse + C(b[i]));
        } else {
#pragma omp simd
          for (int64_t i = 0; i < n; ++i) out_row[i] = T((C(row[i]) - mu) * sigma_inverse);
        }
      }
    });
  });
}
EMBER_REGISTER_KERNEL(kernels::layer_norm, DeviceType::CPU, layer_norm_cpu);

// With xhat = (x - mean) * rstd and g = grad_y * weight (or grad_y without a weight):
//   grad_x      = rstd * (g - mean(g) - xhat * mean(g * xhat))   per row
//   grad_weight = sum over rows of grad_y * xhat
//   grad_bias   = sum over rows of grad_y
// The rows are split into one chunk per thread; each chunk sums its own partial grad_weight
// and grad_bias (no shared writes), and the partials are added up afterwards. grad_weight and
// grad_bias are undefined when not wanted. For 16-bit tensors mean and rstd are float32, the
// arithmetic is float32 and each gradient is rounded once.
void layer_norm_backward_cpu(const Tensor& grad_x, const Tensor& grad_weight, const Tensor& grad_bias,
                             const Tensor& grad_y, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                             const Tensor& weight) {
  visit_any_floating(x.dtype(), "layer_norm", [&]<class T>() {
    using C = compute_type<T>;
    const int64_t rows = mean.numel();
    const int64_t n = rows == 0 ? 0 : x.numel() / rows;
    const T* in = x.data_ptr<T>();
    const T* g = grad_y.data_ptr<T>();
    const C* mu = mean.data_ptr<C>();
    const C* sigma_inverse = rstd.data_ptr<C>();
    const T* w = weight.defined() ? weight.data_ptr<T>() : nullptr;
    T* gx = grad_x.defined() ? grad_x.data_ptr<T>() : nullptr;
    const bool want_weight = grad_weight.defined(), want_bias = grad_bias.defined();

    const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(omp_get_max_threads(), rows));
    const int64_t rows_per_chunk = rows == 0 ? 0 : (rows + chunks - 1) / chunks;
    // Partial sums in double for float32 (and 16-bit): a parameter's gradient adds up many rows.
    using Acc = std::conditional_t<std::is_same_v<C, float>, double, C>;
    std::vector<Acc> partial_weight(want_weight ? chunks * n : 0), partial_bias(want_bias ? chunks * n : 0);
    const int64_t cost_per_chunk = rows_per_chunk * n * 4;
    parallel_for(chunks, cost_per_chunk, [&](int64_t chunk_begin, int64_t chunk_end) {
      std::vector<C> scaled(n);  // grad_y * weight for one row
      for (int64_t chunk = chunk_begin; chunk < chunk_end; ++chunk) {
        Acc* pw = want_weight ? partial_weight.data() + chunk * n : nullptr;
        Acc* pb = want_bias ? partial_bias.data() + chunk * n : nullptr;
        const int64_t row_end = std::min(rows, (chunk + 1) * rows_per_chunk);
        for (int64_t r = chunk * rows_per_chunk; r < row_end; ++r) {
          const T* row = in + r * n;
          const T* grow = g + r * n;
          const C m = mu[r], s = sigma_inverse[r];
          if (pw != nullptr) {
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) pw[i] += static_cast<Acc>(C(grow[i]) * ((C(row[i]) - m) * s));
          }
          if (pb != nullptr) {
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) pb[i] += static_cast<Acc>(C(grow[i]));
          }
          if (gx == nullptr) continue;
          C* scaled_row = scaled.data();
          if (w != nullptr) {
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) scaled_row[i] = C(grow[i]) * C(w[i]);
          } else {
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) scaled_row[i] = C(grow[i]);
          }
          C sum_g = 0, sum_g_xhat = 0;
#pragma omp simd reduction(+ : sum_g, sum_g_xhat)
          for (int64_t i = 0; i < n; ++i) {
            sum_g += scaled_row[i];
            sum_g_xhat += scaled_row[i] * ((C(row[i]) - m) * s);
          }
          const C mean_g = sum_g / static_cast<C>(n), mean_g_xhat = sum_g_xhat / static_cast<C>(n);
          T* gx_row = gx + r * n;
#pragma omp simd
          for (int64_t i = 0; i < n; ++i) {
            gx_row[i] = T(s * (scaled_row[i] - mean_g - (C(row[i]) - m) * s * mean_g_xhat));
          }
        }
      }
    });
    // Add up the chunks' partials, split over the normalised elements.
    auto reduce_partials = [&](const std::vector<Acc>& partial, const Tensor& result) {
      T* out = result.data_ptr<T>();
      parallel_for(n, chunks, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          Acc total = 0;
          for (int64_t chunk = 0; chunk < chunks; ++chunk) total += partial[chunk * n + i];
          out[i] = static_cast<T>(static_cast<C>(total));
        }
      });
    };
    if (want_weight) reduce_partials(partial_weight, grad_weight);
    if (want_bias) reduce_partials(partial_bias, grad_bias);
  });
}
EMBER_REGISTER_KERNEL(kernels::layer_norm_backward, DeviceType::CPU, layer_norm_backward_cpu);

void check_parameter(const Tensor& parameter, const char* role, const Tensor& x, const Shape& normalized_shape) {
  if (!parameter.defined()) return;
  EMBER_CHECK(parameter.sizes() == normalized_shape,
              "layer_norm: {} of shape {} does not match normalized_shape {}", role, shape_str(parameter.sizes()),
              shape_str(normalized_shape));
  EMBER_CHECK(parameter.dtype() == x.dtype(), "layer_norm: {} has dtype {} but input has dtype {}", role,
              parameter.dtype(), x.dtype());
  EMBER_CHECK(parameter.device() == x.device(), "layer_norm: {} is on {} but input is on {}", role,
              parameter.device(), x.device());
}

// layer_norm's backward under create_graph, written with differentiable ops (composite, taken
// only then): the fused kernel reads mean and rstd saved without history, so here the
// statistics are recomputed from x, and every gradient stays a function of x, w and grad.
//   x^ = (x - mean) rstd,  g^ = grad w,
//   dx = rstd (g^ - mean(g^) - x^ mean(g^ x^)),  dw = sum(grad x^),  db = sum(grad)
std::vector<Tensor> differentiable_layer_norm_backward(const Tensor& grad, const Tensor& x, const Tensor& w,
                                                       const Shape& normalized_shape, double eps, bool need_x,
                                                       bool need_w, bool need_b) {
  Shape dims;
  for (int64_t d = x.dim() - static_cast<int64_t>(normalized_shape.size()); d < x.dim(); ++d) dims.push_back(d);
  const Tensor centered = sub(x, mean(x, dims, /*keepdim=*/true));
  const Tensor rstd = rsqrt(add(mean(mul(centered, centered), dims, /*keepdim=*/true), eps));
  const Tensor normalized = mul(centered, rstd);
  Tensor grad_x, grad_w, grad_b;
  if (need_x) {
    const Tensor g = w.defined() ? mul(grad, w) : grad;
    const Tensor projected = add(mean(g, dims, true), mul(normalized, mean(mul(g, normalized), dims, true)));
    grad_x = mul(rstd, sub(g, projected));
  }
  if (need_w) grad_w = sum_to(mul(grad, normalized), normalized_shape);
  if (need_b) grad_b = sum_to(grad, normalized_shape);
  return autograd::grads(grad_x, grad_w, grad_b);
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  if (auto cast = autocast::float32_operands(x, weight, bias)) {
    return layer_norm((*cast)[0], normalized_shape, (*cast)[1], (*cast)[2], eps);
  }
  EMBER_CHECK(x.defined(), "layer_norm: input is undefined");
  EMBER_CHECK(is_floating_point(x.dtype()), "layer_norm: expected a floating point input, got {}", x.dtype());
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  EMBER_CHECK(k >= 1, "layer_norm: normalized_shape must name at least one dim");
  const Shape& sizes = x.sizes();
  const bool trailing = k <= x.dim() && std::equal(normalized_shape.begin(), normalized_shape.end(), sizes.end() - k);
  EMBER_CHECK(trailing, "layer_norm: normalized_shape {} does not match the trailing dims of input of shape {}",
              shape_str(normalized_shape), shape_str(sizes));
  EMBER_CHECK(eps >= 0, "layer_norm: eps must be non-negative, got {}", eps);
  check_parameter(weight, "weight", x, normalized_shape);
  check_parameter(bias, "bias", x, normalized_shape);

  const int64_t n = numel_of(normalized_shape);
  const int64_t rows = n == 0 ? 0 : x.numel() / n;
  const Tensor input = contiguous(x);
  const Tensor w = weight.defined() ? contiguous(weight) : Tensor();
  const Tensor b = bias.defined() ? contiguous(bias) : Tensor();
  Tensor y = make_tensor(sizes, x.dtype(), x.device());
  // The statistics of 16-bit rows stay float32 (as PyTorch keeps them): backward reads them.
  const DType statistics_dtype = is_16_bit_floating_point(x.dtype()) ? kFloat32 : x.dtype();
  Tensor mean = make_tensor({rows}, statistics_dtype, x.device());
  Tensor rstd = make_tensor({rows}, statistics_dtype, x.device());
  if (y.numel() > 0) kernels::layer_norm[x.device()](y, mean, rstd, input, w, b, eps);

  return autograd::record(
      "layer_norm", y, {x, weight, bias},
      [sx = autograd::save(input), sw = autograd::save(w), sm = autograd::save(mean), sr = autograd::save(rstd),
       need_x = x.requires_grad(), need_w = weight.defined() && weight.requires_grad(),
       need_b = bias.defined() && bias.requires_grad(), normalized_shape, eps](const Tensor& grad) {
        const Tensor& saved_x = sx.get();
        if (GradMode::is_enabled()) {
          return differentiable_layer_norm_backward(grad, saved_x, sw.get(), normalized_shape, eps, need_x, need_w,
                                                    need_b);
        }
        const Tensor grad_y = contiguous(grad);
        const Tensor& saved_w = sw.get();
        Tensor grad_x = need_x ? make_tensor(saved_x.sizes(), saved_x.dtype(), saved_x.device()) : Tensor();
        Tensor grad_w = need_w ? make_tensor(normalized_shape, saved_x.dtype(), saved_x.device()) : Tensor();
        Tensor grad_b = need_b ? make_tensor(normalized_shape, saved_x.dtype(), saved_x.device()) : Tensor();
        if (saved_x.numel() > 0) {
          kernels::layer_norm_backward[saved_x.device()](grad_x, grad_w, grad_b, grad_y, saved_x, sm.get(), sr.get(),
                                                         saved_w);
        } else {
          // Nothing to normalise: the parameters' gradients are sums over no rows.
          if (grad_w.defined()) grad_w.zero_();
          if (grad_b.defined()) grad_b.zero_();
        }
        return autograd::grads(grad_x, grad_w, grad_b);
      });
}

}  // namespace ember
