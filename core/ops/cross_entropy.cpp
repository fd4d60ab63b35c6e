// cross_entropy: one fused pass per row computes the logsumexp, the negative log likelihood of
// the target and the label-smoothing term; the per-row logsumexp (as max and log-sum, two
// numbers a row) is all the backward keeps, and the fused backward writes
// (softmax - smoothed one-hot) * scale row by row.
//
// With lse = logsumexp(x), eps = label_smoothing and C classes, a non-ignored row's loss is
//   (1 - eps) * (lse - x[target]) + eps * (lse - mean_c x[c])
// (the second term is mean_c of -log p_c, as in PyTorch), and its gradient
//   (softmax(x) - (1 - eps) * onehot(target) - eps / C) * scale.
// lse is kept as max + log_sum with log_sum = log sum_c exp(x[c] - max), and every use
// subtracts max from x first: adding the two would round to the spacing of max (1e-3 for
// float32 logits of 1e4).
#include "core/ops/cross_entropy.h"

#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/autocast.h"
#include "core/autograd/grad_mode.h"
#include "core/autograd/record.h"
#include "core/cpu/half_rows.h"
#include "core/cpu/kernel_table.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/factory.h"
#include "core/ops/index_check.h"
#include "core/ops/reduce.h"
#include "core/ops/softmax.h"
#include "core/ops/views.h"
#include "core/parallel.h"

namespace ember {
namespace kernels {
constinit KernelTable<void(const Tensor& losses, const Tensor& row_max, const Tensor& log_sum, const Tensor& logits,
                           const Tensor& targets, int64_t ignore_index, double label_smoothing)>
    cross_entropy{"cross_entropy"};
constinit KernelTable<void(const Tensor& grad_logits, const Tensor& row_scale, const Tensor& logits,
                           const Tensor& targets, const Tensor& row_max, const Tensor& log_sum,
                           int64_t ignore_index, double label_smoothing)>
    cross_entropy_backward{"cross_entropy_backward"};
}  // namespace kernels

namespace {

// logits [rows, C] contiguous, targets [rows] checked; losses, row_max and log_sum [rows], in
// float32 for 16-bit logits (whose rows are widened to float32 scratch and computed on there).
// Ignored rows get loss 0 (their max and log_sum are still computed, and unused).
void cross_entropy_cpu(const Tensor& losses, const Tensor& row_max, const Tensor& log_sum, const Tensor& logits,
                       const Tensor& targets, int64_t ignore_index, double label_smoothing) {
  visit_any_floating(logits.dtype(), "cross_entropy", [&]<class T>() {
    using C = compute_type<T>;
    const int64_t rows = targets.numel();
    const int64_t classes = logits.size(-1);
    const T* x = logits.data_ptr<T>();
    const int64_t* target = targets.data_ptr<int64_t>();
    C* loss = losses.data_ptr<C>();
    C* max_out = row_max.data_ptr<C>();
    C* log_sum_out = log_sum.data_ptr<C>();
    const C smoothing = static_cast<C>(label_smoothing);
    const cpu::RowKernels<C>& row_kernels = cpu::row_kernels<C>(cpu::kernels());
    parallel_for(rows, 2 * classes, [&](int64_t begin, int64_t end) {
      std::vector<C> scratch(std::is_same_v<T, C> ? 0 : classes);
      for (int64_t r = begin; r < end; ++r) {
        const C* row = cpu::row_in_compute_type(x + r * classes, classes, scratch);
        // The sum of the logits is needed only for label smoothing. The next row is prefetched
        // during the exp pass, which overlaps its memory traffic with this row's arithmetic.
        const T* next = r + 1 < end ? x + (r + 1) * classes : nullptr;
        const cpu::LogSumExp<C> statistics =
            row_kernels.log_sum_exp_row(row, classes, smoothing != C(0), next, sizeof(T));
        const C max = statistics.max, total = statistics.sum, log_of_sum = statistics.log_sum;
        max_out[r] = max;
        log_sum_out[r] = log_of_sum;
        if (target[r] == ignore_index) {
          loss[r] = 0;
          continue;
        }
        const C nll = (max - row[target[r]]) + log_of_sum;
        const C smooth = (max - total / static_cast<C>(classes)) + log_of_sum;  // mean_c of -log p_c
        loss[r] = smoothing == C(0) ? nll : (C(1) - smoothing) * nll + smoothing * smooth;
      }
    });
  });
}
EMBER_REGISTER_KERNEL(kernels::cross_entropy, DeviceType::CPU, cross_entropy_cpu);

// row_scale [rows]: the gradient of the loss with respect to each row's loss (already divided
// by the count for the mean). row_scale, row_max and log_sum are float32 for 16-bit logits, and
// each gradient is computed in float32 and rounded once.
void cross_entropy_backward_cpu(const Tensor& grad_logits, const Tensor& row_scale, const Tensor& logits,
                                const Tensor& targets, const Tensor& row_max, const Tensor& log_sum,
                                int64_t ignore_index, double label_smoothing) {
  visit_any_floating(logits.dtype(), "cross_entropy", [&]<class T>() {
    using C = compute_type<T>;
    const int64_t rows = targets.numel();
    const int64_t classes = logits.size(-1);
    const T* x = logits.data_ptr<T>();
    const int64_t* target = targets.data_ptr<int64_t>();
    const C* max = row_max.data_ptr<C>();
    const C* log_of_sum = log_sum.data_ptr<C>();
    const C* scale = row_scale.data_ptr<C>();
    T* g = grad_logits.data_ptr<T>();
    const C uniform = static_cast<C>(label_smoothing) / static_cast<C>(classes);
    const C target_weight = C(1) - static_cast<C>(label_smoothing);
    const cpu::RowKernels<C>& row_kernels = cpu::row_kernels<C>(cpu::kernels());
    parallel_for(rows, 2 * classes, [&](int64_t begin, int64_t end) {
      // 16-bit rows: the logits widened, and the gradient computed, in float32 scratch.
      std::vector<C> row_scratch(std::is_same_v<T, C> ? 0 : classes), gradient_scratch(row_scratch.size());
      for (int64_t r = begin; r < end; ++r) {
        T* g_row = g + r * classes;
        if (target[r] == ignore_index) {
#pragma omp simd
          for (int64_t c = 0; c < classes; ++c) g_row[c] = T(0);
          continue;
        }
        const C* row = cpu::row_in_compute_type(x + r * classes, classes, row_scratch);
        C* gradient = std::is_same_v<T, C> ? reinterpret_cast<C*>(g_row) : gradient_scratch.data();
        const C s = scale[r];
        row_kernels.softmax_gradient_row(row, classes, max[r], log_of_sum[r], uniform, s, gradient);
        // The target's entry is its softmax less the target's weight, rounded once with it.
        gradient[target[r]] -= target_weight * s;
        if constexpr (!std::is_same_v<T, C>) cpu::round_row(gradient, classes, g_row);
      }
    });
  });
}
EMBER_REGISTER_KERNEL(kernels::cross_entropy_backward, DeviceType::CPU, cross_entropy_backward_cpu);

}  // namespace

Tensor counted_targets(const Tensor& targets, int64_t ignore_index, DType dtype) {
  return sum(ne(targets, static_cast<double>(ignore_index)).to(dtype));
}

// Each row's gradient is softmax(x) minus the target distribution (the one-hot target mixed with
// uniform by label smoothing), times the row's scale; ignored rows get none.
Tensor differentiable_cross_entropy_backward(const Tensor& row_scale, const Tensor& logits, const Tensor& targets,
                                             const CrossEntropyOptions& options) {
  const int64_t classes = logits.size(-1);
  const DType dtype = logits.dtype();
  const Tensor classes_row = arange(static_cast<double>(classes), TensorOptions(kInt64).device(logits.device()));
  const Tensor target_column = unsqueeze(targets, -1);
  const Tensor one_hot = eq(classes_row, target_column).to(dtype);
  const Tensor target_distribution =
      add(mul(one_hot, 1.0 - options.label_smoothing), options.label_smoothing / static_cast<double>(classes));
  const Tensor counted = ne(target_column, static_cast<double>(options.ignore_index)).to(dtype);
  const Tensor scale = mul(unsqueeze(row_scale.to(dtype), -1), counted);
  return mul(sub(softmax(logits, -1), target_distribution), scale);
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, CrossEntropyOptions options) {
  if (auto cast = autocast::float32_operands(logits)) return cross_entropy((*cast)[0], targets, options);
  EMBER_CHECK(logits.defined() && targets.defined(), "cross_entropy: logits or targets is undefined");
  EMBER_CHECK(is_floating_point(logits.dtype()), "cross_entropy: logits must be floating point, got {}",
              logits.dtype());
  EMBER_CHECK(targets.dtype() == kInt64, "cross_entropy: targets must be int64 class indices, got {}",
              targets.dtype());
  EMBER_CHECK(logits.dim() >= 1, "cross_entropy: logits must have a class dim, got a 0-d tensor");
  EMBER_CHECK(logits.device() == targets.device(), "cross_entropy: logits are on {} but targets are on {}",
              logits.device(), targets.device());
  const Shape row_shape(logits.sizes().begin(), logits.sizes().end() - 1);
  EMBER_CHECK(targets.sizes() == row_shape,
              "cross_entropy: logits of shape {} need targets of shape {}, got targets of shape {}",
              shape_str(logits.sizes()), shape_str(row_shape), shape_str(targets.sizes()));
  EMBER_CHECK(options.label_smoothing >= 0.0 && options.label_smoothing <= 1.0,
              "cross_entropy: label_smoothing must be in [0, 1], got {}", options.label_smoothing);
  const int64_t classes = logits.size(-1);
  EMBER_CHECK(classes > 0, "cross_entropy: logits of shape {} have no classes", shape_str(logits.sizes()));

  const Tensor x = contiguous(logits);
  const Tensor index = contiguous(targets);
  check_index_range(index, classes, options.ignore_index,
                    {"cross_entropy: target", fmt::format("{} classes", classes)});
  // 16-bit logits: the per-row statistics and losses, and the reduction over them, stay float32;
  // the loss is rounded to the logits' dtype once, at the end (as PyTorch returns it).
  const DType statistics_dtype = is_16_bit_floating_point(x.dtype()) ? kFloat32 : x.dtype();
  Tensor losses = make_tensor(row_shape, statistics_dtype, x.device());
  Tensor row_max = make_tensor(row_shape, statistics_dtype, x.device());
  Tensor log_sum = make_tensor(row_shape, statistics_dtype, x.device());
  if (losses.numel() > 0) {
    kernels::cross_entropy[x.device()](losses, row_max, log_sum, x, index, options.ignore_index,
                                       options.label_smoothing);
  }

  Tensor out, counted;
  {
    // The reduction belongs to this op's one node, not to a node of its own.
    NoGradGuard no_grad;
    switch (options.reduction) {
      case Reduction::None: out = losses; break;
      case Reduction::Sum: out = sum(losses); break;
      case Reduction::Mean:
        counted = counted_targets(index, options.ignore_index, statistics_dtype);
        out = div(sum(losses), counted);
        break;
    }
    out = out.to(x.dtype());
  }
  return autograd::record(
      "cross_entropy", out, {logits},
      [sx = autograd::save(x), st = autograd::save(index), smax = autograd::save(row_max),
       slog_sum = autograd::save(log_sum), options, counted](const Tensor& grad) {
        const Tensor& saved_x = sx.get();
        const Tensor& saved_max = smax.get();
        // In the statistics' dtype: float32 for 16-bit logits.
        const Tensor grad_loss = grad.to(saved_max.dtype());
        Tensor row_scale;
        switch (options.reduction) {
          case Reduction::None: row_scale = contiguous(grad_loss); break;
          case Reduction::Sum: row_scale = contiguous(expand(grad_loss, saved_max.sizes())); break;
          case Reduction::Mean:
            row_scale = contiguous(expand(div(grad_loss, counted.to(grad_loss.dtype())), saved_max.sizes()));
            break;
        }
        if (GradMode::is_enabled()) {
          return autograd::grads(differentiable_cross_entropy_backward(row_scale, saved_x, st.get(), options));
        }
        Tensor grad_logits = make_tensor(saved_x.sizes(), saved_x.dtype(), saved_x.device());
        if (grad_logits.numel() > 0) {
          kernels::cross_entropy_backward[saved_x.device()](grad_logits, row_scale, saved_x, st.get(), saved_max,
                                                            slog_sum.get(), options.ignore_index,
                                                            options.label_smoothing);
        }
        return autograd::grads(grad_logits);
      });
}

}  // namespace ember
