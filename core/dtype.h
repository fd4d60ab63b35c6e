// Element types a tensor can hold, and the switch that turns a runtime dtype into a C++ type.
// bfloat16 and float16 (core/half.h) are stored in 2 bytes and computed on in float32: a kernel
// templated on the element type T does its arithmetic in compute_type<T> and rounds once, where
// it stores a result. Kernels dispatch on the dtype with the visit_any_* switches below.
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>
#include <utility>

#include "core/error.h"
#include "core/half.h"

namespace ember {

enum class DType : uint8_t { Float32, Float64, Int64, Bool, BFloat16, Float16 };

inline constexpr DType kFloat32 = DType::Float32;
inline constexpr DType kFloat64 = DType::Float64;
inline constexpr DType kInt64 = DType::Int64;
inline constexpr DType kBool = DType::Bool;
inline constexpr DType kBFloat16 = DType::BFloat16;
inline constexpr DType kFloat16 = DType::Float16;

constexpr std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Int64: return "int64";
    case DType::Bool: return "bool";
    case DType::BFloat16: return "bfloat16";
    case DType::Float16: return "float16";
  }
  return "unknown";
}

constexpr size_t element_size(DType dtype) {
  switch (dtype) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Int64: return 8;
    case DType::Bool: return 1;
    case DType::BFloat16: return 2;
    case DType::Float16: return 2;
  }
  return 0;
}

constexpr bool is_floating_point(DType dtype) {
  return dtype == DType::Float32 || dtype == DType::Float64 || dtype == DType::BFloat16 || dtype == DType::Float16;
}

constexpr bool is_16_bit_floating_point(DType dtype) { return dtype == DType::BFloat16 || dtype == DType::Float16; }

// Whether T is a floating point element type: float, double, BFloat16 or Float16.
template <class T>
inline constexpr bool is_floating_element =
    std::is_floating_point_v<T> || std::is_same_v<T, BFloat16> || std::is_same_v<T, Float16>;

// The type a kernel computes and accumulates in for elements of type T: float for the 16-bit
// formats (each result is rounded once, on store), T itself otherwise.
template <class T>
using compute_type = std::conditional_t<std::is_same_v<T, BFloat16> || std::is_same_v<T, Float16>, float, T>;

// The DType of a C++ element type: dtype_of<float>() == kFloat32.
template <class T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return DType::Float32;
  else if constexpr (std::is_same_v<T, double>) return DType::Float64;
  else if constexpr (std::is_same_v<T, int64_t>) return DType::Int64;
  else if constexpr (std::is_same_v<T, bool>) return DType::Bool;
  else if constexpr (std::is_same_v<T, BFloat16>) return DType::BFloat16;
  else if constexpr (std::is_same_v<T, Float16>) return DType::Float16;
  else static_assert(sizeof(T) == 0, "ember tensors hold float, double, int64_t, bool, BFloat16 or Float16");
}

// Calls fn.template operator()<T>() with T the C++ type of dtype, for every dtype. Kernels use
// it with a template lambda:  visit_any_dtype(x.dtype(), [&]<class T>() { ... T ... });
template <class Fn>
decltype(auto) visit_any_dtype(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::Float32: return fn.template operator()<float>();
    case DType::Float64: return fn.template operator()<double>();
    case DType::Int64: return fn.template operator()<int64_t>();
    case DType::Bool: return fn.template operator()<bool>();
    case DType::BFloat16: return fn.template operator()<BFloat16>();
    case DType::Float16: return fn.template operator()<Float16>();
  }
  fail("unknown dtype {}", static_cast<int>(dtype));
}

// The floating dtypes, 16-bit ones included; `op` names the caller in the error for others.
template <class Fn>
decltype(auto) visit_any_floating(DType dtype, std::string_view op, Fn&& fn) {
  switch (dtype) {
    case DType::Float32: return fn.template operator()<float>();
    case DType::Float64: return fn.template operator()<double>();
    case DType::BFloat16: return fn.template operator()<BFloat16>();
    case DType::Float16: return fn.template operator()<Float16>();
    default:
      fail("{}: expected a floating point tensor (float32, float64, bfloat16 or float16), got {}", op,
           dtype_name(dtype));
  }
}

// The numeric dtypes (not bool), 16-bit ones included.
template <class Fn>
decltype(auto) visit_any_numeric(DType dtype, std::string_view op, Fn&& fn) {
  switch (dtype) {
    case DType::Int64: return fn.template operator()<int64_t>();
    case DType::Bool:
      fail("{}: expected a numeric tensor (float32, float64, bfloat16, float16 or int64), got bool", op);
    default: return visit_any_floating(dtype, op, std::forward<Fn>(fn));
  }
}

// float32 and float64 only: for the kernels that hand their operands to BLAS (products, the CPU
// attention), which reach 16-bit tensors only through float32 copies of them.
template <class Fn>
decltype(auto) visit_float32_or_float64(DType dtype, std::string_view op, Fn&& fn) {
  switch (dtype) {
    case DType::Float32: return fn.template operator()<float>();
    case DType::Float64: return fn.template operator()<double>();
    default: fail("{}: this kernel computes on float32 and float64, got {}", op, dtype_name(dtype));
  }
}

}  // namespace ember

template <>
struct fmt::formatter<ember::DType> : fmt::formatter<std::string_view> {
  auto format(ember::DType dtype, format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(ember::dtype_name(dtype), ctx);
  }
};
