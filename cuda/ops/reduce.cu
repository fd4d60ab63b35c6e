// Reductions on the GPU over the [outer, reduce, inner] layout (see cuda/ops/reduce_kernels.h).
//
// Three ways to cover the outputs:
//   - one block per output, its threads striding over r and combining through shared memory:
//     used when inner == 1 (each output is a contiguous row, so the block's reads coalesce) or
//     when there are too few outputs to fill the GPU otherwise (sum over a long leading dim);
//   - one thread per output, walking r alone: used for many outputs with inner > 1, where
//     neighbouring threads read neighbouring columns, which coalesces;
//   - several blocks per output (a split reduction): used when the outputs are so few, and each
//     so long, that a block per output would leave most of the GPU idle (the sum of a whole
//     tensor, one norm per parameter). Each block folds one slice of an output's range into a
//     partial state in scratch memory; a second kernel combines each output's partials.
// Every reduction is written as passes over r, each a fold of elements into a state and a
// combine of two states (var: the mean, then the squared deviations from it; logsumexp: the max,
// then the exps shifted by it), and runs unchanged under all three.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "cuda/runtime/check.h"
#include "cuda/common/column_sums.cuh"
#include "cuda/common/half_elements.h"
#include "cuda/runtime/launch.h"
#include "cuda/ops/reduce_kernels.h"
#include "cuda/runtime/stream.h"

namespace ember::cuda {
namespace {

// Below this many outputs a block per output keeps the GPU busier than a thread per output.
constexpr int64_t kFewOutputs = 4096;

// The split rule. A split reduction aims at this many blocks in all: an H100 holds 132 SMs * 8
// resident blocks of 256 threads = 1056 blocks, so this is about two full waves, enough to keep
// every SM streaming memory while the last blocks finish. Each block still reduces at least
// kMinSplitLength elements (16 per thread), so the partial states it writes and the combine
// kernel that reads them cost little next to the input it reads.
constexpr int64_t kSplitBlocks = 2048;
constexpr int64_t kMinSplitLength = 4096;
// Scratch per partial state: the largest state is a (value, index) pair of 8-byte members.
constexpr int64_t kMaxStateBytes = 16;
// Scratch per output for the value a two-pass reduction's first pass leaves (a double).
constexpr int64_t kPerOutputBytes = 8;

// How many blocks share each output's range: as many as reach kSplitBlocks in all, no more than
// keeps kMinSplitLength elements per block. 1: no split (many outputs already fill the GPU, or
// the ranges are too short to be worth a second kernel).
int64_t splits_for(int64_t outputs, int64_t reduce) {
  if (outputs == 0 || outputs >= kSplitBlocks) return 1;
  const int64_t wanted = (kSplitBlocks + outputs - 1) / outputs;
  return std::max<int64_t>(1, std::min(wanted, reduce / kMinSplitLength));
}

// Sums accumulate in double for float32 and the 16-bit formats, as on the CPU. Elements are read
// as their compute type (float for the 16-bit formats) and results rounded once on store.
template <class T>
using Accumulator = std::conditional_t<std::is_same_v<compute_t<T>, float>, double, T>;

template <class T>
__device__ bool is_nan(T value) {
  if constexpr (std::is_floating_point_v<T>) return value != value;
  else return false;
}

// Combines one state per thread of the block with Pass::combine; every thread gets the result.
// blockDim.x must be kThreadsPerBlock (a power of two).
template <class Pass>
__device__ typename Pass::State block_reduce(typename Pass::State value) {
  using State = typename Pass::State;
  __shared__ State shared[kThreadsPerBlock];
  const unsigned t = threadIdx.x;
  shared[t] = value;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (t < half) shared[t] = Pass::combine(shared[t], shared[t + half]);
    __syncthreads();
  }
  const State result = shared[0];
  __syncthreads();  // before shared is written again by the next call
  return result;
}

// Folds base[r * stride] for r in [begin, end) with `pass`: by the whole block when cooperative,
// else by this thread alone.
template <class Pass, class T>
__device__ typename Pass::State reduce_strip(const Pass& pass, const T* base, int64_t begin, int64_t end,
                                             int64_t stride, bool cooperative) {
  typename Pass::State state = Pass::identity();
  if (cooperative) {
    for (int64_t r = begin + threadIdx.x; r < end; r += blockDim.x) state = pass.fold(state, base[r * stride], r);
    return block_reduce<Pass>(state);
  }
  for (int64_t r = begin; r < end; ++r) state = pass.fold(state, base[r * stride], r);
  return state;
}

// --- the passes ---------------------------------------------------------------------------------

template <class T>
struct SumPass {
  using State = Accumulator<T>;
  __device__ static State identity() { return State(0); }
  __device__ State fold(State s, T v, int64_t) const { return s + static_cast<State>(to_compute(v)); }
  __device__ static State combine(State a, State b) { return a + b; }
};

// var's second pass: the sum of squared deviations from the mean the first pass found.
template <class T>
struct SquaredDeviationPass {
  using State = Accumulator<T>;
  State mean;
  __device__ static State identity() { return State(0); }
  __device__ State fold(State s, T v, int64_t) const {
    const State deviation = static_cast<State>(to_compute(v)) - mean;
    return s + deviation * deviation;
  }
  __device__ static State combine(State a, State b) { return a + b; }
};

// The larger of two running maxima; once NaN, always NaN.
template <class T>
__device__ T nan_max(T a, T b) {
  if (is_nan(a)) return a;
  return (b > a || is_nan(b)) ? b : a;
}

// logsumexp's first pass. T: float, double, __nv_bfloat16, __half.
template <class T>
struct MaxPass {
  using State = compute_t<T>;
  __device__ static State identity() { return State(-INFINITY); }
  __device__ State fold(State s, T v, int64_t) const { return nan_max(s, to_compute(v)); }
  __device__ static State combine(State a, State b) { return nan_max(a, b); }
};

// logsumexp's second pass: the sum of exp(x - shift), shift from the max the first pass found.
template <class T>
struct ShiftedExpPass {
  using State = Accumulator<T>;
  State shift;
  __device__ static State identity() { return State(0); }
  __device__ State fold(State s, T v, int64_t) const { return s + exp(static_cast<State>(to_compute(v)) - shift); }
  __device__ static State combine(State a, State b) { return a + b; }
};

// A candidate extremum: its value and its position r (-1: none yet).
template <class T>
struct Best {
  T value;
  int64_t index;
};

// Candidates hold the compute type (a 16-bit element widened exactly), stored back rounded (exactly).
template <class T, bool kMax>
struct ExtremumPass {
  using State = Best<compute_t<T>>;
  __device__ static State identity() { return {compute_t<T>(0), -1}; }
  __device__ State fold(State s, T v, int64_t r) const { return combine(s, {to_compute(v), r}); }
  // The better of two candidates: NaN beats numbers, then the larger (smaller) value, then the
  // smaller position, so the result is the first occurrence whatever order threads and blocks
  // combine in.
  __device__ static State combine(State a, State b) {
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
};

// As on the CPU and in PyTorch: N - correction <= 0 divides by 0 and gives NaN (or inf).
template <class T>
__host__ __device__ Accumulator<T> variance_divisor(int64_t n, int64_t correction) {
  return static_cast<Accumulator<T>>(n - correction > 0 ? n - correction : 0);
}

// An infinite max is not subtracted: a row of -inf then gives log(0) = -inf and a row holding
// +inf gives +inf, instead of inf - inf = NaN. A NaN max makes the result NaN.
template <class T>
__device__ Accumulator<T> logsumexp_shift(compute_t<T> max) {
  return isinf(max) ? Accumulator<T>(0) : static_cast<Accumulator<T>>(max);
}

// --- what is written once an output's state is complete ------------------------------------------

template <class T>
struct StoreSum {
  T* out;
  __device__ void operator()(int64_t output, Accumulator<T> total) const { out[output] = round_to<T>(total); }
};

template <class T>
struct StoreExtremum {
  T* values;
  int64_t* indices;
  __device__ void operator()(int64_t output, Best<compute_t<T>> best) const {
    if (values != nullptr) values[output] = round_to<T>(best.value);
    if (indices != nullptr) indices[output] = best.index;
  }
};

// The split var's and logsumexp's first passes keep one value per output for the second pass.
template <class T>
struct StoreMean {
  Accumulator<T>* means;
  int64_t n;
  __device__ void operator()(int64_t output, Accumulator<T> total) const {
    means[output] = total / static_cast<Accumulator<T>>(n);
  }
};

template <class T>
struct StoreVariance {
  T* out;
  Accumulator<T> divisor;
  __device__ void operator()(int64_t output, Accumulator<T> squares) const {
    out[output] = round_to<T>(squares / divisor);
  }
};

template <class T>
struct StoreShift {
  Accumulator<T>* shifts;
  __device__ void operator()(int64_t output, compute_t<T> max) const { shifts[output] = logsumexp_shift<T>(max); }
};

template <class T>
struct StoreLogSumExp {
  const Accumulator<T>* shifts;
  T* out;
  __device__ void operator()(int64_t output, Accumulator<T> total) const {
    out[output] = round_to<T>(shifts[output] + log(total));
  }
};

// --- a block or a thread per output ----------------------------------------------------------------

// sum, amax/amin, argmax/argmin: one pass, then the result is stored.
template <class T, class Pass, class Store>
struct OnePassOp {
  const T* x;
  Store store;
  __device__ void run(int64_t output, const T* base, int64_t n, int64_t stride, bool cooperative, bool writer) const {
    const typename Pass::State state = reduce_strip(Pass{}, base, 0, n, stride, cooperative);
    if (writer) store(output, state);
  }
};

template <class T>
struct VarianceOp {
  using Acc = Accumulator<T>;
  const T* x;
  T* out;
  int64_t correction;
  __device__ void run(int64_t output, const T* base, int64_t n, int64_t stride, bool cooperative, bool writer) const {
    const Acc mean = reduce_strip(SumPass<T>{}, base, 0, n, stride, cooperative) / static_cast<Acc>(n);
    const Acc squares = reduce_strip(SquaredDeviationPass<T>{mean}, base, 0, n, stride, cooperative);
    if (writer) out[output] = round_to<T>(squares / variance_divisor<T>(n, correction));
  }
};

template <class T>
struct LogSumExpOp {
  using Acc = Accumulator<T>;
  const T* x;
  T* out;
  __device__ void run(int64_t output, const T* base, int64_t n, int64_t stride, bool cooperative, bool writer) const {
    const Acc shift = logsumexp_shift<T>(reduce_strip(MaxPass<T>{}, base, 0, n, stride, cooperative));
    const Acc total = reduce_strip(ShiftedExpPass<T>{shift}, base, 0, n, stride, cooperative);
    if (writer) out[output] = round_to<T>(shift + log(total));
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
  reduce_kernel<<<blocks, kThreadsPerBlock, 0, current_stream()>>>(op, outer, reduce, inner, cooperative);
  check_launch(name);
}

// --- several blocks per output ---------------------------------------------------------------------

// The geometry of a split reduction and its scratch: outputs * splits partial states (output-major),
// then one value per output that a first pass leaves for a second.
struct Split {
  int64_t outputs, reduce, inner;
  int64_t splits;  // blocks per output
  int64_t slice;   // elements of r per block, the last block's slice may be shorter
  void* scratch;   // reduce_scratch_bytes(...) bytes

  template <class State>
  State* partials() const {
    return static_cast<State*>(scratch);
  }
  template <class Value>
  Value* per_output() const {
    static_assert(sizeof(Value) == kPerOutputBytes);
    return reinterpret_cast<Value*>(static_cast<char*>(scratch) + outputs * splits * kMaxStateBytes);
  }
};

Split split_of(int64_t outer, int64_t reduce, int64_t inner, void* scratch) {
  const int64_t outputs = outer * inner, splits = splits_for(outputs, reduce);
  return {outputs, reduce, inner, splits, (reduce + splits - 1) / splits, scratch};
}

// Each output's pass: the same for all, or (Centered) built around the value a first pass left
// per output in scratch (var's mean, logsumexp's shift).
template <class P>
struct SamePass {
  using Pass = P;
  __device__ P operator()(int64_t) const { return P{}; }
};
template <class P>
struct CenteredPass {
  using Pass = P;
  const typename P::State* centers;
  __device__ P operator()(int64_t output) const { return P{centers[output]}; }
};

// Block b folds slice b % splits of output b / splits into partials[b]. A slice past the end of
// r (when splits does not divide reduce evenly) folds nothing and leaves the identity.
template <class T, class PassOf>
__global__ void partial_kernel(PassOf pass_of, const T* x, Split split, typename PassOf::Pass::State* partials) {
  const int64_t blocks = split.outputs * split.splits;
  for (int64_t block = blockIdx.x; block < blocks; block += gridDim.x) {
    const int64_t output = block / split.splits, part = block % split.splits;
    const int64_t o = output / split.inner, i = output % split.inner;
    const int64_t begin = part * split.slice;
    const int64_t end = begin + split.slice < split.reduce ? begin + split.slice : split.reduce;
    const auto state = reduce_strip(pass_of(output), x + o * split.reduce * split.inner + i, begin, end, split.inner,
                                    true);
    if (threadIdx.x == 0) partials[block] = state;
  }
}

// One block per output combines its splits partial states and stores the result.
template <class Pass, class Store>
__global__ void combine_kernel(const typename Pass::State* partials, int64_t outputs, int64_t splits, Store store) {
  for (int64_t output = blockIdx.x; output < outputs; output += gridDim.x) {
    typename Pass::State state = Pass::identity();
    for (int64_t part = threadIdx.x; part < splits; part += blockDim.x)
      state = Pass::combine(state, partials[output * splits + part]);
    state = block_reduce<Pass>(state);
    if (threadIdx.x == 0) store(output, state);
  }
}

// One pass of a split reduction: partial states, then their combination per output into `store`.
template <class T, class PassOf, class Store>
void split_pass(const char* name, const Split& split, const T* x, PassOf pass_of, Store store) {
  using Pass = typename PassOf::Pass;
  static_assert(sizeof(typename Pass::State) <= kMaxStateBytes);
  auto* partials = split.partials<typename Pass::State>();
  partial_kernel<<<blocks_for(split.outputs * split.splits, 1), kThreadsPerBlock, 0, current_stream()>>>(
      pass_of, x, split, partials);
  check_launch(name);
  combine_kernel<Pass><<<blocks_for(split.outputs, 1), kThreadsPerBlock, 0, current_stream()>>>(
      partials, split.outputs, split.splits, store);
  check_launch(name);
}

template <class T, bool kMax>
void launch_extremum_of(const char* name, const T* x, T* values, int64_t* indices, int64_t outer, int64_t reduce,
                        int64_t inner, void* scratch) {
  using Pass = ExtremumPass<T, kMax>;
  const StoreExtremum<T> store{values, indices};
  const Split split = split_of(outer, reduce, inner, scratch);
  if (split.splits > 1) split_pass(name, split, x, SamePass<Pass>{}, store);
  else launch_reduce(name, OnePassOp<T, Pass, StoreExtremum<T>>{x, store}, outer, reduce, inner);
}

}  // namespace

int64_t reduce_scratch_bytes(int64_t outer, int64_t reduce, int64_t inner) {
  const int64_t outputs = outer * inner, splits = splits_for(outputs, reduce);
  return splits > 1 ? outputs * (splits * kMaxStateBytes + kPerOutputBytes) : 0;
}

template <class T>
void launch_sum(const T* x, T* out, int64_t outer, int64_t reduce, int64_t inner, void* scratch) {
  const Split split = split_of(outer, reduce, inner, scratch);
  if (split.splits > 1) split_pass("sum", split, x, SamePass<SumPass<T>>{}, StoreSum<T>{out});
  else launch_reduce("sum", OnePassOp<T, SumPass<T>, StoreSum<T>>{x, {out}}, outer, reduce, inner);
}

namespace {

// Element (row, column) of a [rows, columns] matrix, widened to the compute type, as a double term.
template <class T>
struct ColumnElement {
  const T* x;
  int64_t columns;
  __device__ void operator()(int64_t row, int64_t column, double (&terms)[1]) const {
    terms[0] = static_cast<double>(to_compute(x[row * columns + column]));
  }
};

template <class T>
struct StoreColumnSum {
  T* out;
  __device__ void operator()(int64_t column, const double (&totals)[1]) const { out[column] = round_to<T>(totals[0]); }
};

}  // namespace

template <class T>
void launch_column_sum(const T* x, T* out, int64_t rows, int64_t columns, double* scratch) {
  launch_column_sums<1>("sum", plan_column_sums(rows, columns), ColumnElement<T>{x, columns}, StoreColumnSum<T>{out},
                        scratch);
}

template <class T>
void launch_variance(const T* x, T* out, int64_t outer, int64_t reduce, int64_t inner, int64_t correction,
                     void* scratch) {
  const Split split = split_of(outer, reduce, inner, scratch);
  if (split.splits == 1) {
    launch_reduce("var", VarianceOp<T>{x, out, correction}, outer, reduce, inner);
    return;
  }
  // The same two passes as VarianceOp, the mean kept in scratch between them.
  auto* means = split.per_output<Accumulator<T>>();
  split_pass("var", split, x, SamePass<SumPass<T>>{}, StoreMean<T>{means, reduce});
  split_pass("var", split, x, CenteredPass<SquaredDeviationPass<T>>{means},
             StoreVariance<T>{out, variance_divisor<T>(reduce, correction)});
}

template <class T>
void launch_logsumexp(const T* x, T* out, int64_t outer, int64_t reduce, int64_t inner, void* scratch) {
  const Split split = split_of(outer, reduce, inner, scratch);
  if (split.splits == 1) {
    launch_reduce("logsumexp", LogSumExpOp<T>{x, out}, outer, reduce, inner);
    return;
  }
  // The same two passes as LogSumExpOp, the shift kept in scratch between them.
  auto* shifts = split.per_output<Accumulator<T>>();
  split_pass("logsumexp", split, x, SamePass<MaxPass<T>>{}, StoreShift<T>{shifts});
  split_pass("logsumexp", split, x, CenteredPass<ShiftedExpPass<T>>{shifts}, StoreLogSumExp<T>{shifts, out});
}

template <class T>
void launch_extremum(Extremum which, const T* x, T* values, int64_t* indices, int64_t outer, int64_t reduce,
                     int64_t inner, void* scratch) {
  if (which == Extremum::Max) launch_extremum_of<T, true>("amax", x, values, indices, outer, reduce, inner, scratch);
  else launch_extremum_of<T, false>("amin", x, values, indices, outer, reduce, inner, scratch);
}

#define EMBER_INSTANTIATE_FLOATING(T)                                                                        \
  template void launch_sum<T>(const T*, T*, int64_t, int64_t, int64_t, void*);                              \
  template void launch_column_sum<T>(const T*, T*, int64_t, int64_t, double*);                              \
  template void launch_variance<T>(const T*, T*, int64_t, int64_t, int64_t, int64_t, void*);                \
  template void launch_logsumexp<T>(const T*, T*, int64_t, int64_t, int64_t, void*);                        \
  template void launch_extremum<T>(Extremum, const T*, T*, int64_t*, int64_t, int64_t, int64_t, void*);
EMBER_INSTANTIATE_FLOATING(float)
EMBER_INSTANTIATE_FLOATING(double)
EMBER_INSTANTIATE_FLOATING(__nv_bfloat16)
EMBER_INSTANTIATE_FLOATING(__half)
#undef EMBER_INSTANTIATE_FLOATING
template void launch_sum<int64_t>(const int64_t*, int64_t*, int64_t, int64_t, int64_t, void*);
template void launch_extremum<int64_t>(Extremum, const int64_t*, int64_t*, int64_t*, int64_t, int64_t, int64_t,
                                       void*);

}  // namespace ember::cuda
