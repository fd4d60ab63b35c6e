// A PyTorch-like text form of a tensor: values, then shape, dtype, device and grad_fn, with
// large tensors elided; as a fmt formatter and through operator<<.
#pragma once

#include <fmt/format.h>

#include <string>

#include "core/tensor.h"

namespace ember {

std::string to_string(const Tensor& tensor);

}  // namespace ember

template <>
struct fmt::formatter<ember::Tensor> : fmt::formatter<std::string_view> {
  auto format(const ember::Tensor& tensor, format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(ember::to_string(tensor), ctx);
  }
};
