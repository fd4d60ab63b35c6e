// embedding: a row gather from the weight table, and a backward that scatter-adds the output
// gradient into a zero table, split over the embedding dim so no two threads write one element.
#include "core/ops/embedding.h"

#include <type_traits>
#include <vector>

#include "core/autograd/record.h"
#include "core/cpu/half_rows.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/factory.h"
#include "core/ops/index_check.h"
#include "core/ops/indexing.h"
#include "core/ops/views.h"
#include "core/parallel.h"

namespace ember {
namespace kernels {
constinit KernelTable<void(const Tensor& out, const Tensor& weight, const Tensor& ids)> embedding{"embedding"};
constinit KernelTable<void(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& ids,
                           int64_t padding_idx)>
    embedding_backward{"embedding_backward"};
}  // namespace kernels

namespace {

// out[k, :] = weight[ids[k], :]; weight, ids and out contiguous, ids already checked.
void embedding_cpu(const Tensor& out, const Tensor& weight, const Tensor& ids) {
  visit_any_dtype(weight.dtype(), [&]<class T>() {
    const int64_t dim = weight.size(1);
    const T* table = weight.data_ptr<T>();
    const int64_t* index = ids.data_ptr<int64_t>();
    T* result = out.data_ptr<T>();
    parallel_for(ids.numel(), dim, [&](int64_t begin, int64_t end) {
      for (int64_t k = begin; k < end; ++k) {
        const T* row = table + index[k] * dim;
        T* out_row = result + k * dim;
#pragma omp simd
        for (int64_t i = 0; i < dim; ++i) out_row[i] = row[i];
      }
    });
  });
}
EMBER_REGISTER_KERNEL(kernels::embedding, DeviceType::CPU, embedding_cpu);

// grad_weight (zeroed, [num, dim]) += grad_out[k, :] at row ids[k], except the padding row
// (padding_idx < 0: none). Repeated ids add up. Each thread owns a band of columns, so
// repeated ids never make two threads write the same element, and the sum order is fixed.
// 16-bit gradients add up in a float32 table, which is rounded once into grad_weight: rounding
// after every addition would lose the small updates of a frequent id.
void embedding_backward_cpu(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& ids,
                            int64_t padding_idx) {
  visit_any_floating(grad_weight.dtype(), "embedding", [&]<class T>() {
    using C = compute_type<T>;
    const int64_t dim = grad_weight.size(1);
    const int64_t count = ids.numel();
    const int64_t* index = ids.data_ptr<int64_t>();
    const T* g = grad_out.data_ptr<T>();
    constexpr bool in_place = std::is_same_v<T, C>;
    std::vector<C> widened_table(in_place ? 0 : grad_weight.numel(), C(0));
    C* table = nullptr;
    if constexpr (in_place) table = grad_weight.data_ptr<T>();
    else table = widened_table.data();
    parallel_for(dim, count, [&](int64_t begin, int64_t end) {
      for (int64_t k = 0; k < count; ++k) {
        if (index[k] == padding_idx) continue;
        C* row = table + index[k] * dim;
        const T* g_row = g + k * dim;
#pragma omp simd
        for (int64_t i = begin; i < end; ++i) row[i] += C(g_row[i]);
      }
      if constexpr (!in_place) {
        T* rounded = grad_weight.data_ptr<T>();
        for (int64_t r = 0; r < grad_weight.size(0); ++r) {
          cpu::round_row(table + r * dim + begin, end - begin, rounded + r * dim + begin);
        }
      }
    });
  });
}
EMBER_REGISTER_KERNEL(kernels::embedding_backward, DeviceType::CPU, embedding_backward_cpu);

// The gradient of the weight: each id's row of grad added into zeros (the padding id's left out).
// Linear in grad, so it is an op of its own whose backward gathers rows again (embedding, with
// the padding id's rows zeroed): a backward op with a backward, recorded only under create_graph.
Tensor embedding_backward(const Tensor& grad, const Tensor& ids, const Shape& weight_shape, int64_t padding) {
  const Tensor grad_out = contiguous(grad);
  Tensor grad_weight = zeros(weight_shape, grad_out.options());
  if (grad_out.numel() > 0) kernels::embedding_backward[grad_out.device()](grad_weight, grad_out, ids, padding);
  return autograd::record("embedding_backward", grad_weight, {grad},
                          [saved_ids = autograd::save(ids), padding](const Tensor& grad_grad) {
                            const Tensor& ids = saved_ids.get();
                            Tensor rows = embedding(grad_grad, ids);
                            if (padding >= 0) rows = masked_fill(rows, unsqueeze(eq(ids, static_cast<double>(padding)), -1), 0.0);
                            return autograd::grads(rows);
                          });
}

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& ids, std::optional<int64_t> padding_idx) {
  EMBER_CHECK(weight.defined() && ids.defined(), "embedding: weight or ids is undefined");
  EMBER_CHECK(weight.dim() == 2, "embedding: weight must be 2-D [num_embeddings, dim], got shape {}",
              shape_str(weight.sizes()));
  EMBER_CHECK(ids.dtype() == kInt64, "embedding: ids must be int64, got {} of shape {}", ids.dtype(),
              shape_str(ids.sizes()));
  EMBER_CHECK(ids.device() == weight.device(), "embedding: ids are on {} but weight is on {}", ids.device(),
              weight.device());
  const int64_t num_embeddings = weight.size(0), dim = weight.size(1);
  int64_t padding = -1;
  if (padding_idx) {
    EMBER_CHECK(*padding_idx >= -num_embeddings && *padding_idx < num_embeddings,
                "embedding: padding_idx {} is out of range for {} embeddings", *padding_idx, num_embeddings);
    padding = *padding_idx < 0 ? *padding_idx + num_embeddings : *padding_idx;
  }
  const Tensor index = contiguous(ids);
  check_index_range(index, num_embeddings, std::nullopt,
                    {"embedding: id", fmt::format("{} embeddings", num_embeddings)});

  Shape out_shape = ids.sizes();
  out_shape.push_back(dim);
  Tensor out = make_tensor(out_shape, weight.dtype(), weight.device());
  if (out.numel() > 0) kernels::embedding[weight.device()](out, contiguous(weight), index);
  return autograd::record("embedding", out, {weight},
                          [saved_ids = autograd::save(index), shape = weight.sizes(), padding](const Tensor& grad) {
                            return autograd::grads(embedding_backward(grad, saved_ids.get(), shape, padding));
                          });
}

}  // namespace ember
