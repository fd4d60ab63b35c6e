// Registers embedding's CUDA kernels: the forward is a row gather from the table and the
// backward a row scatter-add into a zeroed table, so both run the index kernels of
// cuda/ops/indexing.cu (weight [num, dim] seen as [1, num, dim]). core/ops/embedding.cpp has
// queued the ids' range check; those kernels skip an id out of range until it is reported.
#include "core/ops/embedding.h"
#include "cuda/ops/index_add.h"
#include "cuda/ops/indexing_kernels.h"

namespace ember::cuda {
namespace {

void embedding_cuda(const Tensor& out, const Tensor& weight, const Tensor& ids) {
  visit_any_floating(weight.dtype(), "embedding", [&]<class T>() {
    // Floating elements move as same-sized unsigned words: the copying kernels are typeless.
    using Element =
        std::conditional_t<sizeof(T) == 2, uint16_t, std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>;
    launch_index_select<Element>(static_cast<const Element*>(weight.raw_data()), ids.data_ptr<int64_t>(),
                                 static_cast<Element*>(out.raw_data()), 1, weight.size(0), ids.numel(), weight.size(1));
  });
}
EMBER_REGISTER_KERNEL(kernels::embedding, DeviceType::CUDA, embedding_cuda);

// Rows of padding_idx get no gradient (padding_idx < 0: none). A 16-bit table's rows add up in
// float32 and are rounded once (cuda/ops/index_add.h).
void embedding_backward_cuda(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& ids,
                             int64_t padding_idx) {
  EMBER_CHECK(is_floating_point(grad_weight.dtype()), "embedding: expected a floating point weight, got {}",
              grad_weight.dtype());
  index_add_rows("embedding", grad_weight, grad_out, /*dim=*/0, ids, padding_idx < 0 ? -1 : padding_idx);
}
EMBER_REGISTER_KERNEL(kernels::embedding_backward, DeviceType::CUDA, embedding_backward_cuda);

}  // namespace
}  // namespace ember::cuda
