// Tensor's accessors, autograd entry points and the two constructors ops build results with.
#include "core/tensor.h"

#include <cmath>
#include <limits>
#include <string_view>
#include <type_traits>

#include "core/autograd/record.h"
#include "core/ops/copy.h"

namespace ember {

namespace {
const TensorImpl& checked(const std::shared_ptr<TensorImpl>& impl) {
  EMBER_CHECK(impl != nullptr, "tensor is undefined (default-constructed)");
  return *impl;
}
}  // namespace

const Shape& Tensor::sizes() const { return checked(impl_).sizes; }
int64_t Tensor::size(int64_t dim) const { return sizes()[wrap_dim(dim, this->dim(), "size")]; }
int64_t Tensor::dim() const { return static_cast<int64_t>(sizes().size()); }
int64_t Tensor::numel() const { return numel_of(sizes()); }
const Shape& Tensor::strides() const { return checked(impl_).strides; }
int64_t Tensor::stride(int64_t dim) const { return strides()[wrap_dim(dim, this->dim(), "stride")]; }
int64_t Tensor::storage_offset() const { return checked(impl_).offset; }
DType Tensor::dtype() const { return checked(impl_).dtype; }
Device Tensor::device() const { return checked(impl_).storage->device(); }
TensorOptions Tensor::options() const { return TensorOptions(dtype()).device(device()); }

bool Tensor::is_contiguous() const {
  const TensorImpl& impl = checked(impl_);
  if (numel_of(impl.sizes) == 0) return true;  // no elements: any strides describe them, as in PyTorch
  int64_t expected = 1;
  for (size_t i = impl.sizes.size(); i-- > 0;) {
    if (impl.sizes[i] == 1) continue;  // the stride of a size-1 dim never matters
    if (impl.strides[i] != expected) return false;
    expected *= impl.sizes[i];
  }
  return true;
}

void* Tensor::raw_data() const {
  const TensorImpl& impl = checked(impl_);
  char* const base = static_cast<char*>(impl.storage->data());
  if (base == nullptr) return nullptr;  // an empty storage: see data_ptr
  return base + impl.offset * static_cast<int64_t>(element_size(impl.dtype));
}

namespace {

// The names item's errors give the C++ types it converts to.
template <class T>
constexpr std::string_view type_name() {
  if constexpr (std::is_same_v<T, float>) return "float";
  else if constexpr (std::is_same_v<T, double>) return "double";
  else if constexpr (std::is_same_v<T, int64_t>) return "int64";
  else if constexpr (std::is_same_v<T, int>) return "int";
  else return "bool";
}

// value as a T, refused as libtorch's item<T> refuses it: NaN, inf or a value out of range
// into an integer, a finite value beyond float's range into float.
template <class T, class U>
T checked_item(U stored) {
  using Value = compute_type<U>;
  const auto value = static_cast<Value>(stored);
  if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, double>) {
    return static_cast<T>(value);
  } else if constexpr (std::is_same_v<T, float>) {
    const auto wide = static_cast<double>(value);
    const bool fits = !std::isfinite(wide) || std::abs(wide) <= std::numeric_limits<float>::max();
    EMBER_CHECK(fits, "item: value {} cannot be converted to float without overflow", value);
    return static_cast<T>(value);
  } else {
    // T is an integer: compare in U's own type where it is an integer (no rounding), in double
    // otherwise, against [min, max + 1), both powers of two and exact in double.
    constexpr double low = static_cast<double>(std::numeric_limits<T>::min());
    constexpr double high = -low;
    bool fits;
    if constexpr (std::is_same_v<Value, bool>) {
      fits = true;
    } else if constexpr (std::is_integral_v<Value>) {
      fits = value >= std::numeric_limits<T>::min() && value <= std::numeric_limits<T>::max();
    } else {
      fits = static_cast<double>(value) >= low && static_cast<double>(value) < high;  // false for NaN
    }
    EMBER_CHECK(fits, "item: value {} cannot be converted to {} without overflow", value, type_name<T>());
    return static_cast<T>(value);
  }
}

}  // namespace

template <class T>
T Tensor::item() const {
  EMBER_CHECK(numel() == 1, "item: only a one-element tensor can be converted to a number; got shape {}",
              shape_str(sizes()));
  const Tensor host = is_cpu() ? *this : to(kCPU);
  return visit_any_dtype(dtype(), [&]<class U>() { return checked_item<T>(*host.data_ptr<U>()); });
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  const Tensor host = to(kCPU).contiguous();
  std::vector<T> values(host.numel());
  visit_any_dtype(dtype(), [&]<class U>() {
    const U* data = host.data_ptr<U>();
    for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<T>(data[i]);
  });
  return values;
}

#define EMBER_INSTANTIATE_ACCESSORS(T) \
  template T Tensor::item<T>() const;  \
  template std::vector<T> Tensor::to_vector<T>() const;
EMBER_INSTANTIATE_ACCESSORS(float)
EMBER_INSTANTIATE_ACCESSORS(double)
EMBER_INSTANTIATE_ACCESSORS(int64_t)
EMBER_INSTANTIATE_ACCESSORS(int)
EMBER_INSTANTIATE_ACCESSORS(bool)
#undef EMBER_INSTANTIATE_ACCESSORS

bool Tensor::requires_grad() const { return checked(impl_).requires_grad; }

Tensor& Tensor::requires_grad_(bool flag) {
  EMBER_CHECK(is_leaf(),
              "requires_grad_: only a leaf tensor can be marked; this one was computed by {} (use detach() "
              "to make a new leaf)",
              impl_->grad_fn ? impl_->grad_fn->name() : "an op");
  EMBER_CHECK(!flag || is_floating_point(dtype()), "requires_grad_: only floating point tensors can require "
              "grad, got {}", dtype());
  impl_->requires_grad = flag;
  return *this;
}

const Tensor& Tensor::grad() const { return checked(impl_).grad; }
Tensor& Tensor::mutable_grad() {
  checked(impl_);
  return impl_->grad;
}
const std::shared_ptr<autograd::Node>& Tensor::grad_fn() const { return checked(impl_).grad_fn; }
bool Tensor::is_leaf() const { return checked(impl_).grad_fn == nullptr; }

void Tensor::backward(const Tensor& gradient, const autograd::BackwardOptions& options) const {
  autograd::run_backward(*this, gradient, options);
}

Tensor Tensor::detach() const {
  const TensorImpl& impl = checked(impl_);
  auto detached = std::make_shared<TensorImpl>();
  detached->storage = impl.storage;
  detached->offset = impl.offset;
  detached->sizes = impl.sizes;
  detached->strides = impl.strides;
  detached->dtype = impl.dtype;
  detached->is_view = impl.is_view;
  return Tensor(std::move(detached));
}

uint64_t Tensor::version() const { return checked(impl_).storage->version(); }

Tensor make_tensor(const Shape& shape, DType dtype, Device device, std::string_view op) {
  // The byte count is computed with overflow checks: a wrapped product would allocate a small
  // buffer for a huge shape, and the first write would run past it.
  check_shape(shape, op);
  int64_t bytes = 0;
  EMBER_CHECK(!__builtin_mul_overflow(numel_of(shape), static_cast<int64_t>(element_size(dtype)), &bytes),
              "{}: shape {} of {} is too large: its size in bytes overflows int64", op, shape_str(shape), dtype);
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(bytes, device);
  impl->sizes = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor make_view(const Tensor& base, const Shape& sizes, const Shape& strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.impl()->storage;
  impl->offset = offset;
  impl->sizes = sizes;
  impl->strides = strides;
  impl->dtype = base.dtype();
  impl->is_view = true;
  return Tensor(std::move(impl));
}

Device Device::parse(std::string_view text) {
  if (text == "cpu") return kCPU;
  if (text == "cuda") return Device::cuda(0);
  if (text.starts_with("cuda:")) {
    const std::string_view digits = text.substr(5);
    int index = 0;
    bool ok = !digits.empty() && digits.size() < 4;
    for (char c : digits) {
      ok = ok && c >= '0' && c <= '9';
      index = index * 10 + (c - '0');
    }
    if (ok) return Device::cuda(index);
  }
  fail("device: unknown device '{}' (expected cpu, cuda or cuda:N)", text);
}

}  // namespace ember
