// Element types a tensor can hold, and the switch that turns a runtime dtype into a C++ type.
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "core/error.h"

namespace ember {

enum class DType : uint8_t { Float32, Float64, Int64, Bool };

inline constexpr DType kFloat32 = DType::Float32;
inline constexpr DType kFloat64 = DType::Float64;
inline constexpr DType kInt64 = DType::Int64;
inline constexpr DType kBool = DType::Bool;

constexpr std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Int64: return "int64";
    case DType::Bool: return "bool";
  }
  return "unknown";
}

constexpr size_t element_size(DType dtype) {
  switch (dtype) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Int64: return 8;
    case DType::Bool: return 1;
  }
  return 0;
}

constexpr bool is_floating_point(DType dtype) {
  return dtype == DType::Float32 || dtype == DType::Float64;
}

// The DType of a C++ element type: dtype_of<float>() == kFloat32.
template <class T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return DType::Float32;
  else if constexpr (std::is_same_v<T, double>) return DType::Float64;
  else if constexpr (std::is_same_v<T, int64_t>) return DType::Int64;
  else if constexpr (std::is_same_v<T, bool>) return DType::Bool;
  else static_assert(sizeof(T) == 0, "ember tensors hold float, double, int64_t or bool");
}

// Calls fn.template operator()<T>() with T the C++ type of dtype. Kernels use it with a
// template lambda:  visit_dtype(x.dtype(), [&]<class T>() { ... T ... });
template <class Fn>
decltype(auto) visit_dtype(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::Float32: return fn.template operator()<float>();
    case DType::Float64: return fn.template operator()<double>();
    case DType::Int64: return fn.template operator()<int64_t>();
    case DType::Bool: return fn.template operator()<bool>();
  }
  throw Error("visit_dtype: unknown dtype");
}

// The same for the floating dtypes only; `op` names the caller in the error for others.
template <class Fn>
decltype(auto) visit_floating(DType dtype, std::string_view op, Fn&& fn) {
  switch (dtype) {
    case DType::Float32: return fn.template operator()<float>();
    case DType::Float64: return fn.template operator()<double>();
    default: fail("{}: expected a floating point tensor (float32 or float64), got {}", op, dtype_name(dtype));
  }
}

// Numeric dtypes: floating point and int64 (not bool).
template <class Fn>
decltype(auto) visit_numeric(DType dtype, std::string_view op, Fn&& fn) {
  switch (dtype) {
    case DType::Float32: return fn.template operator()<float>();
    case DType::Float64: return fn.template operator()<double>();
    case DType::Int64: return fn.template operator()<int64_t>();
    default: fail("{}: expected a numeric tensor (float32, float64 or int64), got {}", op, dtype_name(dtype));
  }
}

}  // namespace ember

template <>
struct fmt::formatter<ember::DType> : fmt::formatter<std::string_view> {
  auto format(ember::DType dtype, format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(ember::dtype_name(dtype), ctx);
  }
};
