// index_select, index_add, gather and scatter_add on CUDA: one thread per element of the
// iteration space, grid-stride loops with int64 positions. The adding kernels use atomicAdd,
// because equal indices make several threads add into one element. An index outside the
// tensor (the range check reports it later) is skipped: gathers read 0 there, adds add nothing.
#include <cstdint>

#include "cuda/runtime/check.h"
#include "cuda/common/half_elements.h"
#include "cuda/ops/indexing_kernels.h"
#include "cuda/runtime/launch.h"
#include "cuda/runtime/stream.h"

namespace ember::cuda {
namespace {

template <class Element>
__global__ void index_select_elements(const Element* x, const int64_t* index, Element* out, int64_t outer,
                                      int64_t size, int64_t count, int64_t inner) {
  const int64_t total = outer * count * inner;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t column = i % inner, j = (i / inner) % count, o = i / (inner * count);
    const int64_t at = index[j];
    out[i] = at >= 0 && at < size ? x[(o * size + at) * inner + column] : Element(0);
  }
}

// atomicAdd has no int64_t overload; two's complement addition is the same on the unsigned type.
__device__ void add_to(int64_t* to, int64_t value) {
  atomicAdd(reinterpret_cast<unsigned long long*>(to), static_cast<unsigned long long>(value));
}
__device__ void add_to(float* to, float value) { atomicAdd(to, value); }
__device__ void add_to(double* to, double value) { atomicAdd(to, value); }

template <class T, class Source>
__global__ void index_add_elements(T* target, const Source* source, const int64_t* index, int64_t outer, int64_t size,
                                   int64_t count, int64_t inner, int64_t skip) {
  const int64_t total = outer * count * inner;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t column = i % inner, j = (i / inner) % count, o = i / (inner * count);
    const int64_t at = index[j];
    if (at == skip || at < 0 || at >= size) continue;
    add_to(target + (o * size + at) * inner + column, static_cast<T>(to_compute(source[i])));
  }
}

// Whether the index's value at flat position i lies inside the indexed tensor.
__device__ bool in_range(const IndexGeometry& geometry, const int64_t* index, int64_t i) {
  return index[i] >= 0 && index[i] < geometry.indexed_size;
}

// The offset, through geometry.strides, of flat position i of the index, whose coordinate
// along geometry.dim is replaced by the index's value there.
__device__ int64_t indexed_offset(const IndexGeometry& geometry, const int64_t* index, int64_t i) {
  int64_t offset = 0, rest = i;
  for (int d = geometry.rank - 1; d >= 0; --d) {
    const int64_t coordinate = rest % geometry.sizes[d];
    rest /= geometry.sizes[d];
    offset += (d == geometry.dim ? index[i] : coordinate) * geometry.strides[d];
  }
  return offset;
}

__host__ __device__ int64_t positions_of(const IndexGeometry& geometry) {
  int64_t total = 1;
  for (int d = 0; d < geometry.rank; ++d) total *= geometry.sizes[d];
  return total;
}

template <class Element>
__global__ void gather_elements(const Element* x, const int64_t* index, Element* out, IndexGeometry geometry) {
  const int64_t total = positions_of(geometry);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = in_range(geometry, index, i) ? x[indexed_offset(geometry, index, i)] : Element(0);
  }
}

template <class T, class Source>
__global__ void scatter_add_elements(T* target, const Source* source, const int64_t* index, IndexGeometry geometry) {
  const int64_t total = positions_of(geometry);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    if (in_range(geometry, index, i))
      add_to(target + indexed_offset(geometry, index, i), static_cast<T>(to_compute(source[i])));
  }
}

}  // namespace

template <class Element>
void launch_index_select(const Element* x, const int64_t* index, Element* out, int64_t outer, int64_t size,
                         int64_t count, int64_t inner) {
  const int64_t total = outer * count * inner;
  if (total == 0) return;
  index_select_elements<<<blocks_for(total), kThreadsPerBlock, 0, current_stream()>>>(
      x, index, out, outer, size, count, inner);
  check_launch("index_select");
}

template <class T, class Source>
void launch_index_add(T* target, const Source* source, const int64_t* index, int64_t outer, int64_t size,
                      int64_t count, int64_t inner, int64_t skip) {
  const int64_t total = outer * count * inner;
  if (total == 0) return;
  index_add_elements<<<blocks_for(total), kThreadsPerBlock, 0, current_stream()>>>(
      target, source, index, outer, size, count, inner, skip);
  check_launch("index_add");
}

template <class Element>
void launch_gather(const Element* x, const int64_t* index, Element* out, const IndexGeometry& geometry) {
  const int64_t total = positions_of(geometry);
  if (total == 0) return;
  gather_elements<<<blocks_for(total), kThreadsPerBlock, 0, current_stream()>>>(x, index, out, geometry);
  check_launch("gather");
}

template <class T, class Source>
void launch_scatter_add(T* target, const Source* source, const int64_t* index, const IndexGeometry& geometry) {
  const int64_t total = positions_of(geometry);
  if (total == 0) return;
  scatter_add_elements<<<blocks_for(total), kThreadsPerBlock, 0, current_stream()>>>(target, source, index, geometry);
  check_launch("scatter_add");
}

#define EMBER_INSTANTIATE_COPYING(E)                                                                         \
  template void launch_index_select<E>(const E*, const int64_t*, E*, int64_t, int64_t, int64_t, int64_t); \
  template void launch_gather<E>(const E*, const int64_t*, E*, const IndexGeometry&);
EMBER_INSTANTIATE_COPYING(uint8_t)
EMBER_INSTANTIATE_COPYING(uint16_t)
EMBER_INSTANTIATE_COPYING(uint32_t)
EMBER_INSTANTIATE_COPYING(uint64_t)
#undef EMBER_INSTANTIATE_COPYING

#define EMBER_INSTANTIATE_ADDING(T, Source)                                                                   \
  template void launch_index_add<T, Source>(T*, const Source*, const int64_t*, int64_t, int64_t, int64_t,      \
                                            int64_t, int64_t);                                                 \
  template void launch_scatter_add<T, Source>(T*, const Source*, const int64_t*, const IndexGeometry&);
EMBER_INSTANTIATE_ADDING(float, float)
EMBER_INSTANTIATE_ADDING(double, double)
EMBER_INSTANTIATE_ADDING(int64_t, int64_t)
EMBER_INSTANTIATE_ADDING(float, __nv_bfloat16)
EMBER_INSTANTIATE_ADDING(float, __half)
#undef EMBER_INSTANTIATE_ADDING

}  // namespace ember::cuda
