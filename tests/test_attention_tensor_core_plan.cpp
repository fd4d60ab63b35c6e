// The tensor-core path of fused CUDA attention (cuda/attention/attention_tensor_core_plan.h), checked on the
// CPU: which calls take it, how EMBER_ATTENTION_TENSOR_CORES is read, and the shared-memory plan
// the kernels index into: every buffer inside the block's allocation, none overlapping, every
// pointer a WMMA load or store forms 32-byte aligned with a leading dimension WMMA accepts, and
// 16-bit rows on distinct banks. The kernels evaluate the very same plan, so what holds here holds
// on the GPU; this needs no GPU and runs in every build.
#include <cstddef>
#include <set>
#include <vector>

#include "cuda/attention/attention_tensor_core_plan.h"
#include "helpers.h"

namespace ember {
namespace {

using namespace cuda;

// The devices the rule is asked about: compute capability, opt-in shared memory per block.
constexpr TensorCoreDevice kTuring{75, 65536};
constexpr TensorCoreDevice kAmpere{80, 166912};      // A100: 163 KiB
constexpr TensorCoreDevice kAmpereGaming{86, 101376};  // 99 KiB
constexpr TensorCoreDevice kHopper{90, 232448};       // H100, H200: 227 KiB

TEST_CASE("the tensor-core head dim pads E and Ev up to 64 or 128 and refuses wider or empty heads") {
  CHECK(tensor_core_head_dim(64, 64) == 64);
  CHECK(tensor_core_head_dim(16, 16) == 64);
  CHECK(tensor_core_head_dim(1, 1) == 64);
  CHECK(tensor_core_head_dim(32, 64) == 64);
  CHECK(tensor_core_head_dim(65, 16) == 128);
  CHECK(tensor_core_head_dim(64, 80) == 128);
  CHECK(tensor_core_head_dim(128, 128) == 128);
  CHECK(tensor_core_head_dim(129, 64) == 0);
  CHECK(tensor_core_head_dim(64, 129) == 0);
  CHECK(tensor_core_head_dim(0, 64) == 0);
  CHECK(tensor_core_head_dim(64, 0) == 0);
}

TEST_CASE("16-bit attention takes tensor cores on compute capability 8.0 and up when its shared memory fits") {
  CHECK(attention_uses_tensor_cores(true, 64, 64, kHopper, true));
  CHECK(attention_uses_tensor_cores(true, 128, 128, kHopper, true));
  CHECK(attention_uses_tensor_cores(true, 80, 128, kHopper, true));
  CHECK(attention_uses_tensor_cores(true, 17, 33, kHopper, true));  // any E, Ev <= 128: zero-padded
  CHECK(attention_uses_tensor_cores(true, 128, 128, kAmpere, true));
  CHECK(attention_uses_tensor_cores(true, 64, 64, kAmpereGaming, true));
  // The head dim 128 backward needs more than 99 KiB.
  CHECK_FALSE(attention_uses_tensor_cores(true, 128, 128, kAmpereGaming, true));
  CHECK_FALSE(attention_uses_tensor_cores(true, 64, 64, kTuring, true));
  CHECK_FALSE(attention_uses_tensor_cores(true, 64, 64, TensorCoreDevice{}, true));  // not asked / no device
  CHECK_FALSE(attention_uses_tensor_cores(false, 64, 64, kHopper, true));            // float32, float64
  CHECK_FALSE(attention_uses_tensor_cores(true, 64, 64, kHopper, false));            // switched off
  CHECK_FALSE(attention_uses_tensor_cores(true, 136, 64, kHopper, true));
  CHECK_FALSE(attention_uses_tensor_cores(true, 64, 200, kHopper, true));
  CHECK_FALSE(attention_uses_tensor_cores(true, 0, 64, kHopper, true));
}

TEST_CASE("EMBER_ATTENTION_TENSOR_CORES=0 switches the tensor-core path off; unset or any other value leaves it on") {
  CHECK(tensor_cores_allowed_by(nullptr));
  CHECK_FALSE(tensor_cores_allowed_by("0"));
  CHECK(tensor_cores_allowed_by("1"));
  CHECK(tensor_cores_allowed_by(""));
  CHECK(tensor_cores_allowed_by("00"));
}

// A buffer of the plan: its offset and the bytes the kernels use of it.
struct Buffer {
  const char* name;
  size_t offset;
  size_t bytes;
};

// Buffers lie in order inside `total` bytes, each starting on 128 bytes (so on 32, as WMMA needs).
void check_buffers(const std::vector<Buffer>& buffers, size_t total) {
  size_t end = 0;
  for (const Buffer& buffer : buffers) {
    CAPTURE(buffer.name);
    CHECK(buffer.offset % kTensorCoreAlignment == 0);
    CHECK(buffer.offset >= end);
    end = buffer.offset + buffer.bytes;
  }
  CHECK(end <= total);
}

// Every fragment the kernels load or store starts at row 16 a and column 16 b of a buffer of
// `pitch` elements of `element_bytes`: 32-byte aligned; ldm a multiple of 8 (16-bit) or 4 (float).
void check_fragments(int rows, int columns, int pitch, size_t element_bytes) {
  CAPTURE(pitch);
  CHECK(pitch >= columns);
  CHECK(pitch % (element_bytes == 2 ? 8 : 4) == 0);
  for (int row = 0; row < rows; row += 16) {
    for (int column = 0; column < columns; column += 16) {
      CHECK((static_cast<size_t>(row) * pitch + column) * element_bytes % 32 == 0);
    }
  }
}

// 8 consecutive 16-byte pieces of rows of a 16-bit tile (what a fragment load reads at once)
// start on different 16-byte bank groups of the 128 bytes banks repeat over.
void check_rows_spread_over_banks(int pitch) {
  std::set<size_t> groups;
  for (int row = 0; row < 8; ++row) groups.insert(static_cast<size_t>(row) * pitch * 2 % 128 / 16);
  CHECK(groups.size() == 8);
}

TEST_CASE("the forward kernel's shared memory: buffers apart, fragments aligned, within an H100 block") {
  for (const int head_dim : {64, 128}) {
    CAPTURE(head_dim);
    const TensorCoreForwardPlan plan = tensor_core_forward_plan(head_dim);
    const int pitch = tensor_core_operand_pitch(head_dim), out_pitch = tensor_core_out_pitch(head_dim);
    const size_t operand = size_t(kTensorCoreTile) * pitch * 2;
    check_buffers({{"q", plan.q, operand},
                   {"k", plan.k, operand},
                   {"v", plan.v, operand},
                   {"scores", plan.scores, size_t(kTensorCoreTile) * kTensorCoreScoresPitch * 4},
                   {"weights", plan.weights, size_t(kTensorCoreTile) * kTensorCoreWeightsPitch * 2},
                   {"out", plan.out, size_t(kTensorCoreTile) * out_pitch * 4}},
                  plan.bytes);
    check_fragments(kTensorCoreTile, head_dim, pitch, 2);
    check_fragments(kTensorCoreTile, kTensorCoreTile, kTensorCoreScoresPitch, 4);
    check_fragments(kTensorCoreTile, kTensorCoreTile, kTensorCoreWeightsPitch, 2);
    check_fragments(kTensorCoreTile, head_dim, out_pitch, 4);
    check_rows_spread_over_banks(pitch);
    check_rows_spread_over_banks(kTensorCoreWeightsPitch);
    // 16-byte vector loads of 8 elements land on 16-byte boundaries of every row.
    CHECK(pitch * 2 % 16 == 0);
    CHECK(head_dim % 16 == 0);
    CHECK(static_cast<int64_t>(plan.bytes) <= kHopper.shared_memory_per_block);
  }
  CHECK(tensor_core_forward_plan(64).bytes == 70 * 1024);
  CHECK(tensor_core_forward_plan(128).bytes == 110 * 1024);
}

TEST_CASE("the backward kernel's shared memory: buffers apart, fragments aligned, within an H100 block") {
  for (const int head_dim : {64, 128}) {
    CAPTURE(head_dim);
    const TensorCoreBackwardPlan plan = tensor_core_backward_plan(head_dim);
    const int pitch = tensor_core_operand_pitch(head_dim);
    const size_t operand = size_t(kTensorCoreTile) * pitch * 2;
    const size_t square_float = size_t(kTensorCoreTile) * kTensorCoreScoresPitch * 4;
    const size_t square_half = size_t(kTensorCoreTile) * kTensorCoreWeightsPitch * 2;
    check_buffers({{"q", plan.q, operand},
                   {"k", plan.k, operand},
                   {"v", plan.v, operand},
                   {"grad_out", plan.grad_out, operand},
                   {"scores", plan.scores, square_float},
                   {"grad_weights", plan.grad_weights, square_float},
                   {"weights", plan.weights, square_half},
                   {"grad_scores", plan.grad_scores, square_half},
                   {"scratch", plan.scratch, size_t(kTensorCoreWarps) * 16 * 16 * 4},
                   {"log_sum_exp", plan.log_sum_exp, size_t(kTensorCoreTile) * 4},
                   {"row_term", plan.row_term, size_t(kTensorCoreTile) * 4}},
                  plan.bytes);
    check_fragments(kTensorCoreTile, head_dim, pitch, 2);
    check_fragments(kTensorCoreTile, kTensorCoreTile, kTensorCoreScoresPitch, 4);
    // dS^T is also read column-major from row 16 a, column 16 b: the same offsets.
    check_fragments(kTensorCoreTile, kTensorCoreTile, kTensorCoreWeightsPitch, 2);
    check_fragments(kTensorCoreWarps * 16, 16, 16, 4);  // the warps' scratch, ldm 16
    CHECK(static_cast<int64_t>(plan.bytes) <= kHopper.shared_memory_per_block);
  }
  CHECK(tensor_core_backward_plan(64).bytes == 92 * 1024 + 512);
  CHECK(tensor_core_backward_plan(128).bytes == 124 * 1024 + 512);
}

}  // namespace
}  // namespace ember
