// Registers the CUDA index kernels (cuda/ops/indexing.cu) into core's tables: index_select and
// gather (and their backwards index_add and scatter_add). core has checked the index's range
// before (core/ops/index_check.h).
#include "core/ops/indexing.h"

#include "cuda/ops/copy_kernels.h"
#include "cuda/ops/device_elements.h"
#include "cuda/ops/index_add.h"
#include "cuda/ops/indexing_kernels.h"
#include "cuda/ops/tensor_layout.h"

namespace ember::cuda {
namespace {

// The copying kernels by element size: bool, the 16-bit formats, float and double/int64 move as
// 1, 2, 4 and 8 bytes.
template <class Fn>
void visit_element_size(DType dtype, Fn&& fn) {
  switch (element_size(dtype)) {
    case 1: fn.template operator()<uint8_t>(); break;
    case 2: fn.template operator()<uint16_t>(); break;
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

// The adding kernels on a 16-bit target: 16-bit atomics would round the sum at every addition
// (and are slow where they exist), so add(wide) adds into a float32 copy of target, which is
// rounded back to target once at the end.
template <class T, class Add>
void add_in_float32(const char* op, const Tensor& target, Add&& add) {
  using Device = device_element_t<T>;
  const Tensor wide = make_tensor(target.sizes(), kFloat32, target.device());
  launch_convert<float, Device>(strided_layout<2>(op, {&wide, &target}), wide.numel(), wide.data_ptr<float>(),
                                device_data<T>(target));
  add(wide);
  launch_convert<Device, float>(strided_layout<2>(op, {&target, &wide}), target.numel(), device_data<T>(target),
                                wide.data_ptr<float>());
}

void index_add_cuda(const Tensor& target, const Tensor& source, int64_t dim, const Tensor& index) {
  index_add_rows("index_add", target, source, dim, index, /*skip=*/-1);
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
  visit_any_numeric(target.dtype(), "scatter_add", [&]<class T>() {
    if constexpr (is_16_bit_element<device_element_t<T>>) {
      add_in_float32<T>("scatter_add", target, [&](const Tensor& wide) {
        launch_scatter_add<float, device_element_t<T>>(wide.data_ptr<float>(), device_data<T>(source),
                                                       index.data_ptr<int64_t>(),
                                                       geometry_of("scatter_add", index, wide, dim));
      });
    } else {
      launch_scatter_add<T, T>(target.data_ptr<T>(), source.data_ptr<T>(), index.data_ptr<int64_t>(),
                               geometry_of("scatter_add", index, target, dim));
    }
  });
}
EMBER_REGISTER_KERNEL(kernels::scatter_add, DeviceType::CUDA, scatter_add_cuda);

}  // namespace

void index_add_rows(const char* op, const Tensor& target, const Tensor& source, int64_t dim, const Tensor& index,
                    int64_t skip) {
  const int64_t outer = product(target.sizes(), 0, dim), size = target.sizes()[dim];
  const int64_t inner = product(target.sizes(), dim + 1, target.dim()), count = index.numel();
  visit_any_numeric(target.dtype(), op, [&]<class T>() {
    if constexpr (is_16_bit_element<device_element_t<T>>) {
      add_in_float32<T>(op, target, [&](const Tensor& wide) {
        launch_index_add<float, device_element_t<T>>(wide.data_ptr<float>(), device_data<T>(source),
                                                     index.data_ptr<int64_t>(), outer, size, count, inner, skip);
      });
    } else {
      launch_index_add<T, T>(target.data_ptr<T>(), source.data_ptr<T>(), index.data_ptr<int64_t>(), outer, size,
                             count, inner, skip);
    }
  });
}

}  // namespace ember::cuda
