// How a CPU reduction walks its input. Any reduction over a set of dims is brought to the form
// [outer, reduce, inner]: out[o, i] = combine over r of x[o, r, i]. When the reduced dims are
// one block of a contiguous tensor this is a view; otherwise the kept dims are moved in front
// of the reduced ones and copied contiguous (then inner is 1).
#pragma once

#include <vector>

#include "core/tensor.h"

namespace ember::cpu {

struct ReductionLayout {
  Tensor source;  // contiguous; element (o, r, i) is at (o * reduce + r) * inner + i
  int64_t outer = 1;
  int64_t reduce = 1;
  int64_t inner = 1;
};

ReductionLayout reduction_layout(const Tensor& x, const std::vector<bool>& mask);

}  // namespace ember::cpu
