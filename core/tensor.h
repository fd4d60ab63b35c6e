// Tensor: a cheap, copyable handle to a TensorImpl (storage + offset + shape + strides +
// dtype + autograd metadata). Copying a Tensor shares the data, as in PyTorch.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <ostream>
#include <vector>

#include "core/autograd/backward_options.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/shape.h"
#include "core/storage.h"

namespace ember {

namespace autograd {
struct Node;
}

class Tensor;
struct TensorImpl;

// What a factory makes: dtype (float32 by default), device (CPU by default) and whether the
// result is a leaf that requires grad. Builder style, as in PyTorch:
//   ember::zeros({2, 3}, TensorOptions().dtype(kFloat64).requires_grad(true))
// A DType or a Device converts to TensorOptions, so ember::ones({3}, kInt64) works too.
class TensorOptions {
 public:
  TensorOptions() = default;
  TensorOptions(DType dtype) : dtype_(dtype) {}     // NOLINT: implicit on purpose
  TensorOptions(Device device) : device_(device) {}  // NOLINT
  TensorOptions(DeviceType type) : device_(type) {}  // NOLINT

  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  bool requires_grad() const { return requires_grad_; }

  TensorOptions dtype(DType dtype) const { auto o = *this; o.dtype_ = dtype; return o; }
  TensorOptions device(Device device) const { auto o = *this; o.device_ = device; return o; }
  TensorOptions requires_grad(bool flag) const { auto o = *this; o.requires_grad_ = flag; return o; }

 private:
  DType dtype_ = kFloat32;
  Device device_ = kCPU;
  bool requires_grad_ = false;
};

class Tensor {
 public:
  Tensor() = default;  // an undefined tensor: defined() is false
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // --- what it is -------------------------------------------------------------------------
  bool defined() const { return impl_ != nullptr; }
  const Shape& sizes() const;
  int64_t size(int64_t dim) const;
  int64_t dim() const;
  int64_t numel() const;
  const Shape& strides() const;
  int64_t stride(int64_t dim) const;
  int64_t storage_offset() const;
  DType dtype() const;
  Device device() const;
  TensorOptions options() const;  // dtype and device (requires_grad false)
  bool is_contiguous() const;
  bool is_cpu() const { return device().is_cpu(); }
  bool is_cuda() const { return device().is_cuda(); }

  // --- raw access -------------------------------------------------------------------------
  // Pointer to the first element; T must match the dtype.
  template <class T>
  T* data_ptr() const;
  void* raw_data() const;
  // The value of a one-element tensor (any device), converted to T.
  template <class T>
  T item() const;
  double item() const { return item<double>(); }
  // A reference to one element of a CPU tensor, bounds-checked: x.at<float>(1, 2).
  template <class T, class... Index>
  T& at(Index... index) const;
  // All elements in row-major order, copied to the host.
  template <class T>
  std::vector<T> to_vector() const;

  // --- autograd ---------------------------------------------------------------------------
  bool requires_grad() const;
  // Makes a leaf require grad (or not); throws on a non-leaf.
  Tensor& requires_grad_(bool flag = true);
  // The gradient accumulated by backward(); undefined until then. Gradients add up over
  // several backward() calls until zeroed, as in PyTorch.
  const Tensor& grad() const;
  Tensor& mutable_grad();
  const std::shared_ptr<autograd::Node>& grad_fn() const;
  bool is_leaf() const;
  // Backpropagates from this tensor into the .grad of the leaves it depends on. `gradient` may
  // be omitted only for one-element tensors. The options (core/autograd/backward_options.h):
  // retain_graph keeps the saved tensors for another backward (by default: when create_graph);
  // create_graph records the backward pass itself, so the gradients it leaves in .grad can be
  // differentiated again (core/autograd/grad.h has the functional form).
  //   loss.backward();  loss.backward({.create_graph = true});  y.backward(dy, {.retain_graph = true});
  void backward(const Tensor& gradient = Tensor(), const autograd::BackwardOptions& options = {}) const;
  void backward(const autograd::BackwardOptions& options) const { backward(Tensor(), options); }
  // A tensor sharing this one's data but cut from the graph.
  Tensor detach() const;
  // Number of in-place writes to the underlying storage so far.
  uint64_t version() const;

  // --- conversions (core/ops/copy.h) -----------------------------------------------------
  Tensor contiguous() const;
  Tensor clone() const;
  Tensor to(DType dtype) const;
  Tensor to(Device device) const;
  Tensor cpu() const { return to(kCPU); }

  // --- views (core/ops/views.h) ------------------------------------------------------------
  Tensor view(const Shape& shape) const;
  Tensor reshape(const Shape& shape) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const;
  Tensor permute(const Shape& dims) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor expand(const Shape& shape) const;
  Tensor expand_as(const Tensor& other) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;

  // --- in-place (core/ops/inplace.h) -------------------------------------------------------
  Tensor& add_(const Tensor& other, double alpha = 1.0);
  Tensor& add_(double other);
  Tensor& mul_(const Tensor& other);
  Tensor& mul_(double other);
  Tensor& zero_();
  Tensor& fill_(double value);
  Tensor& copy_(const Tensor& src);

  // --- math shorthands (core/ops/*.h) ------------------------------------------------------
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor abs() const;
  Tensor neg() const;
  Tensor pow(double exponent) const;
  Tensor sum() const;
  Tensor sum(const Shape& dims, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(const Shape& dims, bool keepdim = false) const;
  Tensor matmul(const Tensor& other) const;

  // --- internals ------------------------------------------------------------------------
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// The data behind a Tensor. Ops build these; users hold Tensors.
struct TensorImpl {
  std::shared_ptr<Storage> storage;
  int64_t offset = 0;  // in elements
  Shape sizes;
  Shape strides;  // in elements
  DType dtype = kFloat32;

  // Autograd metadata. A tensor requires grad when it is a leaf marked so, or when it was
  // computed by a recorded op (then grad_fn is set).
  bool requires_grad = false;
  std::shared_ptr<autograd::Node> grad_fn;
  Tensor grad;
  // True when this tensor shares storage with a tensor it was made from by a view op.
  bool is_view = false;
};

// A new tensor of `shape` with fresh, uninitialised storage. The building block of factories
// and op outputs. A shape check_shape refuses, or whose byte size overflows, throws naming `op`
// (a factory's name; an op's output shape follows from valid inputs and rarely fails here).
Tensor make_tensor(const Shape& shape, DType dtype, Device device, std::string_view op = "tensor");
// A tensor viewing `base`'s storage with the given geometry (no autograd).
Tensor make_view(const Tensor& base, const Shape& sizes, const Shape& strides, int64_t offset);

std::ostream& operator<<(std::ostream& out, const Tensor& tensor);

// --- inline definitions -----------------------------------------------------------------

template <class T>
T* Tensor::data_ptr() const {
  EMBER_CHECK(defined(), "data_ptr: tensor is undefined");
  EMBER_CHECK(dtype_of<T>() == impl_->dtype, "data_ptr: tensor has dtype {}, asked for {}", impl_->dtype,
              dtype_of<T>());
  // An empty storage has no buffer: no offset may be added to its null pointer (undefined
  // behaviour), and an empty tensor's elements are never read.
  T* const base = static_cast<T*>(impl_->storage->data());
  return base == nullptr ? nullptr : base + impl_->offset;
}

template <class T, class... Index>
T& Tensor::at(Index... index) const {
  EMBER_CHECK(is_cpu(), "at: tensor is on {}; move it to the CPU first", device());
  const int64_t indices[] = {static_cast<int64_t>(index)...};
  EMBER_CHECK(static_cast<int64_t>(sizeof...(Index)) == dim(), "at: got {} indices for a tensor of shape {}",
              sizeof...(Index), shape_str(sizes()));
  int64_t offset = 0;
  for (size_t d = 0; d < sizeof...(Index); ++d) {
    int64_t i = indices[d];
    const int64_t size = impl_->sizes[d];
    EMBER_CHECK(i >= -size && i < size, "at: index {} is out of range for dim {} of size {}", i, d, size);
    if (i < 0) i += size;
    offset += i * impl_->strides[d];
  }
  return data_ptr<T>()[offset];
}

}  // namespace ember
