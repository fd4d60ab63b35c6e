// dropout: inverted dropout whose mask comes from the counter-based Philox generator.
//
// The mask, which every device must reproduce exactly: for a draw with PhiloxState `state`
// over a tensor of numel elements in row-major order, element i is kept iff
//     uniform_float(random_word(state, i)) >= static_cast<float>(p)
// i.e. word i % 4 of philox4x32(state.seed, state.offset + i / 4), its top 24 bits as a float
// in [0, 1). A draw reserves ceil(numel / 4) counters. Kept elements are scaled by 1 / (1 - p).
//
// How the backward gets the mask:
// - On the CPU the forward keeps it as bits, one per element (a 32nd of a float32 input), and the
//   backward reads them: drawing the numbers again would cost the backward as much as the
//   forward's draw, and bits cost one pass over a small buffer.
// - On a GPU, where the draw is cheap beside memory traffic and a buffer would be one more
//   allocation per dropout, the backward draws the mask again from the saved PhiloxState, with
//   the forward's kernel.
// A device's kernels say which: those of the kernels::dropout_keeping_mask table keep bits.
#include "core/ops/dropout.h"

#include <cmath>

#include "core/autograd/record.h"
#include "core/cpu/half_rows.h"
#include "core/cpu/kernel_table.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/factory.h"
#include "core/parallel.h"

namespace ember {
namespace kernels {
constinit KernelTable<void(const Tensor& out, const Tensor& x, double p, PhiloxState state)> dropout{"dropout"};
constinit KernelTable<void(const Tensor& grad_x, const Tensor& grad_y, double p, PhiloxState state)>
    dropout_backward{"dropout_backward"};
constinit KernelTable<void(const Tensor& out, const Tensor& mask, const Tensor& x, double p, PhiloxState state)>
    dropout_keeping_mask{"dropout_keeping_mask"};
constinit KernelTable<void(const Tensor& grad_x, const Tensor& grad_y, const Tensor& mask, double p)>
    dropout_backward_from_mask{"dropout_backward_from_mask"};
}  // namespace kernels

namespace {

// The mask as bits: element i is bit i % 32 of 32-bit word i / 32 of an int64 tensor of
// ceil(numel / 64) elements (two words each).
int64_t mask_elements(int64_t numel) { return (numel + 63) / 64; }

// Elements a parallel part of the CPU kernels covers: 64 Philox counters, 8 words of bits.
constexpr int64_t kBlockElements = 256;

// out[i] = x[i] * scale where bit i of `bits` is set, else 0, for count elements: the CPU's
// forward (on the input) and backward (on the output's gradient). float32 (and 16-bit x, widened
// to float32 a block at a time and rounded once) goes through the instruction set's kernel;
// float64 through the same arithmetic written here.
template <class T>
void apply_keep_bits(const cpu::KernelTable& kernels, const T* x, const uint32_t* bits, int64_t count, double p,
                     T* out) {
  using C = compute_type<T>;
  const C scale = static_cast<C>(1.0 / (1.0 - p));
  if constexpr (std::is_same_v<T, float>) {
    kernels.apply_keep_bits(x, bits, count, scale, out);
  } else if constexpr (std::is_same_v<T, C>) {
    for (int64_t i = 0; i < count; ++i) out[i] = x[i] * (static_cast<C>((bits[i >> 5] >> (i & 31)) & 1u) * scale);
  } else {
    alignas(64) float values[kBlockElements];
    for (int64_t first = 0; first < count; first += kBlockElements) {
      const int64_t n = std::min(kBlockElements, count - first);
      cpu::widen_row(x + first, n, values);
      kernels.apply_keep_bits(values, bits + first / 32, n, scale, values);
      cpu::round_row(values, n, out + first);
    }
  }
}

// The forward on the CPU: draws the mask's bits into `mask`, a block of kBlockElements at a time,
// and applies them. x and out contiguous.
void dropout_keeping_mask_cpu(const Tensor& out, const Tensor& mask, const Tensor& x, double p, PhiloxState state) {
  // uniform_float(w) >= float(p) holds iff w >> 8 >= ceil(float(p) 2^24): the integer test the
  // vector kernels make (core/cpu/kernels/dropout_bits.h).
  const auto threshold = static_cast<uint32_t>(std::ceil(static_cast<double>(static_cast<float>(p)) * 16777216.0));
  const cpu::KernelTable& kernels = cpu::kernels();  // resolved outside the parallel region
  auto* const bits = static_cast<uint32_t*>(mask.raw_data());
  visit_any_floating(x.dtype(), "dropout", [&]<class T>() {
    const T* in = x.data_ptr<T>();
    T* result = out.data_ptr<T>();
    const int64_t numel = x.numel(), counters = (numel + 3) / 4;
    const int64_t blocks = (numel + kBlockElements - 1) / kBlockElements;
    parallel_for(blocks, kBlockElements, [&](int64_t begin, int64_t end) {
      for (int64_t block = begin; block < end; ++block) {
        const int64_t first = block * kBlockElements, first_counter = first / 4;
        const int64_t block_counters = (std::min(kBlockElements / 4, counters - first_counter) + 7) / 8 * 8;
        kernels.dropout_keep_bits(state.seed, state.offset + static_cast<uint64_t>(first_counter), block_counters,
                                  threshold, bits + first / 32);
        apply_keep_bits(kernels, in + first, bits + first / 32, std::min(kBlockElements, numel - first), p,
                        result + first);
      }
    });
  });
}
EMBER_REGISTER_KERNEL(kernels::dropout_keeping_mask, DeviceType::CPU, dropout_keeping_mask_cpu);

// The backward on the CPU: the gradient times the forward's mask bits and scale.
void dropout_backward_from_mask_cpu(const Tensor& grad_x, const Tensor& grad_y, const Tensor& mask, double p) {
  const cpu::KernelTable& kernels = cpu::kernels();
  const auto* const bits = static_cast<const uint32_t*>(mask.raw_data());
  visit_any_floating(grad_y.dtype(), "dropout_backward", [&]<class T>() {
    const T* in = grad_y.data_ptr<T>();
    T* result = grad_x.data_ptr<T>();
    const int64_t numel = grad_y.numel(), blocks = (numel + kBlockElements - 1) / kBlockElements;
    parallel_for(blocks, kBlockElements / 4, [&](int64_t begin, int64_t end) {
      const int64_t first = begin * kBlockElements, last = std::min(end * kBlockElements, numel);
      apply_keep_bits(kernels, in + first, bits + first / 32, last - first, p, result + first);
    });
  });
}
EMBER_REGISTER_KERNEL(kernels::dropout_backward_from_mask, DeviceType::CPU, dropout_backward_from_mask_cpu);

// The backward of dropout from the forward's PhiloxState: the gradient times the mask drawn
// again. Linear, so this op is its own backward: a backward op with a backward, which records
// only under create_graph and gives dropout derivatives of every order.
Tensor dropout_backward(const Tensor& grad, double p, const PhiloxState& state) {
  const Tensor grad_y = contiguous(grad);
  Tensor grad_x = make_tensor(grad_y.sizes(), grad_y.dtype(), grad_y.device());
  if (grad_x.numel() > 0) kernels::dropout_backward[grad_y.device()](grad_x, grad_y, p, state);
  return autograd::record("dropout_backward", grad_x, {grad}, [p, state](const Tensor& grad_grad) {
    return autograd::grads(dropout_backward(grad_grad, p, state));
  });
}

// The same from the forward's mask bits; its own backward likewise.
Tensor dropout_backward_from_mask(const Tensor& grad, const Tensor& mask, double p) {
  const Tensor grad_y = contiguous(grad);
  EMBER_CHECK(grad_y.device() == mask.device() && mask.numel() == mask_elements(grad_y.numel()),
              "dropout_backward: a gradient of {} elements on {} for a mask of {} on {}", grad_y.numel(),
              grad_y.device().str(), mask.numel(), mask.device().str());
  Tensor grad_x = make_tensor(grad_y.sizes(), grad_y.dtype(), grad_y.device());
  if (grad_x.numel() > 0) kernels::dropout_backward_from_mask[grad_y.device()](grad_x, grad_y, mask, p);
  return autograd::record("dropout_backward", grad_x, {grad}, [mask, p](const Tensor& grad_grad) {
    return autograd::grads(dropout_backward_from_mask(grad_grad, mask, p));
  });
}

}  // namespace

Tensor dropout_with_state(const Tensor& x, double p, const PhiloxState& state) {
  const Tensor input = contiguous(x);
  Tensor out = make_tensor(x.sizes(), x.dtype(), x.device());
  if (kernels::dropout_keeping_mask.has(x.device())) {
    const Tensor mask = make_tensor({mask_elements(x.numel())}, kInt64, x.device());
    if (out.numel() > 0) kernels::dropout_keeping_mask[x.device()](out, mask, input, p, state);
    return autograd::record("dropout", out, {x}, [mask, p](const Tensor& grad) {
      return autograd::grads(dropout_backward_from_mask(grad, mask, p));
    });
  }
  if (out.numel() > 0) kernels::dropout[x.device()](out, input, p, state);
  return autograd::record("dropout", out, {x},
                          [p, state](const Tensor& grad) { return autograd::grads(dropout_backward(grad, p, state)); });
}

Tensor dropout(const Tensor& x, double p, bool train) {
  EMBER_CHECK(x.defined(), "dropout: input is undefined");
  EMBER_CHECK(p >= 0.0 && p <= 1.0, "dropout: probability p must be in [0, 1], got {}", p);
  EMBER_CHECK(is_floating_point(x.dtype()), "dropout: expected a floating point input, got {}", x.dtype());
  if (!train || p == 0.0) return x;
  if (p == 1.0) {
    // Everything is dropped: zeros, and a zero gradient (a product with 0, so that under
    // create_graph it is a zero with a history, as the gradient of a linear op must be).
    Tensor out = zeros(x.sizes(), x.options());
    return autograd::record("dropout", out, {x}, [](const Tensor& grad) { return autograd::grads(mul(grad, 0.0)); });
  }
  const PhiloxState state = Generator::global().reserve((static_cast<uint64_t>(x.numel()) + 3) / 4,
                                                         x.device().is_cuda() ? DrawOn::kGPU : DrawOn::kCPU);
  return dropout_with_state(x, p, state);
}

}  // namespace ember
