// The mma.sync forward of fused attention (cuda/attention/flash_attention_forward.cuh), run on the
// CPU under the emulation, against ember's CPU attention in float64 on the same inputs (16-bit, or
// float32 for the kernels on TF32):
// head dims 64 and 128 (and narrower ones padded up to them), lengths that are no multiple of any
// tile, L != S, causal, bool and additive masks, rows with no key, dropout, heads split off a
// projection as views, more matrices than blocks, every tile shape the build compiles, and
// several interleavings of the block's threads. The backward (flash_attention_backward.cuh) and
// the deterministic mode's dQ pass (flash_attention_grad_q.cuh) on the same cases, against ember's
// CPU backward in float64.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <tuple>
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
  cuda_emulation::Element element = cuda_emulation::Element::kBFloat16;
  double dropout = 0;
  bool heads_as_views = false;  // q [B, L, H * E] viewed as [B, H, L, E]
  int tile = 0;
  unsigned int matrix_blocks = 0;  // 0: one per matrix
  uint64_t seed = 0;
  bool backward = false;  // also run the backward (tile `tile` of its list) and check the gradients
  bool deterministic = false;  // the backward without dQ, then dQ by its own pass
};

using cuda_emulation::Element;

// Elements of one type stored as the kernels read them (every byte 0xFF until set: a NaN of each
// type, so an element a kernel should have written and did not shows).
class Buffer {
 public:
  Buffer() = default;
  Buffer(Element element, size_t count)
      : element_(element), bytes_(count * cuda_emulation::element_bytes(element), 0xFF) {}

  size_t size() const { return bytes_.size() / cuda_emulation::element_bytes(element_); }
  size_t byte_size() const { return bytes_.size(); }
  const void* data() const { return bytes_.data(); }
  void* data() { return bytes_.data(); }
  bool operator==(const Buffer& other) const { return bytes_ == other.bytes_; }

  // Element e set to `value` rounded to the type (to nearest, ties to even).
  void set(size_t e, float value) {
    if (element_ == Element::kFloat32) {
      std::memcpy(&bytes_[e * 4], &value, 4);
      return;
    }
    const uint16_t bits = element_ == Element::kFloat16 ? Float16(value).bits : BFloat16(value).bits;
    std::memcpy(&bytes_[e * 2], &bits, 2);
  }

  double get(size_t e) const {
    if (element_ == Element::kFloat32) {
      float value = 0;
      std::memcpy(&value, &bytes_[e * 4], 4);
      return value;
    }
    uint16_t bits = 0;
    std::memcpy(&bits, &bytes_[e * 2], 2);
    return element_ == Element::kFloat16 ? double(float(Float16::from_bits(bits)))
                                         : double(float(BFloat16::from_bits(bits)));
  }

 private:
  Element element_ = Element::kBFloat16;
  std::vector<unsigned char> bytes_;
};

// An operand: its elements, and their values widened to double.
struct Operand {
  Buffer bits;
  std::vector<double> values;
};

Operand random_operand(size_t count, Element element, std::mt19937_64& random, float spread) {
  std::normal_distribution<float> normal(0.0f, spread);
  Operand operand{Buffer(element, count), std::vector<double>(count)};
  for (size_t e = 0; e < count; ++e) {
    operand.bits.set(e, normal(random));
    operand.values[e] = operand.bits.get(e);
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
      for (int64_t col = 0; col < cols; ++col)
        data[(n * rows + r) * cols + col] = operand.values[index_of(c, n, r, col, rows, cols)];
    }
  }
  return tensor;
}

// How far the kernels' outputs and gradients may be from the float64 reference, per element type.
double forward_tolerance(Element element) {
  switch (element) {
    case Element::kFloat16:
      return 4e-3;
    case Element::kFloat32:
      return 4e-3;
    default:
      return 3e-2;
  }
}
double backward_tolerance(Element element) {
  switch (element) {
    case Element::kFloat16:
      return 1e-2;
    case Element::kFloat32:
      return 1e-2;
    default:
      return 6e-2;
  }
}

// The largest |got - want| over a gradient, and the largest |want|.
struct Difference {
  double worst = 0, largest = 0;
};

// The backward of the case on the emulated kernel against ember's CPU backward in float64: D from
// the 16-bit output the forward stored (as the GPU's pre-pass computes it).
void check_backward(const Case& c, const cuda::AttentionLayout& layout, cuda_emulation::AttentionCall call,
                    const Tensor& q64, const Tensor& k64, const Tensor& v64, const Tensor& out64, const Tensor& saved,
                    const kernels::AttentionArgs& args, const Buffer& out) {
  const int64_t M = c.batch * c.heads;
  std::mt19937_64 random(77 + c.L + c.S);
  const Operand grad_out = random_operand(size_t(M * c.L * c.Ev), c.element, random, 1.0f);
  Tensor grad_out64 = make_tensor(Shape{M, c.L, c.Ev}, kFloat64, kCPU);
  std::copy(grad_out.values.begin(), grad_out.values.end(), grad_out64.data_ptr<double>());
  const Tensor grad_q64 = make_tensor(Shape{M, c.L, c.E}, kFloat64, kCPU);
  const Tensor grad_k64 = make_tensor(Shape{M, c.S, c.E}, kFloat64, kCPU);
  const Tensor grad_v64 = make_tensor(Shape{M, c.S, c.Ev}, kFloat64, kCPU);
  kernels::attention_backward[kCPU](grad_q64, grad_k64, grad_v64, grad_out64, q64, k64, v64, out64, saved, args);

  std::vector<float> out_dot_grad(size_t(M * c.L), 0.0f);
  for (size_t row = 0; row < out_dot_grad.size(); ++row) {
    double sum = 0;
    for (int64_t col = 0; col < c.Ev; ++col) {
      sum += grad_out.values[row * c.Ev + col] * out.get(row * c.Ev + col);
    }
    out_dot_grad[row] = float(sum);
  }
  std::vector<float> grad_q(size_t(M * c.L * c.E), 0.0f);
  Buffer grad_k(c.element, size_t(M * c.S * c.E)), grad_v(c.element, size_t(M * c.S * c.Ev));
  call.grad_out = grad_out.bits.data();
  call.grad_q = grad_q.data();
  call.grad_k = grad_k.data();
  call.grad_v = grad_v.data();
  call.out_dot_grad = out_dot_grad.data();
  const size_t bytes = cuda_emulation::element_bytes(c.element);
  cuda_emulation::register_global_region(call.q, size_t(M * c.L * c.E) * bytes);
  cuda_emulation::register_global_region(call.k, size_t(M * c.S * c.E) * bytes);
  cuda_emulation::register_global_region(call.v, size_t(M * c.S * c.Ev) * bytes);
  cuda_emulation::register_global_region(grad_out.bits.data(), grad_out.bits.byte_size());
  const unsigned int matrix_blocks = c.matrix_blocks > 0 ? c.matrix_blocks : static_cast<unsigned int>(M);
  const int head_dim = cuda::flash_head_dim(c.E, c.Ev);
  try {
    if (c.deterministic) {
      cuda_emulation::AttentionCall keys_and_values = call;
      keys_and_values.grad_q = nullptr;
      cuda_emulation::run_flash_attention_backward(c.element, head_dim, c.tile, layout, keys_and_values, c.seed,
                                                   matrix_blocks);
      cuda_emulation::run_flash_attention_grad_q(c.element, head_dim, layout, call, c.seed, matrix_blocks);
      // Again, in another interleaving of the threads and into a buffer that holds values already
      // (dQ is added into it): the same bits, plus those values.
      std::vector<float> again(grad_q.size());
      for (size_t e = 0; e < again.size(); ++e) again[e] = float(e % 7) - 3.0f;
      cuda_emulation::AttentionCall second = call;
      second.grad_q = again.data();
      cuda_emulation::run_flash_attention_grad_q(c.element, head_dim, layout, second, c.seed + 101, matrix_blocks);
      for (size_t e = 0; e < again.size(); ++e) {
        if (again[e] != (float(e % 7) - 3.0f) + grad_q[e]) {
          FAIL_CHECK("grad_q element " << e << " differs between runs: " << again[e] << " vs " << grad_q[e]);
          break;
        }
      }
    } else {
      cuda_emulation::run_flash_attention_backward(c.element, head_dim, c.tile, layout, call, c.seed, matrix_blocks);
    }
  } catch (const std::exception& error) {
    cuda_emulation::clear_global_regions();
    FAIL_CHECK(std::string(error.what()));
    return;
  }
  cuda_emulation::clear_global_regions();

  // The roundings of W and dS to 16 bits, of dK and dV where stored, and D from the rounded
  // output: a few units of the format's last place on gradients of about 1. On TF32 every
  // operand of the products is rounded to 10 fraction bits; stores and D are float32.
  const double tolerance = backward_tolerance(c.element);
  auto compare = [&](const char* what, const Tensor& want, auto&& got_at) {
    Difference difference;
    const double* reference = want.data_ptr<double>();
    for (int64_t e = 0; e < want.numel(); ++e) {
      const double got = got_at(e);
      difference.worst = std::max(difference.worst, std::fabs(got - reference[e]));
      difference.largest = std::max(difference.largest, std::fabs(reference[e]));
      if (!(std::fabs(got - reference[e]) <= tolerance * std::max(1.0, std::fabs(reference[e])))) {
        FAIL_CHECK(std::string(what) << " element " << e << ": " << got << " vs " << reference[e]);
        return;
      }
    }
    MESSAGE(c.name << std::string(c.deterministic ? " deterministic" : "") << " backward tile " << c.tile << ": "
                   << std::string(what) << " largest difference " << difference.worst
                   << " (largest value " << difference.largest << ")");
  };
  compare("grad_q", grad_q64, [&](int64_t e) { return double(grad_q[size_t(e)]); });
  compare("grad_k", grad_k64, [&](int64_t e) { return grad_k.get(size_t(e)); });
  compare("grad_v", grad_v64, [&](int64_t e) { return grad_v.get(size_t(e)); });
}

// Runs the case, checks it, and returns the output's bits.
Buffer run_case(const Case& c) {
  CAPTURE(c.name);
  CAPTURE(c.tile);
  CAPTURE(c.seed);
  const int head_dim = cuda::flash_head_dim(c.E, c.Ev);
  REQUIRE(head_dim != 0);
  const int64_t M = c.batch * c.heads;
  std::mt19937_64 random(1234 + c.L * 7 + c.S * 13 + c.E);
  const Operand q = random_operand(size_t(M * c.L * c.E), c.element, random, 1.0f);
  const Operand k = random_operand(size_t(M * c.S * c.E), c.element, random, 1.0f);
  const Operand v = random_operand(size_t(M * c.S * c.Ev), c.element, random, 1.0f);

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
  for (const auto& [operand, cols] :
       {std::pair{int(cuda::kAttentionOut), c.Ev}, std::pair{int(cuda::kAttentionMask), c.S}}) {
    layout.batch_strides[operand][0] = c.heads * c.L * cols;
    layout.batch_strides[operand][1] = c.L * cols;
    layout.row_stride[operand] = cols;
    layout.col_stride[operand] = 1;
  }
  // The gradients: contiguous [M, rows, cols], grad_out as out.
  for (const auto& [operand, rows, cols] :
       {std::tuple{int(cuda::kAttentionGradOut), c.L, c.Ev}, std::tuple{int(cuda::kAttentionGradQ), c.L, c.E},
        std::tuple{int(cuda::kAttentionGradK), c.S, c.E}, std::tuple{int(cuda::kAttentionGradV), c.S, c.Ev}}) {
    layout.batch_strides[operand][0] = c.heads * rows * cols;
    layout.batch_strides[operand][1] = rows * cols;
    layout.row_stride[operand] = cols;
    layout.col_stride[operand] = 1;
  }
  REQUIRE(cuda::flash_operands_aligned(
      layout,
      {reinterpret_cast<uintptr_t>(q.bits.data()), reinterpret_cast<uintptr_t>(k.bits.data()),
       reinterpret_cast<uintptr_t>(v.bits.data())},
      int(cuda_emulation::element_bytes(c.element))));

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
    added = random_operand(count, c.element, random, 2.0f);
    for (size_t e = 0; e < count; ++e) {
      const int64_t row = int64_t(e / c.S) % c.L;
      if (row % 7 == 2 || random() % 4 == 0) {
        added.bits.set(e, -std::numeric_limits<float>::infinity());
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
  const Tensor saved = kernels::attention[kCPU](expected, q64, k64, v64, args);

  Buffer out(c.element, size_t(M * c.L * c.Ev));
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
  cuda_emulation::register_global_region(q.bits.data(), q.bits.byte_size());
  cuda_emulation::register_global_region(k.bits.data(), k.bits.byte_size());
  cuda_emulation::register_global_region(v.bits.data(), v.bits.byte_size());
  const unsigned int matrix_blocks = c.matrix_blocks > 0 ? c.matrix_blocks : static_cast<unsigned int>(M);
  try {
    cuda_emulation::run_flash_attention_forward(c.element, head_dim, c.tile, layout, call, c.seed, matrix_blocks);
  } catch (const std::exception& error) {
    cuda_emulation::clear_global_regions();
    FAIL_CHECK(std::string(error.what()));
    return {};
  }
  cuda_emulation::clear_global_regions();

  // One rounding of each weight to 16 bits and one of each output: a few units of the format's
  // last place on values of about 1. On TF32, q, k, the weights and v each rounded to 10 fraction
  // bits, the output stored in float32.
  const double tolerance = forward_tolerance(c.element);
  const double* reference = expected.data_ptr<double>();
  double worst = 0;
  for (int64_t n = 0; n < M; ++n) {
    for (int64_t i = 0; i < c.L; ++i) {
      // The log-sum-exp of the row's masked, scaled scores (+inf for a row with no key).
      double max_score = -std::numeric_limits<double>::infinity();
      std::vector<double> scores(size_t(c.S));
      for (int64_t j = 0; j < c.S; ++j) {
        double dot = 0;
        for (int64_t e = 0; e < c.E; ++e)
          dot += q64.data_ptr<double>()[(n * c.L + i) * c.E + e] * k64.data_ptr<double>()[(n * c.S + j) * c.E + e];
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
        // 16-bit inputs give exact products; TF32's rounding of q and k moves the scores a little.
        const double epsilon = c.element == Element::kFloat32 ? 1e-3 : 1e-5;
        CHECK(double(got_lse) == doctest::Approx(lse).epsilon(epsilon).scale(1.0));
      }
      for (int64_t col = 0; col < c.Ev; ++col) {
        const double got = out.get(size_t((n * c.L + i) * c.Ev + col));
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
  if (c.backward) check_backward(c, layout, call, q64, k64, v64, expected, saved, args, out);
  return out;
}

TEST_CASE("flash attention forward: head dims 64 and 128, tails, L != S") {
  run_case({.name = "bf16 d64 L=S=128", .batch = 1, .heads = 2, .L = 128, .S = 128, .E = 64, .Ev = 64});
  run_case(
      {.name = "f16 d128 L 100 S 77",
       .batch = 2,
       .heads = 1,
       .L = 100,
       .S = 77,
       .E = 128,
       .Ev = 128,
       .element = Element::kFloat16});
  run_case({.name = "bf16 E 40 Ev 24 (padded to 64) L 33 S 200", .L = 33, .S = 200, .E = 40, .Ev = 24});
  run_case({.name = "f16 E 96 Ev 128 L 1 S 1", .L = 1, .S = 1, .E = 96, .Ev = 128, .element = Element::kFloat16});
  run_case({.name = "bf16 d64 L 200 S 3", .L = 200, .S = 3, .E = 64, .Ev = 64});
}

TEST_CASE("flash attention forward: causal, bool and additive masks, rows with no key") {
  run_case({.name = "causal bf16 d64 L=S=150", .heads = 2, .L = 150, .S = 150, .mask = MaskKind::kCausal});
  run_case({.name = "causal f16 d128 L 70 S 130",
            .L = 70,
            .S = 130,
            .E = 128,
            .Ev = 128,
            .mask = MaskKind::kCausal,
            .element = Element::kFloat16});
  run_case(
      {.name = "causal bf16 L 130 S 20 (rows past S see every key)", .L = 130, .S = 20, .mask = MaskKind::kCausal});
  run_case({.name = "bool mask bf16 d64 L 90 S 70", .heads = 2, .L = 90, .S = 70, .mask = MaskKind::kBool});
  run_case({.name = "additive mask f16 d128 L 65 S 64",
            .L = 65,
            .S = 64,
            .E = 128,
            .Ev = 128,
            .mask = MaskKind::kAdditive,
            .element = Element::kFloat16});
}

TEST_CASE("flash attention forward: dropout draws the CPU's mask bits") {
  run_case({.name = "dropout 0.2 bf16 d64 L=S=80", .heads = 2, .L = 80, .S = 80, .dropout = 0.2});
  run_case({.name = "dropout 0.5 causal f16 d128 L 40 S 96",
            .L = 40,
            .S = 96,
            .E = 128,
            .Ev = 128,
            .mask = MaskKind::kCausal,
            .element = Element::kFloat16,
            .dropout = 0.5});
}

TEST_CASE("flash attention forward: heads as views, more matrices than blocks") {
  run_case({.name = "heads split off [B, L, H E]",
            .batch = 2,
            .heads = 3,
            .L = 50,
            .S = 70,
            .E = 64,
            .Ev = 64,
            .heads_as_views = true});
  run_case({.name = "5 matrices on 2 blocks",
            .batch = 5,
            .heads = 1,
            .L = 20,
            .S = 30,
            .E = 32,
            .Ev = 32,
            .matrix_blocks = 2});
}

TEST_CASE("flash attention forward: every tile shape the build compiles, in several interleavings") {
  for (int tile = 0; tile < cuda::kFlashTileChoices; ++tile) {
    run_case({.name = "d64 causal L=S=130",
              .L = 130,
              .S = 130,
              .mask = MaskKind::kCausal,
              .tile = tile,
              .seed = uint64_t(tile)});
    run_case({.name = "d128 L 70 S 161",
              .L = 70,
              .S = 161,
              .E = 128,
              .Ev = 128,
              .element = Element::kFloat16,
              .tile = tile,
              .seed = uint64_t(tile + 7)});
  }
  // The threads' order changes nothing: the same bits from three interleavings.
  const Case c{.name = "bool mask, dropout", .heads = 2, .L = 77, .S = 77, .mask = MaskKind::kBool, .dropout = 0.1};
  const Buffer first = run_case(c);
  for (const uint64_t seed : {5u, 6u}) {
    Case again = c;
    again.seed = seed;
    CHECK(run_case(again) == first);
  }
}

// The backward's cases: head dims, tails, masks, rows with no key, dropout, views.
std::vector<Case> backward_cases() {
  return {
      {.name = "bf16 d64 L=S=128", .heads = 2, .L = 128, .S = 128, .backward = true},
      {.name = "f16 d128 L 100 S 77", .batch = 2, .L = 100, .S = 77, .E = 128, .Ev = 128, .element = Element::kFloat16,
       .backward = true},
      {.name = "bf16 E 40 Ev 24 L 33 S 200", .L = 33, .S = 200, .E = 40, .Ev = 24, .backward = true},
      {.name = "causal f16 d64 L 150 S 150", .L = 150, .S = 150, .mask = MaskKind::kCausal,
       .element = Element::kFloat16,
       .backward = true},
      {.name = "causal bf16 L 130 S 20", .L = 130, .S = 20, .mask = MaskKind::kCausal, .backward = true},
      {.name = "bool mask bf16 L 90 S 70", .heads = 2, .L = 90, .S = 70, .mask = MaskKind::kBool, .backward = true},
      {.name = "additive mask f16 d128 L 65 S 64", .L = 65, .S = 64, .E = 128, .Ev = 128,
       .mask = MaskKind::kAdditive, .element = Element::kFloat16, .backward = true},
      {.name = "dropout 0.2 causal bf16 L=S=80", .heads = 2, .L = 80, .S = 80, .mask = MaskKind::kCausal,
       .dropout = 0.2, .backward = true},
      {.name = "heads as views, 6 matrices on 4 blocks", .batch = 2, .heads = 3, .L = 50, .S = 70,
       .heads_as_views = true, .matrix_blocks = 4, .backward = true},
      {.name = "L 1 S 1", .L = 1, .S = 1, .E = 64, .Ev = 64, .element = Element::kFloat16, .backward = true},
  };
}

TEST_CASE("flash attention backward: head dims, tails, masks, rows with no key, dropout, views") {
  for (const Case& c : backward_cases()) run_case(c);
}

TEST_CASE("flash attention backward: every tile shape the build compiles") {
  for (int tile = 0; tile < cuda::kFlashTileChoices; ++tile) {
    run_case({.name = "d64 causal L 130 S 150",
              .L = 130,
              .S = 150,
              .mask = MaskKind::kCausal,
              .tile = tile,
              .seed = uint64_t(tile),
              .backward = true});
    run_case({.name = "d128 L 70 S 161",
              .L = 70,
              .S = 161,
              .E = 128,
              .Ev = 128,
              .element = Element::kFloat16,
              .tile = tile,
              .seed = uint64_t(tile + 3),
              .backward = true});
  }
}

TEST_CASE("flash attention backward, deterministic: dQ by its own pass, the same bits on every run") {
  for (Case c : backward_cases()) {
    c.deterministic = true;
    run_case(c);
  }
}

}  // namespace

// float32 on TF32 tensor cores (mma.m16n8k8): the same kernels, their fragments loaded and ordered
// as cuda/attention/mma_fragments.cuh says, on the backward's cases (each also checks its forward),
// every tile shape, and the deterministic dQ pass.
Case on_tf32(Case c) {
  c.element = Element::kFloat32;
  for (const char* type : {"bf16 ", "f16 "}) {
    if (const size_t at = c.name.find(type); at != std::string::npos) c.name.erase(at, std::strlen(type));
  }
  c.name = "tf32 " + c.name;
  return c;
}

TEST_CASE("flash attention on TF32: float32 forward and backward, every case") {
  for (const Case& c : backward_cases()) run_case(on_tf32(c));
  run_case({.name = "tf32 additive mask d64 L 33 S 90",
            .L = 33,
            .S = 90,
            .mask = MaskKind::kAdditive,
            .element = Element::kFloat32,
            .backward = true});
}

TEST_CASE("flash attention on TF32: every tile shape, several interleavings, deterministic dQ") {
  for (int tile = 0; tile < cuda::kFlashTileChoices; ++tile) {
    run_case({.name = "tf32 d64 causal L 130 S 150",
              .L = 130,
              .S = 150,
              .mask = MaskKind::kCausal,
              .element = Element::kFloat32,
              .tile = tile,
              .seed = uint64_t(tile),
              .backward = true});
    run_case({.name = "tf32 d128 L 70 S 161",
              .L = 70,
              .S = 161,
              .E = 128,
              .Ev = 128,
              .element = Element::kFloat32,
              .tile = tile,
              .seed = uint64_t(tile + 3),
              .backward = true});
  }
  const Case c{.name = "tf32 bool mask, dropout",
               .heads = 2,
               .L = 77,
               .S = 77,
               .mask = MaskKind::kBool,
               .element = Element::kFloat32,
               .dropout = 0.1};
  const Buffer first = run_case(c);
  for (const uint64_t seed : {5u, 6u}) {
    Case again = c;
    again.seed = seed;
    CHECK(run_case(again) == first);
  }
  for (const Case& c : backward_cases()) {
    Case deterministic = on_tf32(c);
    deterministic.deterministic = true;
    run_case(deterministic);
  }
}
