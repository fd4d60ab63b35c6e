#include "core/print.h"
namespace ember {
std::string to_string(const Tensor& tensor) {
  if (!tensor.defined()) return "tensor(undefined)";
  return fmt::format("tensor(shape={}, dtype={})", shape_str(tensor.sizes()), tensor.dtype());
}
}  // namespace ember
