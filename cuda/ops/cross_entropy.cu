// cross_entropy on CUDA, the same fused computation as core/ops/cross_entropy.cpp: the forward
// gives each row to one block (block max, then block sum of exp(x - max), and the plain sum of
// the logits for label smoothing); the backward needs no reduction, since the row's max and
// log_sum are saved, so it is one elementwise pass over the logits. bfloat16 and float16 logits
// are read as float: the losses and the row statistics (float32 for them, as on the CPU) are
// computed in float32, and each gradient is rounded once where it is stored.
#include <cmath>

#include "cuda/common/block_reduce.cuh"
#include "cuda/runtime/check.h"
#include "cuda/ops/cross_entropy_kernels.h"
#include "cuda/common/half_elements.h"
#include "cuda/runtime/launch.h"
#include "cuda/runtime/stream.h"

namespace ember::cuda {
namespace {

// loss = (1 - eps) * (lse - x[target]) + eps * (lse - mean_c x[c]), lse = max + log_sum, with
// max subtracted from x first as on the CPU. Ignored rows get loss 0, and so do rows whose
// target is out of range (the range check reports those at the next synchronisation).
template <class T, class C = compute_t<T>>
__global__ void cross_entropy_rows(const T* logits, const int64_t* targets, C* losses, C* row_max, C* log_sum,
                                   int64_t rows, int64_t classes, int64_t ignore_index, C smoothing) {
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* x = logits + row * classes;
    C max = -std::numeric_limits<C>::infinity(), total = 0;
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
      max = MaxOp<C>{}(max, to_compute(x[c]));
      total += to_compute(x[c]);
    }
    max = block_max(max);
    if (smoothing != C(0)) total = block_sum(total);
    C sum = 0;
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) sum += exp(to_compute(x[c]) - max);
    const C log_of_sum = log(block_sum(sum));
    if (threadIdx.x == 0) {
      row_max[row] = max;
      log_sum[row] = log_of_sum;
      const int64_t target = targets[row];
      const bool skipped = target == ignore_index || target < 0 || target >= classes;
      const C nll = skipped ? C(0) : (max - to_compute(x[target])) + log_of_sum;
      const C smooth = (max - total / static_cast<C>(classes)) + log_of_sum;
      losses[row] = skipped ? C(0)
                    : smoothing == C(0)    ? nll
                                           : (C(1) - smoothing) * nll + smoothing * smooth;
    }
  }
}

// grad = (softmax - (1 - eps) * onehot(target) - eps / C) * row_scale, 0 on ignored rows.
template <class T, class C = compute_t<T>>
__global__ void cross_entropy_backward_elements(const T* logits, const int64_t* targets, const C* row_max,
                                                const C* log_sum, const C* row_scale, T* grad_logits, int64_t rows,
                                                int64_t classes, int64_t ignore_index, C smoothing) {
  const C uniform = smoothing / static_cast<C>(classes), target_weight = C(1) - smoothing;
  const int64_t total = rows * classes;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = i / classes, c = i % classes;
    const int64_t target = targets[row];
    if (target == ignore_index) {
      grad_logits[i] = round_to<T>(0);
      continue;
    }
    const C s = row_scale[row];
    C g = (exp((to_compute(logits[i]) - row_max[row]) - log_sum[row]) - uniform) * s;
    if (c == target) g -= target_weight * s;
    grad_logits[i] = round_to<T>(g);
  }
}

}  // namespace

template <class T>
void launch_cross_entropy_forward(const T* logits, const int64_t* targets, compute_t<T>* losses,
                                  compute_t<T>* row_max, compute_t<T>* log_sum, int64_t rows, int64_t classes,
                                  int64_t ignore_index, double label_smoothing) {
  cross_entropy_rows<<<blocks_for(rows * kRowThreads, kRowThreads), kRowThreads, 0, current_stream()>>>(
      logits, targets, losses, row_max, log_sum, rows, classes, ignore_index,
      static_cast<compute_t<T>>(label_smoothing));
  check_launch("cross_entropy");
}

template <class T>
void launch_cross_entropy_backward(const T* logits, const int64_t* targets, const compute_t<T>* row_max,
                                   const compute_t<T>* log_sum, const compute_t<T>* row_scale, T* grad_logits,
                                   int64_t rows, int64_t classes, int64_t ignore_index, double label_smoothing) {
  cross_entropy_backward_elements<<<blocks_for(rows * classes), kThreadsPerBlock, 0, current_stream()>>>(
      logits, targets, row_max, log_sum, row_scale, grad_logits, rows, classes, ignore_index,
      static_cast<compute_t<T>>(label_smoothing));
  check_launch("cross_entropy backward");
}

#define EMBER_INSTANTIATE(T)                                                                               \
  template void launch_cross_entropy_forward<T>(const T*, const int64_t*, compute_t<T>*, compute_t<T>*,     \
                                                compute_t<T>*, int64_t, int64_t, int64_t, double);          \
  template void launch_cross_entropy_backward<T>(const T*, const int64_t*, const compute_t<T>*,             \
                                                 const compute_t<T>*, const compute_t<T>*, T*, int64_t,     \
                                                 int64_t, int64_t, double);
EMBER_FOR_EACH_FLOATING_ELEMENT(EMBER_INSTANTIATE)
#undef EMBER_INSTANTIATE

}  // namespace ember::cuda
