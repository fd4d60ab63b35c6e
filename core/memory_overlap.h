// Whether a tensor written in place shares memory with itself or with an input. A kernel that
// writes element i while another element (of the output, or of an input it has yet to read)
// lives at the same address computes an answer that depends on the order it visits elements,
// so the ops that write into a tensor they were given check here first, before dispatch, on
// every device. The checks follow PyTorch's and cost a few comparisons per dim.
#pragma once

#include <string_view>

#include "core/tensor.h"

namespace ember {

enum class MemoryOverlap {
  kNone,       // no address is shared
  kSame,       // the same elements at the same addresses: x.add_(x) reads each value before writing it
  kPartial,    // some address holds different elements of the two
  kUndecided,  // the spans meet, but the layouts are too irregular for the cheap check to tell
};

// How the elements of `input`, read as broadcast to `written`'s shape, share memory with
// `written`'s.
MemoryOverlap memory_overlap(const Tensor& written, const Tensor& input);

// Throws, naming `op` and the shape and strides, when more than one element of `written` refers
// to one address: a dim of stride 0 and size > 1, as an expanded view has. (ember's views make
// no other kind of self-overlap.) Ops that write one value everywhere (fill_) need not call it.
void check_no_internal_overlap(const Tensor& written, std::string_view op);

// The tensor an op writing into `written` should read in place of `input`: `input` itself
// when no address holds two different elements of them (kNone, kSame); a contiguous copy of it
// when the check cannot tell (kUndecided), so the answer is right in any kernel order. Throws,
// naming `op`, on a partial overlap.
Tensor input_safe_to_read(const Tensor& written, const Tensor& input, std::string_view op);

}  // namespace ember
