// The mma.sync forward of fused attention (cuda/attention/flash_attention_forward.cuh), run on the
// CPU under the emulation, against ember's CPU attention in float64 on the same 16-bit inputs:
// head dims 64 and 128 (and narrower ones padded up to them), lengths that are no multiple of any
// tile, L != S, causal, bool and additive masks, rows with no key, dropout, heads split off a
// projection as views, more matrices than blocks, every tile shape the build compiles, and
// several interleavings of the block's threads.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "core/ops/attention.h"
#include "core/tensor.h"
#include "tests/cuda_emulation/emulated_kernels.h"

namespace {

using namespace ember;

enum class MaskKind { kNone, kCausal, kBool, kAdditive };

struct Case {
  std::string name;
  int64_t batch = 1, heads = 1, L = 1, S = 1, E = 64, Ev = 64;
  MaskKind mask = MaskKind::kNone;
  bool float16 = false;
  double dropout = 0;
  bool heads_as_views = false;  // q [B, L, H * E] viewed as [B, H, L, E]
  int tile = 0;
  unsigned int matrix_blocks = 0;  // 0: one per matrix
  uint64_t seed = 0;
};

// A 16-bit buffer and its values widened to double.
struct Operand {
  std::vector<uint16_t> bits;
  std::vector<double> values;
};

uint16_t to_bits(float value, bool float16) { return float16 ? Float16(value).bits : BFloat16(value).bits; }
double from_bits(uint16_t bits, bool float16) {
  return float16 ? double(float(Float16::from_bits(bits))) : double(float(BFloat16::from_bits(bits)));
}

Operand random_operand(size_t count, bool float16, std::mt19937_64& random, float spread) {
  std::normal_distribution<float> normal(0.0f, spread);
  Operand operand;
  operand.bits.resize(count);
  operand.values.resize(count);
  for (size_t e = 0; e < count; ++e) {
    operand.bits[e] = to_bits(normal(random), float16);
    operand.values[e] = from_bits(operand.bits[e], float16);
  }
  return operand;
}

// The layout of an operand [M, rows, cols] stored contiguously, or (heads_as_views) stored as
// [B, rows, H, cols] and read as [B, H, rows, cols].
void describe(cuda::AttentionLayout& layout, int operand, const Case& c, int64_t rows, int64_t cols) {
  if (c.heads_as_views) {
    layout.batch_strides[operand][0] = rows * c.heads * cols;
    layout.batch_strides[operand][1] = cols;
    layout.row_stride[operand] = c.heads * cols;
  } else {
    layout.batch_strides[operand][0] = c.heads * rows * cols;
    layout.batch_strides[operand][1] = rows * cols;
    layout.row_stride[operand] = cols;
  }
  layout.col_stride[operand] = 1;
}

// Element (matrix n, row, col) of an operand laid out as `describe` says, as an index.
int64_t index_of(const Case& c, int64_t n, int64_t row, int64_t col, int64_t rows, int64_t cols) {
  const int64_t b = n / c.heads, h = n % c.heads;
  if (c.heads_as_views) return ((b * rows + row) * c.heads + h) * cols + col;
  return (n * rows + row) * cols + col;
}

// The same operand as a contiguous [M, rows, cols] float64 tensor.
Tensor as_tensor(const Operand& operand, const Case& c, int64_t rows, int64_t cols) {
  const int64_t matrices = c.batch * c.heads;
  Tensor tensor = make_tensor(Shape{matrices, rows, cols}, kFloat64, kCPU);
  double* data = tensor.data_ptr<double>();
  for (int64_t n = 0; n < matrices; ++n) {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t col = 0; col < cols; ++col) data[(n * rows + r) * cols + col] = operand.values[index_of(c, n, r, col, rows, cols)];
    }
  }
  return tensor;
}

// Runs the case, checks it, and returns the output's bits.
std::vector<uint16_t> run_case(const Case& c) {
  CAPTURE(c.name);
  CAPTURE(c.tile);
  CAPTURE(c.seed);
  const int head_dim = cuda::flash_head_dim(c.E, c.Ev);
  REQUIRE(head_dim != 0);
  const int64_t M = c.batch * c.heads;
  std::mt19937_64 random(1234 + c.L * 7 + c.S * 13 + c.E);
  const Operand q = random_operand(size_t(M * c.L * c.E), c.float16, random, 1.0f);
  const Operand k = random_operand(size_t(M * c.S * c.E), c.float16, random, 1.0f);
  const Operand v = random_operand(size_t(M * c.S * c.Ev), c.float16, random, 1.0f);

  cuda::AttentionLayout layout;
  layout.target_length = c.L;
  layout.source_length = c.S;
  layout.embed = c.E;
  layout.value_embed = c.Ev;
  layout.matrices = M;
  layout.batch_dims = 2;
  layout.batch_sizes[0] = c.batch;
  layout.batch_sizes[1] = c.heads;
  describe(layout, cuda::kAttentionQ, c, c.L, c.E);
  describe(layout, cuda::kAttentionK, c, c.S, c.E);
  describe(layout, cuda::kAttentionV, c, c.S, c.Ev);
  // out and the mask: contiguous [M, L, Ev] and [M, L, S].
  for (const auto& [operand, cols] : {std::pair{int(cuda::kAttentionOut), c.Ev}, std::pair{int(cuda::kAttentionMask), c.S}}) {
    layout.batch_strides[operand][0] = c.heads * c.L * cols;
    layout.batch_strides[operand][1] = c.L * cols;
    layout.row_stride[operand] = cols;
    layout.col_stride[operand] = 1;
  }
  REQUIRE(cuda::flash_operands_aligned(layout, {reinterpret_cast<uintptr_t>(q.bits.data()),
                                                reinterpret_cast<uintptr_t>(k.bits.data()),
                                                reinterpret_cast<uintptr_t>(v.bits.data())}));

  kernels::AttentionArgs args;
  args.is_causal = c.mask == MaskKind::kCausal;
  args.scale = 1.0 / std::sqrt(double(c.E));
  args.dropout_p = c.dropout;
  args.dropout_state = PhiloxState{99, 4096};
  cuda_emulation::AttentionCall call;
  std::vector<uint8_t> allowed_bytes;
  std::unique_ptr<bool[]> allowed;
  Operand added;
  if (c.mask == MaskKind::kBool) {
    // About one key in three hidden, and every fifth query row hidden whole.
    const size_t count = size_t(M * c.L * c.S);
    allowed = std::make_unique<bool[]>(count);
    args.mask = make_tensor(Shape{M, c.L, c.S}, DType::Bool, kCPU);
    for (size_t e = 0; e < count; ++e) {
      const int64_t row = int64_t(e / c.S) % c.L;
      allowed[e] = row % 5 != 3 && random() % 3 != 0;
      args.mask.data_ptr<bool>()[e] = allowed[e];
    }
    call.allowed = allowed.get();
  } else if (c.mask == MaskKind::kAdditive) {
    // Values of a few units, -inf for about one in four, and every seventh row all -inf.
    const size_t count = size_t(M * c.L * c.S);
    added = random_operand(count, c.float16, random, 2.0f);
    for (size_t e = 0; e < count; ++e) {
      const int64_t row = int64_t(e / c.S) % c.L;
      if (row % 7 == 2 || random() % 4 == 0) {
        added.bits[e] = to_bits(-std::numeric_limits<float>::infinity(), c.float16);
        added.values[e] = -std::numeric_limits<double>::infinity();
      }
    }
    args.mask = make_tensor(Shape{M, c.L, c.S}, kFloat64, kCPU);
    for (size_t e = 0; e < count; ++e) args.mask.data_ptr<double>()[e] = added.values[e];
    call.added = added.bits.data();
  }

  // The reference: ember's CPU attention in float64.
  const Tensor expected = make_tensor(Shape{M, c.L, c.Ev}, kFloat64, kCPU);
  const Tensor q64 = as_tensor(q, c, c.L, c.E), k64 = as_tensor(k, c, c.S, c.E), v64 = as_tensor(v, c, c.S, c.Ev);
  kernels::attention[kCPU](expected, q64, k64, v64, args);

  std::vector<uint16_t> out(size_t(M * c.L * c.Ev), 0xFFFF);
  std::vector<float> log_sum_exp(size_t(M * c.L), -1.0f);
  call.q = q.bits.data();
  call.k = k.bits.data();
  call.v = v.bits.data();
  call.out = out.data();
  call.is_causal = args.is_causal;
  call.scale = float(args.scale);
  call.dropout_p = float(c.dropout);
  call.dropout_keep_scale = c.dropout > 0 ? float(1.0 / (1.0 - c.dropout)) : 1.0f;
  call.dropout_state = args.dropout_state;
  call.log_sum_exp = log_sum_exp.data();
  cuda_emulation::register_global_region(q.bits.data(), q.bits.size() * 2);
  cuda_emulation::register_global_region(k.bits.data(), k.bits.size() * 2);
  cuda_emulation::register_global_region(v.bits.data(), v.bits.size() * 2);
  const unsigned int matrix_blocks = c.matrix_blocks > 0 ? c.matrix_blocks : static_cast<unsigned int>(M);
  try {
    cuda_emulation::run_flash_attention_forward(c.float16, head_dim, c.tile, layout, call, c.seed, matrix_blocks);
  } catch (const std::exception& error) {
    cuda_emulation::clear_global_regions();
    FAIL_CHECK(std::string(error.what()));
    return {};
  }
  cuda_emulation::clear_global_regions();

  // One rounding of each weight to 16 bits and one of each output: a few units of the format's
  // last place on values of about 1.
  const double tolerance = c.float16 ? 4e-3 : 3e-2;
  const double* reference = expected.data_ptr<double>();
  double worst = 0;
  for (int64_t n = 0; n < M; ++n) {
    for (int64_t i = 0; i < c.L; ++i) {
      // The log-sum-exp of the row's masked, scaled scores (+inf for a row with no key).
      double max_score = -std::numeric_limits<double>::infinity();
      std::vector<double> scores(size_t(c.S));
      for (int64_t j = 0; j < c.S; ++j) {
        double dot = 0;
        for (int64_t e = 0; e < c.E; ++e) dot += q64.data_ptr<double>()[(n * c.L + i) * c.E + e] * k64.data_ptr<double>()[(n * c.S + j) * c.E + e];
        double score = dot * args.scale;
        const size_t at = size_t((n * c.L + i) * c.S + j);
        if (c.mask == MaskKind::kCausal && j > i) score = -std::numeric_limits<double>::infinity();
        if (c.mask == MaskKind::kBool && !allowed[at]) score = -std::numeric_limits<double>::infinity();
        if (c.mask == MaskKind::kAdditive) score += added.values[at];
        scores[size_t(j)] = score;
        max_score = std::max(max_score, score);
      }
      double lse = std::numeric_limits<double>::infinity();
      if (max_score != -std::numeric_limits<double>::infinity()) {
        double sum = 0;
        for (const double score : scores) sum += std::exp(score - max_score);
        lse = max_score + std::log(sum);
      }
      const float got_lse = log_sum_exp[size_t(n * c.L + i)];
      if (std::isinf(lse)) {
        CHECK(std::isinf(got_lse));
        CHECK(got_lse > 0);
      } else {
        CHECK(double(got_lse) == doctest::Approx(lse).epsilon(1e-5).scale(1.0));
      }
      for (int64_t col = 0; col < c.Ev; ++col) {
        const double got = from_bits(out[size_t((n * c.L + i) * c.Ev + col)], c.float16);
        const double want = reference[(n * c.L + i) * c.Ev + col];
        worst = std::max(worst, std::fabs(got - want));
        if (!(std::fabs(got - want) <= tolerance)) {
          FAIL_CHECK("matrix " << n << " row " << i << " col " << col << ": " << got << " vs " << want);
          return out;
        }
      }
    }
  }
  MESSAGE(c.name << " tile " << c.tile << ": largest difference " << worst);
  return out;
}

TEST_CASE("flash attention forward: head dims 64 and 128, tails, L != S") {
  run_case({.name = "bf16 d64 L=S=128", .batch = 1, .heads = 2, .L = 128, .S = 128, .E = 64, .Ev = 64});
  run_case({.name = "f16 d128 L 100 S 77", .batch = 2, .heads = 1, .L = 100, .S = 77, .E = 128, .Ev = 128, .float16 = true});
  run_case({.name = "bf16 E 40 Ev 24 (padded to 64) L 33 S 200", .L = 33, .S = 200, .E = 40, .Ev = 24});
  run_case({.name = "f16 E 96 Ev 128 L 1 S 1", .L = 1, .S = 1, .E = 96, .Ev = 128, .float16 = true});
  run_case({.name = "bf16 d64 L 200 S 3", .L = 200, .S = 3, .E = 64, .Ev = 64});
}

TEST_CASE("flash attention forward: causal, bool and additive masks, rows with no key") {
  run_case({.name = "causal bf16 d64 L=S=150", .heads = 2, .L = 150, .S = 150, .mask = MaskKind::kCausal});
  run_case({.name = "causal f16 d128 L 70 S 130", .L = 70, .S = 130, .E = 128, .Ev = 128, .mask = MaskKind::kCausal, .float16 = true});
  run_case({.name = "causal bf16 L 130 S 20 (rows past S see every key)", .L = 130, .S = 20, .mask = MaskKind::kCausal});
  run_case({.name = "bool mask bf16 d64 L 90 S 70", .heads = 2, .L = 90, .S = 70, .mask = MaskKind::kBool});
  run_case({.name = "additive mask f16 d128 L 65 S 64", .L = 65, .S = 64, .E = 128, .Ev = 128, .mask = MaskKind::kAdditive, .float16 = true});
}

TEST_CASE("flash attention forward: dropout draws the CPU's mask bits") {
  run_case({.name = "dropout 0.2 bf16 d64 L=S=80", .heads = 2, .L = 80, .S = 80, .dropout = 0.2});
  run_case({.name = "dropout 0.5 causal f16 d128 L 40 S 96", .L = 40, .S = 96, .E = 128, .Ev = 128, .mask = MaskKind::kCausal, .float16 = true, .dropout = 0.5});
}

TEST_CASE("flash attention forward: heads as views, more matrices than blocks") {
  run_case({.name = "heads split off [B, L, H E]", .batch = 2, .heads = 3, .L = 50, .S = 70, .E = 64, .Ev = 64, .heads_as_views = true});
  run_case({.name = "5 matrices on 2 blocks", .batch = 5, .heads = 1, .L = 20, .S = 30, .E = 32, .Ev = 32, .matrix_blocks = 2});
}

TEST_CASE("flash attention forward: every tile shape the build compiles, in several interleavings") {
  for (int tile = 0; tile < cuda::kFlashTileChoices; ++tile) {
    run_case({.name = "d64 causal L=S=130", .L = 130, .S = 130, .mask = MaskKind::kCausal, .tile = tile, .seed = uint64_t(tile)});
    run_case({.name = "d128 L 70 S 161", .L = 70, .S = 161, .E = 128, .Ev = 128, .float16 = true, .tile = tile, .seed = uint64_t(tile + 7)});
  }
  // The threads' order changes nothing: the same bits from three interleavings.
  const Case c{.name = "bool mask, dropout", .heads = 2, .L = 77, .S = 77, .mask = MaskKind::kBool, .dropout = 0.1};
  const std::vector<uint16_t> first = run_case(c);
  for (const uint64_t seed : {5u, 6u}) {
    Case again = c;
    again.seed = seed;
    CHECK(run_case(again) == first);
  }
}

}  // namespace
