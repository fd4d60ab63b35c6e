// Registers the CUDA index kernels (cuda/indexing.cu) into core's tables: index_select and
// gather (and their backwards index_add and scatter_add). core has checked the index's range
// before (core/ops/index_check.h).
#include "core/ops/indexing.h"

#include "cuda/indexing_kernels.h"

namespace ember::cuda {
namespace {

// The copying kernels by element size: bool, float and double/int64 move as 1, 4 and 8 bytes.
template <class Fn>
void visit_element_size(DType dtype, Fn&& fn) {
  switch (element_size(dtype)) {
    case 1: fn.template operator()<uint8_t>(); break;
    case 4: fn.template operator()<uint32_t>(); break;
    default: fn.template operator()<uint64_t>(); break;
  }
}

int64_t product(const Shape& sizes, int64_t begin, int64_t end) {
  int64_t n = 1;
  for (int64_t d = begin; d < end; ++d) n *= sizes[d];
  return n;
}

// The iteration space of gather and scatter_add: the index's sizes, and the strides of the
// tensor the index points into.
IndexGeometry geometry_of(const char* op, const Tensor& index, const Tensor& indexed, int64_t dim) {
  EMBER_CHECK(index.dim() <= kMaxIndexDims, "{}: CUDA kernel takes at most {} dims, got shape {}", op, kMaxIndexDims,
              shape_str(index.sizes()));
  IndexGeometry geometry;
  geometry.rank = static_cast<int>(index.dim());
  geometry.dim = static_cast<int>(dim);
  geometry.indexed_size = indexed.sizes()[dim];
  for (int d = 0; d < geometry.rank; ++d) {
    geometry.sizes[d] = index.sizes()[d];
    geometry.strides[d] = indexed.strides()[d];
  }
  return geometry;
}

void index_select_cuda(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index) {
  const int64_t size = x.sizes()[dim];
  visit_element_size(x.dtype(), [&]<class E>() {
    launch_index_select<E>(static_cast<const E*>(x.raw_data()), index.data_ptr<int64_t>(),
                           static_cast<E*>(out.raw_data()), product(x.sizes(), 0, dim), size, index.numel(),
                           product(x.sizes(), dim + 1, x.dim()));
  });
}
EMBER_REGISTER_KERNEL(kernels::index_select, DeviceType::CUDA, index_select_cuda);

void index_add_cuda(const Tensor& target, const Tensor& source, int64_t dim, const Tensor& index) {
  visit_numeric(target.dtype(), "index_add", [&]<class T>() {
    launch_index_add<T>(target.data_ptr<T>(), source.data_ptr<T>(), index.data_ptr<int64_t>(),
                        product(target.sizes(), 0, dim), target.sizes()[dim], index.numel(),
                        product(target.sizes(), dim + 1, target.dim()), /*skip=*/-1);
  });
}
EMBER_REGISTER_KERNEL(kernels::index_add, DeviceType::CUDA, index_add_cuda);

void gather_cuda(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index) {
  const IndexGeometry geometry = geometry_of("gather", index, x, dim);
  visit_element_size(x.dtype(), [&]<class E>() {
    launch_gather<E>(static_cast<const E*>(x.raw_data()), index.data_ptr<int64_t>(), static_cast<E*>(out.raw_data()),
                     geometry);
  });
}
EMBER_REGISTER_KERNEL(kernels::gather, DeviceType::CUDA, gather_cuda);

void scatter_add_cuda(const Tensor& target, const Tensor& source, int64_t dim, const Tensor& index) {
  const IndexGeometry geometry = geometry_of("scatter_add", index, target, dim);
  visit_numeric(target.dtype(), "scatter_add", [&]<class T>() {
    launch_scatter_add<T>(target.data_ptr<T>(), source.data_ptr<T>(), index.data_ptr<int64_t>(), geometry);
  });
}
EMBER_REGISTER_KERNEL(kernels::scatter_add, DeviceType::CUDA, scatter_add_cuda);

}  // namespace
}  // namespace ember::cuda
