// The overlap checks of in-place writes: stride-0 dims within the written-to tensor, and byte
// spans and layouts between it and an input of the same storage. They run on every in-place
// op, so they read the TensorImpl's fields directly and allocate nothing on the common paths.
#include "core/memory_overlap.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace ember {
namespace {

bool has_no_elements(const TensorImpl& x) {
  return std::any_of(x.sizes.begin(), x.sizes.end(), [](int64_t size) { return size == 0; });
}

// The bytes of the storage an element of `x` may live in: [begin, end).
std::pair<int64_t, int64_t> byte_span(const TensorImpl& x) {
  int64_t low = x.offset, high = x.offset;
  for (size_t d = 0; d < x.sizes.size(); ++d) {
    const int64_t reach = (x.sizes[d] - 1) * x.strides[d];
    (reach < 0 ? low : high) += reach;
  }
  const auto size = static_cast<int64_t>(element_size(x.dtype));
  return {low * size, (high + 1) * size};
}

// Whether x's elements fill their span exactly once, in some order of its dims (a contiguous
// tensor, or a permutation of one): then two such tensors whose spans meet share addresses.
bool is_non_overlapping_and_dense(const TensorImpl& x) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size) of the dims that move
  for (size_t d = 0; d < x.sizes.size(); ++d) {
    if (x.sizes[d] != 1) dims.emplace_back(x.strides[d], x.sizes[d]);
  }
  std::sort(dims.begin(), dims.end());
  int64_t expected = 1;
  for (const auto& [stride, size] : dims) {
    if (stride != expected) return false;
    expected *= size;
  }
  return true;
}

// Whether `input`, broadcast to `written`'s shape, reads each element from the address
// `written` writes it to.
bool same_layout(const TensorImpl& written, const TensorImpl& input) {
  if (written.dtype != input.dtype || written.offset != input.offset) return false;
  const size_t rank = written.sizes.size();
  if (input.sizes.size() > rank) return false;
  const size_t lead = rank - input.sizes.size();
  for (size_t d = 0; d < rank; ++d) {
    if (written.sizes[d] == 1) continue;
    const bool broadcast = d < lead || input.sizes[d - lead] == 1;
    const int64_t input_stride = broadcast ? 0 : input.strides[d - lead];
    if (input_stride != written.strides[d]) return false;
  }
  return true;
}

std::string layout_str(const TensorImpl& x) {
  return fmt::format("shape {}, strides {}, offset {}", shape_str(x.sizes), shape_str(x.strides), x.offset);
}

}  // namespace

MemoryOverlap memory_overlap(const Tensor& written, const Tensor& input) {
  if (!written.defined() || !input.defined()) return MemoryOverlap::kNone;  // the op's own checks report it
  const TensorImpl& w = *written.impl();
  const TensorImpl& in = *input.impl();
  if (w.storage != in.storage) return MemoryOverlap::kNone;
  if (&w == &in) return MemoryOverlap::kSame;  // x.add_(x)
  if (has_no_elements(w) || has_no_elements(in)) return MemoryOverlap::kNone;
  const auto [written_begin, written_end] = byte_span(w);
  const auto [input_begin, input_end] = byte_span(in);
  if (written_end <= input_begin || input_end <= written_begin) return MemoryOverlap::kNone;
  if (same_layout(w, in)) return MemoryOverlap::kSame;
  if (is_non_overlapping_and_dense(w) && is_non_overlapping_and_dense(in)) return MemoryOverlap::kPartial;
  return MemoryOverlap::kUndecided;
}

void check_no_internal_overlap(const Tensor& written, std::string_view op) {
  if (!written.defined()) return;  // the op's own checks report it
  const TensorImpl& w = *written.impl();
  for (size_t d = 0; d < w.sizes.size(); ++d) {
    if (w.strides[d] != 0 || w.sizes[d] <= 1) continue;
    if (has_no_elements(w)) return;  // no elements, nothing shared
    fail("{}: more than one element of the written-to tensor refers to a single memory location ({}: dim {} has "
         "stride 0, as an expanded view has); write into a clone() of it",
         op, layout_str(w), d);
  }
}

Tensor input_safe_to_read(const Tensor& written, const Tensor& input, std::string_view op) {
  switch (memory_overlap(written, input)) {
    case MemoryOverlap::kNone:
    case MemoryOverlap::kSame:
      return input;
    case MemoryOverlap::kPartial:
      fail("{}: some elements of the input tensor and the written-to tensor refer to a single memory location "
           "(written-to: {}; input: {}); clone() the input first",
           op, layout_str(*written.impl()), layout_str(*input.impl()));
    case MemoryOverlap::kUndecided:
      break;
  }
  return input.detach().clone();
}

}  // namespace ember
