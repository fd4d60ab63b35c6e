// Launchers of the index kernels (cuda/ops/indexing.cu) on raw pointers: row gathers and
// scatter-adds along one dim (index_select, index_add, and embedding on top of them) and the
// elementwise gather and scatter_add. Indices are int64. core has queued the range check
// (cuda/ops/index_check_kernels.h), which reports a bad index at the next synchronisation; until
// then these kernels must not touch memory through it, so they skip it (gathers read 0).
//
// The copying kernels move elements without looking at them, so they are instantiated per
// element size (uint8_t, uint16_t, uint32_t, uint64_t stand for bool, the 16-bit formats, float,
// double and int64); the adding ones for float, double and int64_t targets, with a source of the
// target's type or, into a float target, a 16-bit one (cuda/ops/indexing.cpp adds 16-bit targets up
// in a float32 copy and rounds once at the end).
#pragma once

#include <cstdint>

namespace ember::cuda {

// Most dims the strided kernels take (gather reads a strided input, scatter_add writes into a
// strided target).
inline constexpr int kMaxIndexDims = 8;

// The sizes of the index (the iteration space) and the strides of the tensor it points into.
struct IndexGeometry {
  int rank = 0;
  int dim = 0;
  int64_t indexed_size = 0;  // the size along dim of the tensor the index points into
  int64_t sizes[kMaxIndexDims] = {};
  int64_t strides[kMaxIndexDims] = {};
};

// x seen as [outer, size, inner] (contiguous); out[o, j, :] = x[o, index[j], :] for j < count.
template <class Element>
void launch_index_select(const Element* x, const int64_t* index, Element* out, int64_t outer, int64_t size,
                         int64_t count, int64_t inner);

// target[o, index[j], :] += source[o, j, :], skipping j whose index equals `skip` (embedding's
// padding row; -1 skips nothing). Repeated indices add up (atomically: the order of the
// additions, and so the last bits of a float sum, may differ from run to run).
template <class T, class Source>
void launch_index_add(T* target, const Source* source, const int64_t* index, int64_t outer, int64_t size, int64_t count,
                      int64_t inner, int64_t skip);

// out[p] = x[p with coordinate dim replaced by index[p]] for every position p of the index;
// out and index are contiguous, x is read through geometry.strides.
template <class Element>
void launch_gather(const Element* x, const int64_t* index, Element* out, const IndexGeometry& geometry);

// target[p with coordinate dim replaced by index[p]] += source[p]; source and index contiguous,
// target written through geometry.strides, atomically.
template <class T, class Source>
void launch_scatter_add(T* target, const Source* source, const int64_t* index, const IndexGeometry& geometry);

}  // namespace ember::cuda
