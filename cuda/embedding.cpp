// Registers embedding's CUDA kernels: the forward is a row gather from the table and the
// backward a row scatter-add into a zeroed table, so both run the index kernels of
// cuda/indexing.cu (weight [num, dim] seen as [1, num, dim]). core/ops/embedding.cpp has
// queued the ids' range check; those kernels skip an id out of range until it is reported.
#include "core/ops/embedding.h"
#include "cuda/indexing_kernels.h"

namespace ember::cuda {
namespace {

void embedding_cuda(const Tensor& out, const Tensor& weight, const Tensor& ids) {
  visit_floating(weight.dtype(), "embedding", [&]<class T>() {
    // Floating elements move as same-sized unsigned words: the copying kernels are typeless.
    using Element = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
    launch_index_select<Element>(static_cast<const Element*>(weight.raw_data()), ids.data_ptr<int64_t>(),
                                 static_cast<Element*>(out.raw_data()), 1, weight.size(0), ids.numel(), weight.size(1));
  });
}
EMBER_REGISTER_KERNEL(kernels::embedding, DeviceType::CUDA, embedding_cuda);

// Rows of padding_idx get no gradient (padding_idx < 0: none).
void embedding_backward_cuda(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& ids,
                             int64_t padding_idx) {
  visit_floating(grad_weight.dtype(), "embedding", [&]<class T>() {
    launch_index_add<T>(grad_weight.data_ptr<T>(), grad_out.data_ptr<T>(), ids.data_ptr<int64_t>(), 1,
                        grad_weight.size(0), ids.numel(), grad_weight.size(1), padding_idx < 0 ? -1 : padding_idx);
  });
}
EMBER_REGISTER_KERNEL(kernels::embedding_backward, DeviceType::CUDA, embedding_backward_cuda);

}  // namespace
}  // namespace ember::cuda
