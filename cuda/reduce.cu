// Reductions on the GPU over the [outer, reduce, inner] layout (see cuda/reduce_kernels.h).
//
// Two ways to cover the outputs:
//   - one block per output, its threads striding over r and combining through shared memory:
//     used when inner == 1 (each output is a contiguous row, so the block's reads coalesce) or
//     when there are too few outputs to fill the GPU otherwise (sum over a long leading dim);
//   - one thread per output, walking r alone: used for many outputs with inner > 1, where
//     neighbouring threads read neighbouring columns, which coalesces.
// Every reduction is written once, as a fold over r and a combine of partial states, and runs
// unchanged under both.
#include <cmath>
#include <type_traits>

#include "cuda/check.h"
#include "cuda/launch.h"
#include "cuda/reduce_kernels.h"

namespace ember::cuda {
namespace {

// Below this many outputs a block per output keeps the GPU busier than a thread per output.
constexpr int64_t kFewOutputs = 4096;

template <class T>
using Accumulator = std::conditional_t<std::is_same_v<T, float>, double, T>;

template <class T>
__device__ bool is_nan(T value) {
  if constexpr (std::is_floating_point_v<T>) return value != value;
  else return false;
}

// Combines one value per thread of the block; every thread gets the result. blockDim.x must be
// kThreadsPerBlock (a power of two).
template <class State, class Combine>
__device__ State block_reduce(State value, Combine combine) {
  __shared__ State shared[kThreadsPerBlock];
  const unsigned t = threadIdx.x;
  shared[t] = value;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (t < half) shared[t] = combine(shared[t], shared[t + half]);
    __syncthreads();
  }
  const State result = shared[0];
  __syncthreads();  // before shared is written again by the next call
  return result;
}

// Folds base[r * stride] for r in [0, n) into `init`: by the whole block when cooperative, else
// by this thread alone.
template <class State, class T, class Fold, class Combine>
__device__ State reduce_strip(const T* base, int64_t n, int64_t stride, bool cooperative, State init, Fold fold,
                              Combine combine) {
  State state = init;
  if (cooperative) {
    for (int64_t r = threadIdx.x; r < n; r += blockDim.x) state = fold(state, base[r * stride], r);
    return block_reduce(state, combine);
  }
  for (int64_t r = 0; r < n; ++r) state = fold(state, base[r * stride], r);
  return state;
}

template <class T>
__device__ Accumulator<T> sum_strip(const T* base, int64_t n, int64_t stride, bool cooperative) {
  using Acc = Accumulator<T>;
  return reduce_strip<Acc>(base, n, stride, cooperative, Acc(0),
                           [](Acc s, T v, int64_t) { return s + static_cast<Acc>(v); },
                           [](Acc a, Acc b) { return a + b; });
}

template <class T>
struct SumOp {
  const T* x;
  T* out;
  __device__ void run(int64_t output, const T* base, int64_t n, int64_t stride, bool cooperative, bool writer) const {
    const Accumulator<T> total = sum_strip(base, n, stride, cooperative);
    if (writer) out[output] = static_cast<T>(total);
  }
};

template <class T>
struct VarianceOp {
  using Acc = Accumulator<T>;
  const T* x;
  T* out;
  int64_t correction;
  __device__ void run(int64_t output, const T* base, int64_t n, int64_t stride, bool cooperative, bool writer) const {
    const Acc mean = sum_strip(base, n, stride, cooperative) / static_cast<Acc>(n);
    const Acc squares = reduce_strip<Acc>(base, n, stride, cooperative, Acc(0),
                                          [mean](Acc s, T v, int64_t) {
                                            const Acc deviation = static_cast<Acc>(v) - mean;
                                            return s + deviation * deviation;
                                          },
                                          [](Acc a, Acc b) { return a + b; });
    // As on the CPU and in PyTorch: N - correction <= 0 divides by 0 and gives NaN (or inf).
    const Acc divisor = static_cast<Acc>(n - correction > 0 ? n - correction : 0);
    if (writer) out[output] = static_cast<T>(squares / divisor);
  }
};

// The larger of two running maxima; once NaN, always NaN.
template <class T>
__device__ T nan_max(T a, T b) {
  if (is_nan(a)) return a;
  return (b > a || is_nan(b)) ? b : a;
}

template <class T>
struct LogSumExpOp {
  using Acc = Accumulator<T>;
  const T* x;
  T* out;
  __device__ void run(int64_t output, const T* base, int64_t n, int64_t stride, bool cooperative, bool writer) const {
    const T max = reduce_strip<T>(base, n, stride, cooperative, T(-INFINITY),
                                  [](T s, T v, int64_t) { return nan_max(s, v); },
                                  [](T a, T b) { return nan_max(a, b); });
    // An infinite max is not subtracted: a row of -inf then gives log(0) = -inf and a row
    // holding +inf gives +inf, instead of inf - inf = NaN. A NaN max makes the result NaN.
    const Acc shift = isinf(max) ? Acc(0) : static_cast<Acc>(max);
    const Acc total = reduce_strip<Acc>(base, n, stride, cooperative, Acc(0),
                                        [shift](Acc s, T v, int64_t) { return s + exp(static_cast<Acc>(v) - shift); },
                                        [](Acc a, Acc b) { return a + b; });
    if (writer) out[output] = static_cast<T>(shift + log(total));
  }
};

// A candidate extremum: its value and its position r (-1: none yet).
template <class T>
struct Best {
  T value;
  int64_t index;
};

template <class T, bool kMax>
struct ExtremumOp {
  const T* x;
  T* values;
  int64_t* indices;

  // The better of two candidates: NaN beats numbers, then the larger (smaller) value, then the
  // smaller position, so the result is the first occurrence whatever order threads combine in.
  __device__ static Best<T> better(Best<T> a, Best<T> b) {
    if (b.index < 0) return a;
    if (a.index < 0) return b;
    const bool a_nan = is_nan(a.value), b_nan = is_nan(b.value);
    if (a_nan || b_nan) {
      if (a_nan && b_nan) return a.index < b.index ? a : b;
      return a_nan ? a : b;
    }
    if (a.value == b.value) return a.index < b.index ? a : b;
    const bool a_wins = kMax ? a.value > b.value : a.value < b.value;
    return a_wins ? a : b;
  }

  __device__ void run(int64_t output, const T* base, int64_t n, int64_t stride, bool cooperative, bool writer) const {
    const Best<T> best = reduce_strip<Best<T>>(
        base, n, stride, cooperative, Best<T>{T(0), -1}, [](Best<T> s, T v, int64_t r) { return better(s, {v, r}); },
        [](Best<T> a, Best<T> b) { return better(a, b); });
    if (!writer) return;
    if (values != nullptr) values[output] = best.value;
    if (indices != nullptr) indices[output] = best.index;
  }
};

template <class Op>
__global__ void reduce_kernel(Op op, int64_t outer, int64_t reduce, int64_t inner, bool cooperative) {
  const int64_t outputs = outer * inner;
  if (cooperative) {
    // The whole block takes the same outputs, so block_reduce's barriers are reached by all.
    for (int64_t output = blockIdx.x; output < outputs; output += gridDim.x) {
      const int64_t o = output / inner, i = output % inner;
      op.run(output, op.x + o * reduce * inner + i, reduce, inner, true, threadIdx.x == 0);
    }
    return;
  }
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t output = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; output < outputs;
       output += step) {
    const int64_t o = output / inner, i = output % inner;
    op.run(output, op.x + o * reduce * inner + i, reduce, inner, false, true);
  }
}

template <class Op>
void launch_reduce(const char* name, Op op, int64_t outer, int64_t reduce, int64_t inner) {
  const int64_t outputs = outer * inner;
  if (outputs == 0) return;
  const bool cooperative = inner == 1 || outputs < kFewOutputs;
  const unsigned blocks = cooperative ? blocks_for(outputs, 1) : blocks_for(outputs);
  reduce_kernel<<<blocks, kThreadsPerBlock>>>(op, outer, reduce, inner, cooperative);
  check_launch(name);
}

}  // namespace

template <class T>
void launch_sum(const T* x, T* out, int64_t outer, int64_t reduce, int64_t inner) {
  launch_reduce("sum", SumOp<T>{x, out}, outer, reduce, inner);
}

template <class T>
void launch_variance(const T* x, T* out, int64_t outer, int64_t reduce, int64_t inner, int64_t correction) {
  launch_reduce("var", VarianceOp<T>{x, out, correction}, outer, reduce, inner);
}

template <class T>
void launch_logsumexp(const T* x, T* out, int64_t outer, int64_t reduce, int64_t inner) {
  launch_reduce("logsumexp", LogSumExpOp<T>{x, out}, outer, reduce, inner);
}

template <class T>
void launch_extremum(Extremum which, const T* x, T* values, int64_t* indices, int64_t outer, int64_t reduce,
                     int64_t inner) {
  if (which == Extremum::Max) launch_reduce("amax", ExtremumOp<T, true>{x, values, indices}, outer, reduce, inner);
  else launch_reduce("amin", ExtremumOp<T, false>{x, values, indices}, outer, reduce, inner);
}

template void launch_sum<float>(const float*, float*, int64_t, int64_t, int64_t);
template void launch_sum<double>(const double*, double*, int64_t, int64_t, int64_t);
template void launch_sum<int64_t>(const int64_t*, int64_t*, int64_t, int64_t, int64_t);
template void launch_variance<float>(const float*, float*, int64_t, int64_t, int64_t, int64_t);
template void launch_variance<double>(const double*, double*, int64_t, int64_t, int64_t, int64_t);
template void launch_logsumexp<float>(const float*, float*, int64_t, int64_t, int64_t);
template void launch_logsumexp<double>(const double*, double*, int64_t, int64_t, int64_t);
template void launch_extremum<float>(Extremum, const float*, float*, int64_t*, int64_t, int64_t, int64_t);
template void launch_extremum<double>(Extremum, const double*, double*, int64_t*, int64_t, int64_t, int64_t);
template void launch_extremum<int64_t>(Extremum, const int64_t*, int64_t*, int64_t*, int64_t, int64_t, int64_t);

}  // namespace ember::cuda
