// Op programs: bytes decoded into a short program of calls to ember's public ops over small
// tensors of varied shapes (empty, broadcast, huge views), layouts (transposed, expanded,
// narrowed, overlapping views of one storage), dtypes and scalar values. Each call must either
// return what a float64 reference computed on contiguous copies of its inputs returns, or throw
// ember::Error. A different answer throws a Finding; any other exception escapes as it is. The
// fuzz target fuzz_ops runs one program per input, and test_op_programs runs many seeded ones.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/ranges.h>

#include "ember.h"

namespace ember::fuzzing {

// What ember promises never to do: return an answer other than the reference's.
struct Finding : std::logic_error {
  using std::logic_error::logic_error;
};

// The program's choices, read from the bytes; past their end every choice is the first.
class ProgramBytes {
 public:
  ProgramBytes(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool done() const { return at_ >= size_; }
  uint8_t byte() { return at_ < size_ ? data_[at_++] : 0; }
  size_t choose(size_t n) { return byte() % n; }
  template <class T, size_t N>
  const T& pick(const T (&options)[N]) {
    return options[choose(N)];
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

namespace op_reference {

constexpr int64_t kMaxElements = 4096;  // larger results are checked for errors only, then dropped

inline double epsilon(DType dtype) {
  switch (dtype) {
    case kFloat64: return 0x1p-52;
    case kFloat32: return 0x1p-23;
    case kBFloat16: return 0x1p-7;
    case kFloat16: return 0x1p-10;
    default: return 0.0;
  }
}

// Below this a floating result may be a subnormal or a flushed zero: compared absolutely.
inline double tiny(DType dtype) {
  switch (dtype) {
    case kFloat64: return 1e-300;
    case kFloat32: case kBFloat16: return 1e-37;
    case kFloat16: return 1e-4;
    default: return 0.0;
  }
}

// A double rounded to `dtype` as a stored result would be.
inline double rounded_to(DType dtype, double value) {
  switch (dtype) {
    case kFloat64: return value;
    case kFloat32: return static_cast<float>(value);
    case kBFloat16: return static_cast<float>(BFloat16(static_cast<float>(value)));
    case kFloat16: return static_cast<float>(Float16(static_cast<float>(value)));
    case kInt64: return std::trunc(value);
    case kBool: return value != 0.0 ? 1.0 : 0.0;
  }
  return value;
}

// Whether `actual` is `expected` up to `ulps` roundings in `dtype` (scaled by `magnitude`, the
// size of the terms that made it, where cancellation can lose digits).
inline bool close(double actual, double expected, DType dtype, double ulps = 2.0, double magnitude = 0.0) {
  if (std::isnan(expected)) return std::isnan(actual);
  if (std::isinf(expected)) return actual == expected;
  if (!is_floating_point(dtype)) return actual == expected;
  const double scale = std::max(std::abs(expected), magnitude);
  return std::abs(actual - expected) <= ulps * epsilon(dtype) * scale + tiny(dtype);
}

// x's values, read in row-major order, broadcast to `shape`.
inline std::vector<double> broadcast_values(const Tensor& x, const Shape& shape) {
  const std::vector<double> values = x.to_vector<double>();
  const Shape& sizes = x.sizes();
  const Shape strides = contiguous_strides(sizes);
  const size_t lead = shape.size() - sizes.size();
  std::vector<double> out(static_cast<size_t>(numel_of(shape)));
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t rest = static_cast<int64_t>(i), from = 0;
    for (size_t d = shape.size(); d-- > 0;) {
      const int64_t coordinate = rest % shape[d];
      rest /= shape[d];
      if (d >= lead && sizes[d - lead] != 1) from += coordinate * strides[d - lead];
    }
    out[i] = values[static_cast<size_t>(from)];
  }
  return out;
}

inline std::string describe(const Tensor& x) {
  return fmt::format("{} {} strides {} offset {}", x.dtype(), shape_str(x.sizes()), shape_str(x.strides()),
                     x.storage_offset());
}

}  // namespace op_reference

class OpProgram {
 public:
  explicit OpProgram(ProgramBytes bytes) : bytes_(bytes) {}

  // Runs up to `max_steps` calls; each ember::Error ends only its call.
  void run(int max_steps = 24) {
    manual_seed(bytes_.byte());
    for (int step = 0; step < max_steps && !bytes_.done(); ++step) {
      try {
        run_step();
      } catch (const Error&) {
        // The promised answer to a call ember cannot compute.
      }
    }
  }

 private:
  using Binary = double (*)(double, double);

  // --- choices ------------------------------------------------------------------------
  DType any_dtype() {
    static constexpr DType kDtypes[] = {kFloat32, kFloat64, kInt64, kFloat32, kFloat64, kBFloat16, kFloat16, kBool};
    return bytes_.pick(kDtypes);
  }
  int64_t small_size() {
    static constexpr int64_t kSizes[] = {1, 2, 3, 4, 0, 1, 2, 5};
    return bytes_.pick(kSizes);
  }
  // Sizes, dims and offsets for views: mostly small, sometimes negative or huge.
  int64_t any_integer() {
    static constexpr int64_t kIntegers[] = {0, 1, 2, 3, -1, -2, 4, 1, 0, 2,
                                            int64_t{1} << 32, int64_t{1} << 62, std::numeric_limits<int64_t>::max(),
                                            std::numeric_limits<int64_t>::min(), 5, -3};
    return bytes_.pick(kIntegers);
  }
  // Scalars at the edges of every dtype.
  double any_scalar() {
    static constexpr double kScalars[] = {0.0, 1.0, -1.0, 0.5, 2.5, -3.0, 7.0, 1e300, -1e300,
                                          std::numeric_limits<double>::infinity(),
                                          -std::numeric_limits<double>::infinity(),
                                          std::numeric_limits<double>::quiet_NaN(), 65504.0, 70000.0, 3.5e38, 0x1p63,
                                          -0x1p63, 1e10, 1e-30, 100.0};
    return bytes_.pick(kScalars);
  }
  Shape any_shape() {
    Shape shape(bytes_.choose(4));
    for (int64_t& size : shape) size = small_size();
    return shape;
  }
  Tensor& slot() { return slots_[bytes_.choose(slots_.size())]; }

  // A new tensor of small values that every dtype holds exactly.
  Tensor fresh_tensor() {
    const DType dtype = any_dtype();
    const Shape shape = any_shape();
    if (dtype == kBool) return randint(0, 2, shape).to(kBool);
    return randint(-9, 10, shape).to(dtype);
  }

  // Keeps `x` as a slot for later calls when it is small enough to check cheaply, counting each
  // size as at least 1: an empty [2^32, 0] would make a [2^32] sum or product later.
  void keep(const Tensor& x) {
    if (!x.defined()) return;
    int64_t extent = 1;
    for (int64_t size : x.sizes()) {
      extent *= std::max<int64_t>(size, 1);
      if (extent > op_reference::kMaxElements) return;
    }
    if (slots_.size() < 6) slots_.push_back(x);
    else slot() = x;
  }

  [[noreturn]] void finding(const std::string& what) { throw Finding("op program: " + what); }

  void check_values(const std::string& call, const Tensor& result, const std::vector<double>& expected, DType dtype,
                    double ulps = 2.0, const std::vector<double>& magnitudes = {}) {
    const std::vector<double> actual = result.to_vector<double>();
    if (actual.size() != expected.size()) {
      finding(fmt::format("{}: {} values, the reference has {}", call, actual.size(), expected.size()));
    }
    for (size_t i = 0; i < actual.size(); ++i) {
      const double magnitude = magnitudes.empty() ? 0.0 : magnitudes[i];
      if (!op_reference::close(actual[i], expected[i], dtype, ulps, magnitude)) {
        finding(fmt::format("{}: element {} is {}, the float64 reference gives {}", call, i, actual[i], expected[i]));
      }
    }
  }

  // --- steps ----------------------------------------------------------------------------
  void run_step() {
    if (slots_.empty()) {
      keep(fresh_tensor());
      return;
    }
    switch (bytes_.choose(12)) {
      case 0: keep(fresh_tensor()); break;
      case 1: case 2: view_step(); break;
      case 3: binary_step(); break;
      case 4: case 5: inplace_step(); break;
      case 6: scalar_step(); break;
      case 7: factory_step(); break;
      case 8: reduction_step(); break;
      case 9: matmul_step(); break;
      case 10: conversion_step(); break;
      case 11: optimizer_between_forward_and_backward(); break;
    }
  }

  // An optimizer step between a forward and its backward writes the parameter the forward saved:
  // the backward must refuse it (core/ops/inplace.h), whatever the optimizer, dtype or values.
  void optimizer_between_forward_and_backward() {
    Tensor x = slot().detach();
    if (!is_floating_point(x.dtype()) || x.numel() == 0) return;
    Tensor w = x.clone().requires_grad_(true);
    // x requires grad as well: then mul saves w for x's gradient, which the step overwrites.
    x = x.clone().requires_grad_(true);
    const Tensor y = sum(mul(w, x));
    w.mutable_grad() = ones_like(w);
    const char* name = "";
    switch (bytes_.choose(4)) {
      case 0: name = "Adam"; nn::Adam({w}).step(); break;
      case 1: name = "AdamW"; nn::AdamW({w}).step(); break;
      case 2: name = "SGD"; nn::SGD({w}, {.lr = 0.1}).step(); break;
      case 3: name = "SGD with momentum"; nn::SGD({w}, {.lr = 0.1, .momentum = 0.9}).step(); break;
    }
    try {
      y.backward();
    } catch (const Error& error) {
      if (std::string(error.what()).find("modified by an in-place operation") != std::string::npos) return;
      throw;
    }
    finding(fmt::format("{} on {} between forward and backward: the backward used the updated weight", name,
                        op_reference::describe(x)));
  }

  void view_step() {
    const Tensor x = slot();
    const int64_t a = any_integer(), b = any_integer(), c = any_integer();
    Tensor view;
    switch (bytes_.choose(12)) {
      case 0: view = x.transpose(a, b); break;
      case 1: view = x.narrow(a, b, c); break;
      case 2: view = x.slice(a, b, c, std::max<int64_t>(1, bytes_.choose(3))); break;
      case 3: view = x.select(a, b); break;
      case 4: view = x.unsqueeze(a); break;
      case 5: view = x.squeeze(); break;
      case 6: view = x.view({a, b}); break;
      case 7: view = x.reshape({-1, a}); break;
      case 8: {
        // expand: each dim of x kept, grown from 1, or given a new size (huge ones too).
        Shape shape;
        if (bytes_.choose(2) == 0) shape.push_back(any_integer());
        for (int64_t size : x.sizes()) shape.push_back(bytes_.choose(3) == 0 ? any_integer() : size);
        view = x.expand(shape);
        break;
      }
      case 9: view = x.flatten(); break;
      case 10: view = x.t(); break;
      case 11: view = x.contiguous(); break;
    }
    // Every view keeps its element count consistent with its shape, whatever the arguments.
    int64_t count = 1;
    for (int64_t size : view.sizes()) {
      if (size < 0 || __builtin_mul_overflow(count, std::max<int64_t>(size, 1), &count)) {
        finding(fmt::format("a view of {} has shape {}", op_reference::describe(x), shape_str(view.sizes())));
      }
    }
    keep(view);
  }

  void binary_step() {
    const Tensor a = slot(), b = slot();
    static constexpr const char* kNames[] = {"add", "sub", "mul", "div", "maximum", "minimum"};
    const size_t which = bytes_.choose(6);
    static constexpr Binary kOps[] = {
        [](double x, double y) { return x + y; }, [](double x, double y) { return x - y; },
        [](double x, double y) { return x * y; }, [](double x, double y) { return x / y; },
        [](double x, double y) { return std::isnan(x) || std::isnan(y) ? x + y : std::max(x, y); },
        [](double x, double y) { return std::isnan(x) || std::isnan(y) ? x + y : std::min(x, y); }};
    // The reference first: an int64 result beyond 2^52 is skipped before the call, as the
    // double reference does not hold it exactly (and past int64, int64 wraps around).
    const Shape shape = broadcast_shapes(a.sizes(), b.sizes(), "reference");
    const std::vector<double> x = op_reference::broadcast_values(a, shape);
    const std::vector<double> y = op_reference::broadcast_values(b, shape);
    std::vector<double> exact(x.size());
    for (size_t i = 0; i < x.size(); ++i) exact[i] = kOps[which](x[i], y[i]);
    if (a.dtype() == kInt64 && std::any_of(exact.begin(), exact.end(), [](double v) { return !(std::abs(v) <= 0x1p52); })) {
      return;
    }
    Tensor result;
    switch (which) {
      case 0: result = add(a, b); break;
      case 1: result = sub(a, b); break;
      case 2: result = mul(a, b); break;
      case 3: result = div(a, b); break;
      case 4: result = maximum(a, b); break;
      case 5: result = minimum(a, b); break;
    }
    std::vector<double> expected(exact.size());
    for (size_t i = 0; i < exact.size(); ++i) expected[i] = op_reference::rounded_to(result.dtype(), exact[i]);
    check_values(fmt::format("{}({}, {})", kNames[which], op_reference::describe(a), op_reference::describe(b)),
                 result, expected, result.dtype());
    keep(result);
  }

  // written.add_/mul_/copy_(input): the reference reads every value first, so the answer is
  // the elementwise one whatever memory the two share.
  void inplace_step() {
    Tensor written = slot();
    const Tensor input = slot();
    if (written.numel() > op_reference::kMaxElements) return;
    const std::vector<double> before = written.to_vector<double>();
    const bool broadcastable = is_broadcastable_to(input.sizes(), written.sizes());
    std::vector<double> other;
    if (broadcastable) other = op_reference::broadcast_values(input, written.sizes());
    const size_t which = bytes_.choose(4);
    const double alpha = which == 1 ? any_scalar() : 1.0;
    // int64 products can grow past what the reference (and int64) holds: skip those.
    if (written.dtype() == kInt64 && !other.empty()) {
      for (size_t i = 0; i < before.size(); ++i) {
        const double reach = std::abs(before[i]) * std::abs(other[i]) + std::abs(before[i]) +
                             std::abs(other[i]) * std::max(1.0, std::abs(alpha));
        if (!(reach <= 0x1p52)) return;
      }
    }
    std::string call;
    switch (which) {
      case 0: call = "add_"; written.add_(input); break;
      case 1: call = fmt::format("add_(alpha={})", alpha); written.add_(input, alpha); break;
      case 2: call = "mul_"; written.mul_(input); break;
      case 3: call = "copy_"; written.copy_(input); break;
    }
    if (!broadcastable) {
      finding(fmt::format("{} into {} accepted an input of shape {}", call, op_reference::describe(written),
                          shape_str(input.sizes())));
    }
    const DType dtype = written.dtype();
    const double rounded_alpha = op_reference::rounded_to(dtype, alpha);
    std::vector<double> expected(before.size());
    for (size_t i = 0; i < before.size(); ++i) {
      switch (which) {
        case 0: expected[i] = before[i] + other[i]; break;
        case 1: expected[i] = before[i] + op_reference::rounded_to(dtype, other[i] * rounded_alpha); break;
        case 2: expected[i] = before[i] * other[i]; break;
        case 3: expected[i] = other[i]; break;
      }
      expected[i] = op_reference::rounded_to(dtype, expected[i]);
    }
    check_values(fmt::format("{} into {} from {}", call, op_reference::describe(written), op_reference::describe(input)),
                 written, expected, dtype, 3.0);
  }

  // Scalars into a tensor: fill_ stores one (so it must fit the dtype as it is), add_ and mul_
  // compute with one converted to the tensor's dtype.
  void scalar_step() {
    Tensor x = slot();
    const double value = any_scalar();
    const DType dtype = x.dtype();
    const std::vector<double> before = x.to_vector<double>();
    const size_t which = bytes_.choose(3);
    if (which > 0 && dtype == kInt64) {
      for (double v : before) {
        if (std::abs(v) * std::max(1.0, std::abs(value)) > 0x1p50 || std::abs(value) > 0x1p50) return;
      }
    }
    switch (which) {
      case 0: x.fill_(value); break;
      case 1: x.add_(value); break;
      case 2: x.mul_(value); break;
    }
    const double as_stored = op_reference::rounded_to(dtype, value);
    std::vector<double> expected(before.size());
    for (size_t i = 0; i < before.size(); ++i) {
      switch (which) {
        case 0: expected[i] = dtype == kBool || dtype == kInt64 ? as_stored : value; break;
        case 1: expected[i] = op_reference::rounded_to(dtype, before[i] + as_stored); break;
        case 2: expected[i] = op_reference::rounded_to(dtype, before[i] * as_stored); break;
      }
    }
    if (which == 0 && dtype == kInt64 && value != std::trunc(value)) return;  // fill_ refuses fractions into int64
    check_values(fmt::format("{}({}) on {}", which == 0 ? "fill_" : which == 1 ? "add_" : "mul_", value,
                             op_reference::describe(x)),
                 x, expected, dtype);
  }

  // Factories store their scalars as given: full and clamp's bounds must fit the dtype, and
  // arange's values must be the ones asked for.
  void factory_step() {
    const DType dtype = any_dtype();
    switch (bytes_.choose(3)) {
      case 0: {
        const double value = any_scalar();
        const Tensor x = full(any_shape(), value, dtype);
        const double expected = dtype == kInt64 || dtype == kBool ? op_reference::rounded_to(dtype, value) : value;
        check_values(fmt::format("full({}, {})", value, dtype), x, std::vector<double>(x.numel(), expected), dtype);
        keep(x);
        break;
      }
      case 1: {
        const double start = any_scalar() * (bytes_.choose(2) ? 1.0 : 0.0), end = any_scalar(), step = any_scalar();
        // Only lengths that are cheap to make or that no int64 counts (which must be refused).
        const double count = std::ceil((end - start) / step);
        if (std::isfinite(count) && count > op_reference::kMaxElements && count < 0x1p63) return;
        const Tensor x = arange(start, end, step, dtype);
        std::vector<double> expected(x.numel());
        for (size_t i = 0; i < expected.size(); ++i) {
          expected[i] = std::fma(static_cast<double>(i), step, start);
          if (!is_floating_point(dtype)) expected[i] = op_reference::rounded_to(dtype, expected[i]);
        }
        check_values(fmt::format("arange({}, {}, {}, {})", start, end, step, dtype), x, expected, dtype);
        break;
      }
      case 2: {
        const Tensor x = slot();
        const double low = any_scalar(), high = any_scalar();
        const bool has_low = bytes_.choose(2), has_high = bytes_.choose(2);
        const Tensor clamped = clamp(x, has_low ? std::optional(low) : std::nullopt,
                                     has_high ? std::optional(high) : std::nullopt);
        const std::vector<double> values = x.to_vector<double>();
        std::vector<double> expected(values.size());
        for (size_t i = 0; i < values.size(); ++i) {
          double v = values[i];
          if (has_low && !std::isnan(v)) v = std::isnan(low) ? low : std::max(v, low);
          if (has_high && !std::isnan(v)) v = std::isnan(high) ? high : std::min(v, high);
          expected[i] = x.dtype() == kInt64 ? v : op_reference::rounded_to(x.dtype(), v);
        }
        check_values(fmt::format("clamp({} holding {}, min {}, max {})", op_reference::describe(x), values,
                                 has_low ? fmt::format("{}", low) : "none", has_high ? fmt::format("{}", high) : "none"),
                     clamped, expected, x.dtype());
        break;
      }
    }
  }

  void reduction_step() {
    const Tensor x = slot();
    if (x.dim() == 0 || (!is_floating_point(x.dtype()) && x.dtype() != kInt64)) return;
    const std::vector<double> values = x.to_vector<double>();
    double total_magnitude = 0;
    for (double v : values) {
      if (std::abs(v) > 1e30) return;  // overflow in the dtype's own accumulation order is not a wrong answer
      total_magnitude += std::abs(v);
    }
    if (x.dtype() == kInt64 && total_magnitude > 0x1p52) return;  // past 2^52 the double reference is inexact
    const int64_t dim = static_cast<int64_t>(bytes_.choose(static_cast<size_t>(x.dim())));
    const bool keepdim = bytes_.choose(2);
    const size_t which = bytes_.choose(3);
    Tensor result;
    switch (which) {
      case 0: result = sum(x, {dim}, keepdim); break;
      case 1: result = mean(x, {dim}, keepdim); break;
      case 2: result = amax(x, {dim}, keepdim); break;
    }
    // The reference walks x's row-major values: outer, reduced, inner.
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < dim; ++d) outer *= x.size(d);
    for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= x.size(d);
    const int64_t n = x.size(dim);
    std::vector<double> expected, magnitudes;
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        double total = 0, magnitude = 0, largest = -std::numeric_limits<double>::infinity();
        for (int64_t k = 0; k < n; ++k) {
          const double v = values[static_cast<size_t>((o * n + k) * inner + i)];
          total += v;
          magnitude += std::abs(v);
          largest = std::isnan(v) || std::isnan(largest) ? NAN : std::max(largest, v);
        }
        const double value = which == 0 ? total : which == 1 ? total / static_cast<double>(n) : largest;
        expected.push_back(op_reference::rounded_to(result.dtype(), value));
        magnitudes.push_back(which == 2 ? 0.0 : magnitude);
      }
    }
    check_values(fmt::format("{}({}, dim {})", which == 0 ? "sum" : which == 1 ? "mean" : "amax",
                             op_reference::describe(x), dim),
                 result, expected, result.dtype(), 2.0 * static_cast<double>(n + 1), magnitudes);
  }

  void matmul_step() {
    const Tensor a = slot(), b = slot();
    if (a.dtype() == kInt64) {
      double largest = 0;
      for (const Tensor& t : {a, b}) {
        for (double v : t.to_vector<double>()) largest = std::max(largest, std::abs(v));
      }
      if (largest > 0x1p20) return;  // keeps int64 sums of products within the double reference
    }
    const Tensor result = matmul(a, b);
    if (a.dim() != 2 || b.dim() != 2) return;  // the reference covers matrices
    const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
    const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
    std::vector<double> expected, magnitudes;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double total = 0, magnitude = 0;
        for (int64_t p = 0; p < k; ++p) {
          total += x[static_cast<size_t>(i * k + p)] * y[static_cast<size_t>(p * n + j)];
          magnitude += std::abs(x[static_cast<size_t>(i * k + p)] * y[static_cast<size_t>(p * n + j)]);
        }
        expected.push_back(op_reference::rounded_to(result.dtype(), total));
        magnitudes.push_back(magnitude);
      }
    }
    if (std::any_of(magnitudes.begin(), magnitudes.end(), [](double v) { return v > 1e30; })) return;
    check_values(fmt::format("matmul({}, {})", op_reference::describe(a), op_reference::describe(b)), result, expected,
                 result.dtype(), 2.0 * static_cast<double>(k + 1), magnitudes);
  }

  // item<T> and dtype conversions.
  void conversion_step() {
    const Tensor x = slot();
    if (bytes_.choose(2) == 0) {
      const DType dtype = any_dtype();
      std::vector<double> expected = x.to_vector<double>();
      for (double& v : expected) {
        // A float beyond int64 (or NaN) has no int64 value: the conversion gives int64's
        // smallest, as PyTorch on x86 does (core/float_to_int.h).
        if (dtype == kInt64 && !(v >= -0x1p63 && v < 0x1p63)) {
          v = -0x1p63;
          continue;
        }
        v = op_reference::rounded_to(dtype, v);
      }
      const Tensor converted = x.to(dtype);
      check_values(fmt::format("to({}) of {}", dtype, op_reference::describe(x)), converted, expected, dtype);
      return;
    }
    if (x.numel() != 1) return;
    const double value = x.to_vector<double>()[0];
    switch (bytes_.choose(3)) {
      case 0: {
        const int64_t got = x.item<int64_t>();
        if (!(value >= -0x1p63 && value < 0x1p63) || static_cast<double>(got) != std::trunc(value)) {
          finding(fmt::format("item<int64_t> of {} gave {}", value, got));
        }
        break;
      }
      case 1: {
        const int got = x.item<int>();
        if (!(value > -2147483649.0 && value < 2147483648.0) || got != static_cast<int>(std::trunc(value))) {
          finding(fmt::format("item<int> of {} gave {}", value, got));
        }
        break;
      }
      case 2: {
        const float got = x.item<float>();
        if (!op_reference::close(got, value, kFloat32)) finding(fmt::format("item<float> of {} gave {}", value, got));
        break;
      }
    }
  }

  ProgramBytes bytes_;
  std::vector<Tensor> slots_;
};

// Runs the program the bytes describe; ember::Error ends one call, a Finding or any other
// exception escapes to the caller.
inline void run_op_program(const uint8_t* data, size_t size) { OpProgram(ProgramBytes(data, size)).run(); }

}  // namespace ember::fuzzing
