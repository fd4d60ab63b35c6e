// Factories: filled, ranged and random tensors, and tensors from C++ values.
#include "core/ops/factory.h"

#include <algorithm>
#include <cmath>

#include "core/cpu/loops.h"
#include "core/dispatch.h"
#include "core/float_to_int.h"
#include "core/ops/copy.h"
#include "core/random.h"
#include "core/random_elements.h"
#include "core/scalar_conversion.h"

namespace ember {
namespace kernels {
constinit KernelTable<void(const Tensor& out, double value)> fill{"fill"};
constinit KernelTable<void(const Tensor& out, double start, double step)> arange{"arange"};
constinit KernelTable<void(const Tensor& out, PhiloxState state)> uniform{"rand"};
constinit KernelTable<void(const Tensor& out, PhiloxState state)> normal{"randn"};
constinit KernelTable<void(const Tensor& out, int64_t low, uint64_t range, PhiloxState state)> randint{"randint"};
}  // namespace kernels

namespace {

void fill_cpu(const Tensor& out, double value) {
  visit_any_dtype(out.dtype(), [&]<class T>() {
    const T v = static_cast<T>(value);
    cpu::for_each_element<T>(out, {}, [v]() { return v; });
  });
}

// Element i is start + i * step as one fused multiply-add, rounded once. Written as a multiply
// then an add, g++ contracts it into an FMA where the target has one (-march=native) and not
// elsewhere, so it rounded differently from build to build and from the CUDA kernel (5e-17
// apart for arange(1, -3, -0.1)); std::fma is the same IEEE operation everywhere, and
// cuda/ops/factory.cu computes exactly it.
void arange_cpu(const Tensor& out, double start, double step) {
  visit_any_numeric(out.dtype(), "arange", [&]<class T>() {
    T* data = out.data_ptr<T>();
    parallel_for(out.numel(), 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) data[i] = static_cast<T>(std::fma(static_cast<double>(i), step, start));
    });
  });
}

// The element-to-word mappings are random.h's uniform_element, normal_element and
// randint_element, which the CUDA kernels share. A 16-bit tensor draws what a float32 one
// does (the same words, so after the same seed it holds the float32 values, rounded) and
// rounds each value once.

// A uniform [0, 1) float rounded to 16 bits towards zero: to nearest, the values within half
// a 16-bit step of 1 (1 in 512 of them for bfloat16) would become 1, outside the range.
template <class T>
T round_down_unit(float value) {
  T rounded(value);
  if (static_cast<float>(rounded) > value) rounded = T::from_bits(static_cast<uint16_t>(rounded.bits - 1));
  return rounded;
}

void uniform_cpu(const Tensor& out, PhiloxState state) {
  visit_any_floating(out.dtype(), "rand", [&]<class T>() {
    T* data = out.data_ptr<T>();
    parallel_for(out.numel(), 20, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        if constexpr (std::is_same_v<compute_type<T>, T>) data[i] = uniform_element<T>(state, i);
        else data[i] = round_down_unit<T>(uniform_element<float>(state, i));
      }
    });
  });
}

void normal_cpu(const Tensor& out, PhiloxState state) {
  visit_any_floating(out.dtype(), "randn", [&]<class T>() {
    using C = compute_type<T>;
    T* data = out.data_ptr<T>();
    parallel_for(out.numel(), 40, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) data[i] = T(normal_element<C>(state, i));
    });
  });
}

void randint_cpu(const Tensor& out, int64_t low, uint64_t range, PhiloxState state) {
  visit_any_numeric(out.dtype(), "randint", [&]<class T>() {
    T* data = out.data_ptr<T>();
    parallel_for(out.numel(), 20, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        if constexpr (std::is_same_v<compute_type<T>, T>) data[i] = randint_element<T>(state, i, low, range);
        else data[i] = static_cast<T>(static_cast<double>(randint_element<int64_t>(state, i, low, range)));
      }
    });
  });
}

EMBER_REGISTER_KERNEL(kernels::fill, DeviceType::CPU, fill_cpu);
EMBER_REGISTER_KERNEL(kernels::arange, DeviceType::CPU, arange_cpu);
EMBER_REGISTER_KERNEL(kernels::uniform, DeviceType::CPU, uniform_cpu);
EMBER_REGISTER_KERNEL(kernels::normal, DeviceType::CPU, normal_cpu);
EMBER_REGISTER_KERNEL(kernels::randint, DeviceType::CPU, randint_cpu);

Tensor finish(Tensor out, const TensorOptions& options) {
  if (options.requires_grad()) out.requires_grad_(true);
  return out;
}

uint64_t words_per_element(DType dtype, int normal) {
  return (dtype == kFloat64 ? 2 : 1) * (normal ? 2 : 1);
}

}  // namespace

Tensor empty(const Shape& shape, TensorOptions options) {
  return finish(make_tensor(shape, options.dtype(), options.device(), "empty"), options);
}

Tensor full(const Shape& shape, double value, TensorOptions options) {
  // Converting NaN, inf or an out-of-range value to int64 is undefined behaviour, and a finite
  // value beyond a floating type's range would be stored as inf.
  check_fits(value, options.dtype(), "full");
  Tensor out = make_tensor(shape, options.dtype(), options.device(), "full");
  kernels::fill[out.device()](out, value);
  return finish(out, options);
}

Tensor full_int64(const Shape& shape, int64_t value, TensorOptions options) {
  EMBER_CHECK(options.dtype() == kInt64, "full_int64: the dtype must be int64, got {}", options.dtype());
  Tensor host = make_tensor(shape, kInt64, kCPU, "full_int64");
  std::fill_n(host.data_ptr<int64_t>(), host.numel(), value);
  return finish(host.to(options.device()), options);
}

Tensor zeros(const Shape& shape, TensorOptions options) { return full(shape, 0.0, options); }
Tensor ones(const Shape& shape, TensorOptions options) { return full(shape, 1.0, options); }

Tensor arange(double end, TensorOptions options) { return arange(0.0, end, 1.0, options); }

Tensor arange(double start, double end, double step, TensorOptions options) {
  EMBER_CHECK(step != 0.0, "arange: step must be nonzero");
  EMBER_CHECK(std::isfinite(start) && std::isfinite(end), "arange: start and end must be finite");
  EMBER_CHECK((end - start) / step >= 0, "arange: step {} does not lead from {} to {}", step, start, end);
  const double exact_count = std::ceil((end - start) / step);
  EMBER_CHECK(exact_count < 0x1p63, "arange: [{}, {}) in steps of {} has {} elements, more than int64 can count", start,
              end, step, exact_count);
  const auto count = float_to_int<int64_t>(exact_count);
  if (count > 0) {
    // The values stored are start and start + i * step up to the last: each must fit the dtype
    // (for int64 the conversion of one that does not is undefined behaviour).
    check_fits(start, options.dtype(), "arange");
    check_fits(std::fma(static_cast<double>(count - 1), step, start), options.dtype(), "arange");
  }
  Tensor out = make_tensor({count}, options.dtype(), options.device(), "arange");
  kernels::arange[out.device()](out, start, step);
  return finish(out, options);
}

namespace {
// Where the kernel filling `out` draws: a GPU draw may be recorded into a CUDA graph.
DrawOn draw_on(const Tensor& out) { return out.device().is_cuda() ? DrawOn::kGPU : DrawOn::kCPU; }
}  // namespace

Tensor rand(const Shape& shape, TensorOptions options) {
  Tensor out = make_tensor(shape, options.dtype(), options.device(), "rand");
  const uint64_t words = out.numel() * words_per_element(out.dtype(), 0);
  kernels::uniform[out.device()](out, Generator::global().reserve((words + 3) / 4, draw_on(out)));
  return finish(out, options);
}

Tensor randn(const Shape& shape, TensorOptions options) {
  Tensor out = make_tensor(shape, options.dtype(), options.device(), "randn");
  const uint64_t words = out.numel() * words_per_element(out.dtype(), 1);
  kernels::normal[out.device()](out, Generator::global().reserve((words + 3) / 4, draw_on(out)));
  return finish(out, options);
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions options) {
  EMBER_CHECK(high > low, "randint: high ({}) must be greater than low ({})", high, low);
  Tensor out = make_tensor(shape, options.dtype(), options.device(), "randint");
  // high - low as an unsigned count: the whole int64 range has 2^64 - 1 values.
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  kernels::randint[out.device()](out, low, range, Generator::global().reserve((2 * out.numel() + 3) / 4, draw_on(out)));
  return finish(out, options);
}

Tensor empty_like(const Tensor& other) { return empty(other.sizes(), other.options()); }
Tensor zeros_like(const Tensor& other) { return zeros(other.sizes(), other.options()); }
Tensor ones_like(const Tensor& other) { return ones(other.sizes(), other.options()); }
Tensor full_like(const Tensor& other, double value) { return full(other.sizes(), value, other.options()); }
Tensor rand_like(const Tensor& other) { return rand(other.sizes(), other.options()); }
Tensor randn_like(const Tensor& other) { return randn(other.sizes(), other.options()); }

Tensor scalar_tensor(double value, TensorOptions options) { return full({}, value, options); }

template <class T>
Tensor tensor(const std::vector<T>& values, const Shape& shape, TensorOptions options) {
  using Stored = std::conditional_t<std::is_same_v<T, int>, int64_t, T>;
  check_shape(shape, "tensor");
  const int64_t count = numel_of(shape);
  EMBER_CHECK(static_cast<int64_t>(values.size()) == count, "tensor: {} values do not fill shape {} ({} elements)",
              values.size(), shape_str(shape), count);
  Tensor host = make_tensor(shape, dtype_of<Stored>(), kCPU);
  Stored* data = host.data_ptr<Stored>();
  for (int64_t i = 0; i < count; ++i) data[i] = static_cast<Stored>(values[i]);
  // Values converted to another dtype are checked as PyTorch's torch.tensor checks them: one
  // that overflows the dtype (1e300 as int64 or float32, NaN as int64) is refused, not stored
  // as whatever the conversion gives.
  if (options.dtype() != host.dtype() && options.dtype() != kBool) {
    for (int64_t i = 0; i < count; ++i) check_fits(static_cast<double>(data[i]), options.dtype(), "tensor");
  }
  return finish(host.to(options.dtype()).to(options.device()), options);
}

template <class T>
Tensor tensor(const std::vector<T>& values, const Shape& shape) {
  using Stored = std::conditional_t<std::is_same_v<T, int>, int64_t, T>;
  return tensor(values, shape, TensorOptions(dtype_of<Stored>()));
}

#define EMBER_INSTANTIATE_TENSOR(T)                                                    \
  template Tensor tensor<T>(const std::vector<T>&, const Shape&, TensorOptions); \
  template Tensor tensor<T>(const std::vector<T>&, const Shape&);
EMBER_INSTANTIATE_TENSOR(float)
EMBER_INSTANTIATE_TENSOR(double)
EMBER_INSTANTIATE_TENSOR(int64_t)
EMBER_INSTANTIATE_TENSOR(int)
EMBER_INSTANTIATE_TENSOR(bool)
#undef EMBER_INSTANTIATE_TENSOR

}  // namespace ember
