// Autocast: mixed precision chosen per op inside a scope, as torch.autocast does.
//
//   {
//     AutocastGuard autocast(DeviceType::CUDA, kBFloat16);
//     Tensor logits = model->forward(tokens);         // products in bfloat16
//     Tensor loss = cross_entropy(logits, targets);    // the loss in float32
//   }
//   loss.backward();  // float32 parameters get float32 gradients
//
// Inside the scope, for tensors on the guard's device type:
// - products (matmul, bmm, linear, einsum, scaled_dot_product_attention) cast their floating
//   operands to the scope's 16-bit dtype: tensor cores on a GPU, half the memory traffic;
// - ops whose results 16 bits would spoil (softmax, log_softmax, layer_norm, cross_entropy
//   and the losses, sum, mean, logsumexp) cast 16-bit operands to float32;
// - binary elementwise ops (add, mul, ...) on a 16-bit and a float32 operand compute in
//   float32 (outside autocast that mismatch stays an error: nothing converts silently).
// Every cast is an ordinary to(), recorded by autograd, so the gradient of a float32
// parameter arrives in float32. A parameter (a leaf that requires grad) is cast once per
// outermost scope and the cast reused, however many ops read it. Backward runs without
// autocast: each op's backward computes in the dtypes its forward saw.
//
// The state is per thread. Scopes nest, and each restores what it found on exit;
// AutocastGuard(device_type, false) turns autocast off within an enclosing scope.
#pragma once

#include <array>
#include <optional>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/tensor.h"

namespace ember {

class AutocastGuard {
 public:
  // Turns autocast on for tensors on `device_type` with `dtype`, which must be kBFloat16 or
  // kFloat16 (anything else throws ember::Error); with enabled = false, turns it off and
  // `dtype` is not looked at, so a training loop can pass its precision either way.
  AutocastGuard(DeviceType device_type, DType dtype, bool enabled = true);
  // Turns autocast off (enabled = false) or on in bfloat16 for tensors on `device_type`.
  AutocastGuard(DeviceType device_type, bool enabled);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  DeviceType device_type_;
  bool previous_enabled_;
  DType previous_dtype_;
};

namespace autocast {

// Whether autocast is on for tensors on `device_type` in this thread, and its dtype.
bool is_enabled(DeviceType device_type);
DType dtype(DeviceType device_type);

// How many parameter casts the current outermost scope holds (0 outside any scope).
size_t cached_cast_count();

// --- hooks at the entry of ops ----------------------------------------------------------
// Each returns std::nullopt when autocast leaves the operands as they are (always, outside a
// scope), and otherwise all of them, cast; the op then calls itself again on those:
//   if (auto cast = autocast::product_operands(a, b)) return matmul((*cast)[0], (*cast)[1]);
// Undefined and non-floating operands pass through unchanged, float64 ones too (a float64
// computation asked for float64 on purpose).

namespace detail {
bool any_enabled();
std::optional<std::vector<Tensor>> product_operands(std::vector<Tensor> operands);
std::optional<std::vector<Tensor>> float32_operands(std::vector<Tensor> operands);
std::optional<std::vector<Tensor>> widest_operands(std::vector<Tensor> operands);

template <class Cast, class... Operands>
std::optional<std::array<Tensor, sizeof...(Operands)>> apply(Cast cast, const Operands&... operands) {
  if (!any_enabled()) [[likely]] return std::nullopt;
  std::optional<std::vector<Tensor>> result = cast(std::vector<Tensor>{operands...});
  if (!result) return std::nullopt;
  std::array<Tensor, sizeof...(Operands)> array;
  for (size_t i = 0; i < array.size(); ++i) array[i] = std::move((*result)[i]);
  return array;
}

// Makes backward, and anything else that must compute in the dtypes it is given, run with
// autocast off on every device type; restores the state on exit.
class Suspend {
 public:
  Suspend();
  ~Suspend();
  Suspend(const Suspend&) = delete;
  Suspend& operator=(const Suspend&) = delete;

 private:
  std::array<bool, kNumDeviceTypes> previous_{};
};
}  // namespace detail

// For a product: floating operands in the scope's 16-bit dtype.
template <class... Operands>
std::optional<std::array<Tensor, sizeof...(Operands)>> product_operands(const Operands&... operands) {
  return detail::apply(detail::product_operands, operands...);
}
inline std::optional<std::vector<Tensor>> product_operands(const std::vector<Tensor>& operands) {
  return detail::any_enabled() ? detail::product_operands(operands) : std::nullopt;
}

// For an op that runs in float32: 16-bit operands cast to float32.
template <class... Operands>
std::optional<std::array<Tensor, sizeof...(Operands)>> float32_operands(const Operands&... operands) {
  return detail::apply(detail::float32_operands, operands...);
}

// For a binary elementwise op: when its floating operands differ in dtype and neither is
// float64, both in float32 (the wider), so that a 16-bit branch meets a float32 one.
template <class... Operands>
std::optional<std::array<Tensor, sizeof...(Operands)>> widest_operands(const Operands&... operands) {
  return detail::apply(detail::widest_operands, operands...);
}

}  // namespace autocast
}  // namespace ember
