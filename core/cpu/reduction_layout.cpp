// Bringing any reduction to the [outer, reduce, inner] form.
#include "core/cpu/reduction_layout.h"

#include "core/autograd/grad_mode.h"
#include "core/ops/copy.h"
#include "core/ops/views.h"

namespace ember::cpu {

ReductionLayout reduction_layout(const Tensor& x, const std::vector<bool>& mask) {
  NoGradGuard no_grad;
  const int64_t rank = x.dim();
  ReductionLayout layout;
  // The reduced dims, ignoring size-1 dims, which can sit on either side freely.
  int64_t first = -1, last = -1;
  bool one_block = true;
  for (int64_t d = 0; d < rank; ++d) {
    if (!mask[d] || x.sizes()[d] == 1) continue;
    if (first < 0) first = d;
    else if (last != d - 1) {
      // a gap is fine only if every dim inside it has size 1
      for (int64_t g = last + 1; g < d; ++g) one_block = one_block && x.sizes()[g] == 1;
    }
    last = d;
  }
  if (first < 0) {  // nothing of size > 1 is reduced
    layout.source = x.contiguous();
    layout.outer = x.numel();
    return layout;
  }
  if (one_block && x.is_contiguous()) {
    layout.source = x;
    for (int64_t d = 0; d < first; ++d) layout.outer *= x.sizes()[d];
    for (int64_t d = first; d <= last; ++d) layout.reduce *= x.sizes()[d];
    for (int64_t d = last + 1; d < rank; ++d) layout.inner *= x.sizes()[d];
    return layout;
  }
  Shape order;
  for (int64_t d = 0; d < rank; ++d) {
    if (!mask[d]) {
      order.push_back(d);
      layout.outer *= x.sizes()[d];
    }
  }
  for (int64_t d = 0; d < rank; ++d) {
    if (mask[d]) {
      order.push_back(d);
      layout.reduce *= x.sizes()[d];
    }
  }
  layout.source = x.permute(order).contiguous();
  return layout;
}

}  // namespace ember::cpu
