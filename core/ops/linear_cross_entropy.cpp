// linear_cross_entropy: the output layer and its loss, a chunk of rows at a time, with each
// chunk's gradients computed while its logits exist.
#include "core/ops/linear_cross_entropy.h"

#include <algorithm>
#include <vector>

#include "core/autocast.h"
#include "core/autograd/grad_mode.h"
#include "core/autograd/record.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/factory.h"
#include "core/ops/index_check.h"
#include "core/ops/inplace.h"
#include "core/ops/join.h"
#include "core/ops/matmul.h"
#include "core/ops/reduce.h"
#include "core/ops/views.h"

namespace ember {

int64_t default_cross_entropy_chunk_rows(int64_t classes) {
  return std::max<int64_t>(1, (int64_t{1} << 25) / std::max<int64_t>(classes, 1));
}

namespace {

void check_arguments(const Tensor& x, const Tensor& weight, const Tensor& targets, const CrossEntropyOptions& options,
                     int64_t chunk_rows) {
  EMBER_CHECK(x.defined() && weight.defined() && targets.defined(),
              "linear_cross_entropy: x, weight or targets is undefined");
  EMBER_CHECK(is_floating_point(x.dtype()) && x.dtype() == weight.dtype(),
              "linear_cross_entropy: x ({}) and weight ({}) must be floating point of one dtype", x.dtype(),
              weight.dtype());
  EMBER_CHECK(targets.dtype() == kInt64, "linear_cross_entropy: targets must be int64 class indices, got {}",
              targets.dtype());
  EMBER_CHECK(weight.dim() == 2 && x.dim() >= 1 && x.size(-1) == weight.size(1),
              "linear_cross_entropy: x {} and weight {} do not fit: expected x [..., in] and weight [classes, in]",
              shape_str(x.sizes()), shape_str(weight.sizes()));
  const Shape row_shape(x.sizes().begin(), x.sizes().end() - 1);
  EMBER_CHECK(targets.sizes() == row_shape, "linear_cross_entropy: x of shape {} needs targets of shape {}, got {}",
              shape_str(x.sizes()), shape_str(row_shape), shape_str(targets.sizes()));
  EMBER_CHECK(x.device() == weight.device() && x.device() == targets.device(),
              "linear_cross_entropy: x, weight and targets are on {}, {} and {}", x.device(), weight.device(),
              targets.device());
  EMBER_CHECK(weight.size(0) > 0, "linear_cross_entropy: weight {} has no classes", shape_str(weight.sizes()));
  EMBER_CHECK(options.label_smoothing >= 0.0 && options.label_smoothing <= 1.0,
              "linear_cross_entropy: label_smoothing must be in [0, 1], got {}", options.label_smoothing);
  EMBER_CHECK(chunk_rows >= 0, "linear_cross_entropy: chunk_rows must be >= 0 (0 = the default), got {}", chunk_rows);
}

// One chunk's logits, in the product's dtype: under autocast 16 bits. cross_entropy(linear(...))
// would hand its loss float32 copies of them; the loss kernels widen each 16-bit row to float32
// themselves (exactly), so they compute the same statistics without the copy, and write the
// gradient in float32 rounded once to 16 bits, the bits autocast's cast for linear's backward
// products would give. For GPT-2's 50,257 classes those two copies cost more than the products.
Tensor chunk_logits(const Tensor& x_rows, const Tensor& weight) { return contiguous(linear(x_rows, weight)); }

// Whether cross_entropy would take these logits in float32: 16-bit ones under autocast.
bool loss_in_float32(const Tensor& logits) {
  return is_16_bit_floating_point(logits.dtype()) && autocast::is_enabled(logits.device().type);
}

}  // namespace

Tensor linear_cross_entropy(const Tensor& x, const Tensor& weight, const Tensor& targets, CrossEntropyOptions options,
                            int64_t chunk_rows) {
  check_arguments(x, weight, targets, options, chunk_rows);
  if (options.reduction == Reduction::None) return cross_entropy(linear(x, weight), targets, options);

  const int64_t classes = weight.size(0), features = weight.size(1);
  const Tensor rows_x = contiguous(reshape(x, {-1, features}));
  const Tensor rows_targets = contiguous(reshape(targets, {-1}));
  const int64_t rows = rows_targets.numel();
  check_index_range(rows_targets, classes, options.ignore_index,
                    {"linear_cross_entropy: target", fmt::format("{} classes", classes)});
  if (chunk_rows == 0) chunk_rows = default_cross_entropy_chunk_rows(classes);
  const bool needs_gradient = autograd::any_requires_grad({x, weight});

  Tensor total, counted, scale, grad_x, grad_weight;
  DType loss_dtype = x.dtype();
  {
    // Everything here is this op's one node: nothing inside records a graph.
    NoGradGuard no_grad;
    std::vector<Tensor> grad_x_chunks;
    for (int64_t begin = 0; begin < rows; begin += chunk_rows) {
      const int64_t length = std::min(chunk_rows, rows - begin);
      const Tensor x_chunk = rows_x.narrow(0, begin, length);
      const Tensor target_chunk = rows_targets.narrow(0, begin, length);
      const Tensor logits = chunk_logits(x_chunk, weight);
      loss_dtype = loss_in_float32(logits) ? kFloat32 : logits.dtype();
      const DType statistics_dtype = is_16_bit_floating_point(loss_dtype) ? kFloat32 : loss_dtype;
      if (!counted.defined()) {
        counted = counted_targets(rows_targets, options.ignore_index, statistics_dtype);
        // The gradient of the loss with respect to each row's loss, before the loss's own.
        scale = options.reduction == Reduction::Mean ? div(ones_like(counted), counted) : ones_like(counted);
      }
      Tensor losses = make_tensor({length}, statistics_dtype, x.device());
      Tensor row_max = make_tensor({length}, statistics_dtype, x.device());
      Tensor log_sum = make_tensor({length}, statistics_dtype, x.device());
      kernels::cross_entropy[x.device()](losses, row_max, log_sum, logits, target_chunk, options.ignore_index,
                                         options.label_smoothing);
      total = total.defined() ? add(total, sum(losses)) : sum(losses);
      if (!needs_gradient) continue;
      Tensor grad_logits = make_tensor(logits.sizes(), logits.dtype(), x.device());
      kernels::cross_entropy_backward[x.device()](grad_logits, contiguous(expand(scale, {length})), logits,
                                                  target_chunk, row_max, log_sum, options.ignore_index,
                                                  options.label_smoothing);
      // The products of linear's backward, as autocast would run them, in the parameters' dtype.
      grad_x_chunks.push_back(matmul(grad_logits, weight).to(x.dtype()));
      const Tensor chunk_grad_weight = matmul(transpose(grad_logits, 0, 1), x_chunk).to(weight.dtype());
      if (grad_weight.defined()) {
        add_(grad_weight, chunk_grad_weight);
      } else {
        grad_weight = chunk_grad_weight;
      }
    }
    if (rows == 0) {
      // No rows: the sum is 0 and the mean 0 / 0, as cross_entropy gives.
      total = zeros({}, TensorOptions(loss_dtype).device(x.device()));
      counted = zeros({}, TensorOptions(loss_dtype).device(x.device()));
    }
    if (needs_gradient) {
      grad_x = grad_x_chunks.empty() ? zeros_like(rows_x) : cat(grad_x_chunks, 0);
      if (!grad_weight.defined()) grad_weight = zeros_like(weight);
    }
    total = options.reduction == Reduction::Mean ? div(total, counted) : total;
    total = total.to(loss_dtype);
  }

  return autograd::record(
      "linear_cross_entropy", total, {x, weight},
      [grad_x, grad_weight, scale, options, x_shape = x.sizes(), sx = autograd::save(x),
       sw = autograd::save(weight), st = autograd::save(rows_targets)](const Tensor& grad) {
        if (GradMode::is_enabled()) {
          // Under create_graph: the whole logits, recomputed with history, through cross_entropy's
          // differentiable backward and linear's two products.
          const Tensor saved_x = reshape(sx.get(), {-1, x_shape.back()});
          const Tensor saved_weight = sw.get(), saved_targets = st.get();
          const Tensor logits = linear(saved_x, saved_weight);
          const Tensor row_scale = expand(mul(grad.to(logits.dtype()), scale.to(logits.dtype())), {saved_targets.numel()});
          const Tensor grad_logits = differentiable_cross_entropy_backward(row_scale, logits, saved_targets, options);
          return autograd::grads(reshape(matmul(grad_logits, saved_weight), x_shape),
                                 matmul(transpose(grad_logits, 0, 1), saved_x));
        }
        return autograd::grads(reshape(mul(grad_x, grad.to(grad_x.dtype())), x_shape),
                               mul(grad_weight, grad.to(grad_weight.dtype())));
      });
}

}  // namespace ember
