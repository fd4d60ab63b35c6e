// The CPU elementwise loop every copy, conversion, unary, binary and in-place op runs on.
//
// for_each_element<Out, In...>(out, {inputs...}, f) sets out[i] = f(in[i]...) for every
// element, with the inputs broadcast to out's shape and any strides on either side. It
//   1. expresses every operand's strides in out's shape (0 along broadcast dims),
//   2. merges adjacent dims that are contiguous in every operand (a contiguous tensor becomes
//      one long dim),
//   3. splits the elements into one range per thread, and walks each range row by row: the
//      innermost loop is unit-stride in the common case, so the compiler vectorises it.
// When every operand is contiguous and of out's shape, it skips 1-3 and runs one flat loop.
// Where an operand is 16-bit, each row is walked in blocks: the 16-bit operands widened to
// float32 blocks, f run over the blocks, the results rounded back (cpu/half_rows.h).
#pragma once

#include <algorithm>
#include <array>
#include <tuple>
#include <type_traits>
#include <utility>

#include "core/cpu/half_rows.h"
#include "core/parallel.h"
#include "core/tensor.h"

namespace ember::cpu {

template <size_t N>
struct LoopGeometry {
  Shape sizes;                   // merged dims of the iteration space
  std::array<Shape, N> strides;  // per operand, in elements, for each merged dim
};

// `operands[0]` is the output; all are broadcastable to `shape`.
template <size_t N>
LoopGeometry<N> loop_geometry(const Shape& shape, const std::array<const Tensor*, N>& operands) {
  const size_t rank = shape.size();
  std::array<Shape, N> strides;
  for (size_t k = 0; k < N; ++k) {
    const Tensor& t = *operands[k];
    const size_t lead = rank - static_cast<size_t>(t.dim());
    strides[k].assign(rank, 0);
    for (size_t d = 0; d < static_cast<size_t>(t.dim()); ++d) {
      strides[k][lead + d] = t.sizes()[d] == 1 ? 0 : t.strides()[d];
    }
  }
  LoopGeometry<N> geometry;
  // Walk dims from the innermost out, merging dim d into the current innermost merged dim when
  // every operand steps through d exactly one full run of the merged dim at a time.
  for (size_t d = rank; d-- > 0;) {
    if (shape[d] == 1) continue;
    if (!geometry.sizes.empty()) {
      bool mergeable = true;
      for (size_t k = 0; k < N; ++k) {
        mergeable = mergeable && strides[k][d] == geometry.strides[k].front() * geometry.sizes.front();
      }
      if (mergeable) {
        geometry.sizes.front() *= shape[d];
        continue;
      }
    }
    geometry.sizes.insert(geometry.sizes.begin(), shape[d]);
    for (size_t k = 0; k < N; ++k) geometry.strides[k].insert(geometry.strides[k].begin(), strides[k][d]);
  }
  if (geometry.sizes.empty()) {  // a single element
    geometry.sizes.push_back(1);
    for (size_t k = 0; k < N; ++k) geometry.strides[k].push_back(0);
  }
  return geometry;
}

namespace detail {

template <class T>
inline constexpr bool is_16_bit_element = !std::is_same_v<compute_type<T>, T>;

// Elements per block of the 16-bit path: a few float32 blocks of this size sit in L1.
inline constexpr int64_t kHalfBlock = 512;

// `to` = n elements of x (stride `step`) as compute_type<T>.
template <class T>
inline void load_block(const T* x, int64_t step, int64_t n, compute_type<T>* to) {
  if constexpr (is_16_bit_element<T>) {
    if (step == 1) return widen_row(x, n, to);
  }
  for (int64_t i = 0; i < n; ++i) to[i] = static_cast<compute_type<T>>(x[i * step]);
}

// out (stride `step`) = n results, rounded once to a 16-bit Out.
template <class Out>
inline void store_block(const compute_type<Out>* results, int64_t n, Out* out, int64_t step) {
  if (step == 1) return round_row(results, n, out);
  for (int64_t i = 0; i < n; ++i) out[i * step] = static_cast<Out>(results[i]);
}

// run_row for rows with a 16-bit operand: the element-by-element conversions the value types
// do keep a loop scalar (10 to 20 times slower than float32's), so the 16-bit operands are
// widened a block at a time, f runs over float32 blocks in a loop that vectorises as float32's
// does, and the block of results is rounded back in one pass.
template <class Out, class... In, class F, size_t... I>
inline void run_row_in_blocks(Out* out, [[maybe_unused]] std::tuple<const In*...> in,
                              const std::array<int64_t, sizeof...(In) + 1>& step,
                              int64_t n, F& f, std::index_sequence<I...>) {
  std::tuple<std::array<compute_type<In>, kHalfBlock>...> inputs;
  std::array<compute_type<Out>, kHalfBlock> results;
  for (int64_t start = 0; start < n; start += kHalfBlock) {
    const int64_t m = std::min(kHalfBlock, n - start);
    (load_block(std::get<I>(in) + start * step[I + 1], step[I + 1], m, std::get<I>(inputs).data()), ...);
#pragma omp simd
    for (int64_t i = 0; i < m; ++i) results[i] = static_cast<compute_type<Out>>(f(std::get<I>(inputs)[i]...));
    if constexpr (is_16_bit_element<Out>) {
      store_block(results.data(), m, out + start * step[0], step[0]);
    } else if (step[0] == 1) {
      std::copy_n(results.data(), m, out + start);
    } else {
      for (int64_t i = 0; i < m; ++i) out[(start + i) * step[0]] = results[i];
    }
  }
}

template <class Out, class... In, class F, size_t... I>
inline void run_row(Out* out, [[maybe_unused]] std::tuple<const In*...> in, const std::array<int64_t, sizeof...(In) + 1>& step,
                    int64_t n, F& f, std::index_sequence<I...>) {
  // The block path needs f to take compute_type values; one written for the 16-bit types
  // themselves (a conversion between dtypes) runs element by element below.
  if constexpr ((is_16_bit_element<Out> || (is_16_bit_element<In> || ...)) &&
                std::is_invocable_v<F&, compute_type<In>...>) {
    return run_row_in_blocks(out, in, step, n, f, std::index_sequence<I...>{});
  }
  if (step[0] == 1 && ((step[I + 1] == 1) && ...)) {
    // Unit stride everywhere: the loop the compiler vectorises.
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Out>(f(std::get<I>(in)[i]...));
  } else {
    for (int64_t i = 0; i < n; ++i) out[i * step[0]] = static_cast<Out>(f(std::get<I>(in)[i * step[I + 1]]...));
  }
}

}  // namespace detail

// out[i] = Out(f(inputs[0][i], inputs[1][i], ...)): f may compute in float for a 16-bit Out,
// and the cast rounds once, on store. `out` must not overlap an input except when
// the two are the same elements (in-place ops). Element types must match the dtypes.
template <class Out, class... In, class F>
void for_each_element(const Tensor& out, const std::array<Tensor, sizeof...(In)>& inputs, F f) {
  constexpr size_t N = sizeof...(In) + 1;
  const int64_t total = out.numel();
  if (total == 0) return;

  Out* const out_base = out.data_ptr<Out>();
  const std::tuple<const In*...> in_base = [&]<size_t... I>(std::index_sequence<I...>) {
    return std::tuple<const In*...>{inputs[I].template data_ptr<In>()...};
  }(std::index_sequence_for<In...>{});

  // Every operand contiguous and of out's shape (the common case): one flat unit-stride run,
  // without the geometry below, whose bookkeeping costs more than a small tensor's arithmetic.
  bool flat = out.is_contiguous();
  for (const Tensor& input : inputs) flat = flat && input.is_contiguous() && input.sizes() == out.sizes();
  if (flat) {
    std::array<int64_t, N> unit_step;
    unit_step.fill(1);
    parallel_for(total, 1, [&](int64_t begin, int64_t end) {
      [&]<size_t... I>(std::index_sequence<I...>) {
        detail::run_row(out_base + begin, std::tuple<const In*...>{std::get<I>(in_base) + begin...}, unit_step,
                        end - begin, f, std::index_sequence<I...>{});
      }(std::index_sequence_for<In...>{});
    });
    return;
  }

  std::array<const Tensor*, N> operands{&out};
  for (size_t k = 0; k < sizeof...(In); ++k) operands[k + 1] = &inputs[k];
  const LoopGeometry<N> geometry = loop_geometry<N>(out.sizes(), operands);
  const int64_t rank = static_cast<int64_t>(geometry.sizes.size());
  const int64_t inner = geometry.sizes.back();

  parallel_for(total, 1, [&](int64_t begin, int64_t end) {
    // Multi-index of `begin` in the merged iteration space, and each operand's offset there.
    Shape index(rank, 0);
    std::array<int64_t, N> offset{};
    int64_t rest = begin;
    for (int64_t d = rank - 1; d >= 0; --d) {
      index[d] = rest % geometry.sizes[d];
      rest /= geometry.sizes[d];
      for (size_t k = 0; k < N; ++k) offset[k] += index[d] * geometry.strides[k][d];
    }
    std::array<int64_t, N> step;
    for (size_t k = 0; k < N; ++k) step[k] = geometry.strides[k][rank - 1];

    int64_t position = begin;
    while (position < end) {
      const int64_t n = std::min(inner - index[rank - 1], end - position);
      [&]<size_t... I>(std::index_sequence<I...>) {
        detail::run_row(out_base + offset[0], std::tuple<const In*...>{std::get<I>(in_base) + offset[I + 1]...},
                        step, n, f, std::index_sequence<I...>{});
      }(std::index_sequence_for<In...>{});
      position += n;
      // Advance the multi-index by n along the innermost dim, carrying into outer dims.
      index[rank - 1] += n;
      for (size_t k = 0; k < N; ++k) offset[k] += n * step[k];
      for (int64_t d = rank - 1; d > 0 && index[d] == geometry.sizes[d]; --d) {
        index[d] = 0;
        ++index[d - 1];
        for (size_t k = 0; k < N; ++k) {
          offset[k] += geometry.strides[k][d - 1] - geometry.sizes[d] * geometry.strides[k][d];
        }
      }
    }
  });
}

}  // namespace ember::cpu
