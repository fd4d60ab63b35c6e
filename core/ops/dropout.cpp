// dropout: inverted dropout whose mask comes from the counter-based Philox generator.
//
// The mask, which every device must reproduce exactly: for a draw with PhiloxState `state`
// over a tensor of numel elements in row-major order, element i is kept iff
//     uniform_float(random_word(state, i)) >= static_cast<float>(p)
// i.e. word i % 4 of philox4x32(state.seed, state.offset + i / 4), its top 24 bits as a float
// in [0, 1). A draw reserves ceil(numel / 4) counters. Kept elements are scaled by 1 / (1 - p).
//
// The backward regenerates the mask from the saved PhiloxState instead of saving it: the mask
// would cost a tensor as large as the input for every dropout in the model, held until
// backward, while recomputing it costs a few integer operations per element in a pass that is
// memory-bound anyway. It also means forward and backward share one kernel.
#include "core/ops/dropout.h"

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
}  // namespace kernels

namespace {

// out[i] = keep(i) ? x[i] / (1 - p) : 0, with x and out contiguous. Forward and backward
// both run it (on the input, then on the output's gradient). 16-bit x is scaled in float32 and
// rounded once; the mask depends only on the draw, so it is the same for every dtype.
void apply_dropout_mask_cpu(const Tensor& out, const Tensor& x, double p, PhiloxState state) {
  visit_any_floating(x.dtype(), "dropout", [&]<class T>() {
    using C = compute_type<T>;
    const T* in = x.data_ptr<T>();
    T* result = out.data_ptr<T>();
    const int64_t numel = x.numel();
    const float threshold = static_cast<float>(p);
    const C scale = static_cast<C>(1.0 / (1.0 - p));
    const int64_t counters = (numel + 3) / 4;
    // Blocks of kBlock counters (4 * kBlock elements): Philox runs across the block's counters
    // in vector lanes, then the mask is applied to the block's elements in order.
    constexpr int kBlock = 64;
    const int64_t blocks = (counters + kBlock - 1) / kBlock;
    // The instruction set's Philox (core/cpu/isa.h), resolved outside the parallel region.
    const auto philox = cpu::kernels().philox4x32_counters;
    parallel_for(blocks, 4, [&](int64_t begin, int64_t end) {
      const C keep_scale = scale;  // a local: the compiler may not re-read it from the closure
      alignas(64) uint32_t words[4 * kBlock];
      for (int64_t block = begin; block < end; ++block) {
        const int64_t first_counter = block * kBlock;
        philox(state.seed, state.offset + static_cast<uint64_t>(first_counter), kBlock, words);
        const int64_t first = first_counter * 4;
        const int64_t count = std::min<int64_t>(4 * kBlock, numel - first);
        // Branch-free (times scale or times 0), so that the loop vectorises. A 16-bit block is
        // widened into float32 first and rounded back after, a row at a time (cpu/half_rows.h).
        const T* block_in = in + first;
        T* block_out = result + first;
        if constexpr (std::is_same_v<T, C>) {
          for (int64_t i = 0; i < count; ++i) {
            block_out[i] = block_in[i] * (static_cast<C>(uniform_float(words[i]) >= threshold) * keep_scale);
          }
        } else {
          alignas(64) float values[4 * kBlock];
          cpu::widen_row(block_in, count, values);
          for (int64_t i = 0; i < count; ++i) {
            values[i] *= static_cast<C>(uniform_float(words[i]) >= threshold) * keep_scale;
          }
          cpu::round_row(values, count, block_out);
        }
      }
    });
  });
}
EMBER_REGISTER_KERNEL(kernels::dropout, DeviceType::CPU, apply_dropout_mask_cpu);
EMBER_REGISTER_KERNEL(kernels::dropout_backward, DeviceType::CPU, apply_dropout_mask_cpu);

}  // namespace

namespace {

// The backward of dropout: the gradient times the forward's mask (regenerated from its state).
// Linear, so this op is its own backward: a backward op with a backward, which records only
// under create_graph and gives dropout derivatives of every order.
Tensor dropout_backward(const Tensor& grad, double p, const PhiloxState& state) {
  const Tensor grad_y = contiguous(grad);
  Tensor grad_x = make_tensor(grad_y.sizes(), grad_y.dtype(), grad_y.device());
  if (grad_x.numel() > 0) kernels::dropout_backward[grad_y.device()](grad_x, grad_y, p, state);
  return autograd::record("dropout_backward", grad_x, {grad}, [p, state](const Tensor& grad_grad) {
    return autograd::grads(dropout_backward(grad_grad, p, state));
  });
}

}  // namespace

Tensor dropout_with_state(const Tensor& x, double p, const PhiloxState& state) {
  const Tensor input = contiguous(x);
  Tensor out = make_tensor(x.sizes(), x.dtype(), x.device());
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
