// The mma.sync path of fused attention (cuda/attention/flash_attention_forward.cuh,
// flash_attention_backward.cuh and flash_attention_grad_q.cuh): its tile shapes, where its tiles
// sit in shared memory, the swizzle that spreads their rows over the banks, and the rules that
// decide when it runs.
//
// Plain C++17, fmt-free and free of CUDA headers: the kernel reads the same plan on the device,
// the launcher applies the same rule, and CPU tests (tests/test_flash_attention_plan.cpp and the
// emulated kernels of tests/cuda_emulation/) check both without a GPU.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/attention/attention_layout.h"

namespace ember::cuda {

// One tile shape: a block takes `queries` rows of q with `warps` warps (each warp a run of
// queries / warps rows, a multiple of 16: one m16 fragment or more), and walks the keys `keys`
// at a time; `stages` key/value tiles are in shared memory at once (2: the next tile's copy
// overlaps this tile's products).
struct FlashTile {
  int queries = 0;
  int keys = 0;
  int warps = 0;
  int stages = 0;
};

EMBER_ATTENTION_HOST_DEVICE constexpr int flash_tile_threads(const FlashTile& tile) { return 32 * tile.warps; }

// Whether the kernel can be compiled for a shape: whole m16 fragments per warp, whole k16 steps
// of keys (P v contracts over the keys 16 at a time), one or two stages.
EMBER_ATTENTION_HOST_DEVICE constexpr bool flash_tile_is_valid(const FlashTile& tile) {
  return tile.warps >= 1 && tile.warps <= 8 && tile.queries % (16 * tile.warps) == 0 && tile.keys % 16 == 0 &&
         tile.keys >= 16 && (tile.stages == 1 || tile.stages == 2);
}

// The shapes the build compiles, per head dim. The first of each is the default; the GPU check
// times them all (bench_cuda_attention, EMBER_ATTENTION_FLASH_TILE) to choose it. Registers per thread decide
// what fits: the output accumulator holds queries / warps x head_dim floats per warp, the scores
// queries / warps x keys.
inline constexpr FlashTile kFlashTiles64[] = {
    {128, 64, 4, 2},  // 32 queries a warp: two fragments share each k and v load
    {64, 64, 4, 2},
    {128, 128, 8, 2},
    {128, 32, 4, 2},
};
inline constexpr FlashTile kFlashTiles128[] = {
    {64, 64, 4, 2},
    {128, 64, 8, 2},
    {128, 32, 4, 2},
    {64, 32, 4, 2},
};
inline constexpr int kFlashTileChoices = 4;

// float32 on TF32 holds its operands' fragments in twice the registers: at head dim 64 the
// 16-bit default (32 queries a warp) spills (ptxas for sm_90: 255 registers, 512 bytes of spill
// stores) where 16 queries a warp do not, so that shape comes first. Head dim 128 keeps the list.
inline constexpr FlashTile kFlashTf32Tiles64[] = {
    {64, 64, 4, 2},
    {128, 64, 4, 2},
    {128, 128, 8, 2},
    {128, 32, 4, 2},
};

// The forward's list for a head dim and element size (bytes: 2, or 4 for TF32); host code (the
// launchers and the rule), as the lists are.
constexpr const FlashTile* flash_forward_tiles(int head_dim, int element_bytes) {
  if (head_dim == 64) return element_bytes == 4 ? kFlashTf32Tiles64 : kFlashTiles64;
  return kFlashTiles128;
}

// The backward's shapes: a block takes `keys` keys (warp w a run of keys / warps of them, whole
// m16 fragments) and walks the queries `queries` at a time (dQ splits them among the warps the same
// way); `stages` q and grad_out tiles in shared memory at once. Registers decide here too: a warp
// keeps dK and dV for its keys (2 x keys / warps x head_dim floats) and the scores and dP of its
// keys against a query tile.
EMBER_ATTENTION_HOST_DEVICE constexpr bool flash_backward_tile_is_valid(const FlashTile& tile) {
  return tile.warps >= 1 && tile.warps <= 8 && tile.keys % (16 * tile.warps) == 0 &&
         tile.queries % (16 * tile.warps) == 0 && tile.queries >= 64 && (tile.stages == 1 || tile.stages == 2);
}

// {queries, keys, warps, stages}, as the forward's.
inline constexpr FlashTile kFlashBackwardTiles64[] = {
    {64, 64, 4, 2},
    {128, 128, 8, 2},
    {64, 128, 4, 2},  // 32 keys a warp: two fragments share each q and dO load
    {64, 64, 4, 1},
};
inline constexpr FlashTile kFlashBackwardTiles128[] = {
    {64, 64, 4, 2},
    {128, 128, 8, 2},
    {128, 64, 4, 2},
    {64, 64, 4, 1},
};

// The backward's list for a head dim (the same for every element size).
constexpr const FlashTile* flash_backward_tiles(int head_dim) {
  return head_dim == 64 ? kFlashBackwardTiles64 : kFlashBackwardTiles128;
}

// How many tiles of each list a build compiles: all of them with EMBER_ATTENTION_TILE_SWEEP (CMake's
// EMBER_CUDA_TILE_SWEEP, for the GPU check's timing table), else the first, the default. Each
// instantiation is a fully unrolled kernel that ptxas takes close to a minute over.
#ifdef EMBER_ATTENTION_TILE_SWEEP
inline constexpr int kFlashCompiledTiles = kFlashTileChoices;
#else
inline constexpr int kFlashCompiledTiles = 1;
#endif

// Whether this build has the kernels (CMake's EMBER_CUDA_FLASH, which defines
// EMBER_WITH_FLASH_ATTENTION); without them the rules below are never asked and 16-bit attention
// runs on the WMMA path.
#ifdef EMBER_WITH_FLASH_ATTENTION
inline constexpr bool kFlashKernelsCompiled = true;
#else
inline constexpr bool kFlashKernelsCompiled = false;
#endif

enum class FlashPass { kForward, kBackward };

// Calls visitor.template run<Queries, Keys, Warps, Stages>() for tile `index` of the list for
// head dim D, the pass and the element size (the kernel's template arguments are compile-time,
// the choice is not): one switch, shared by the launchers (cuda/attention/flash_attention_launch.cuh)
// and the CPU emulation's. Returns false for an index past the list.
template <int D, FlashPass Pass, int ElementBytes = 2, class Visitor>
bool visit_flash_tile(int index, Visitor&& visitor) {
  static_assert(D == 64 || D == 128, "head dims 64 and 128");
  constexpr bool forward = Pass == FlashPass::kForward;
  constexpr const FlashTile* tiles = forward ? flash_forward_tiles(D, ElementBytes) : flash_backward_tiles(D);
  static_assert(kFlashTileChoices == 4, "one case per tile below");
  // Tiles past kFlashCompiledTiles are not instantiated at all (if constexpr).
  switch (index) {
    case 0:
      visitor.template run<tiles[0].queries, tiles[0].keys, tiles[0].warps, tiles[0].stages>();
      return true;
    case 1:
      if constexpr (kFlashCompiledTiles > 1) {
        visitor.template run<tiles[1].queries, tiles[1].keys, tiles[1].warps, tiles[1].stages>();
        return true;
      }
      return false;
    case 2:
      if constexpr (kFlashCompiledTiles > 2) {
        visitor.template run<tiles[2].queries, tiles[2].keys, tiles[2].warps, tiles[2].stages>();
        return true;
      }
      return false;
    case 3:
      if constexpr (kFlashCompiledTiles > 3) {
        visitor.template run<tiles[3].queries, tiles[3].keys, tiles[3].warps, tiles[3].stages>();
        return true;
      }
      return false;
    default:
      return false;
  }
}

// Head dims the kernels are compiled for: E and Ev, multiples of 8, zero-padded up to 64 or 128.
EMBER_ATTENTION_HOST_DEVICE constexpr int flash_head_dim(int64_t embed, int64_t value_embed) {
  if (embed < 8 || value_embed < 8 || embed % 8 != 0 || value_embed % 8 != 0) return 0;
  const int64_t widest = embed > value_embed ? embed : value_embed;
  if (widest > 128) return 0;
  return widest <= 64 ? 64 : 128;
}

// Element index of (row, col) in a tile of rows `width` elements long, stored in 16-byte chunks of
// `chunk` elements (8 of 16 bits, 4 of float32): chunk c of row r is stored at chunk c ^ (r % 8).
// The eight rows an ldmatrix reads at one logical chunk then sit in eight different 16-byte bank
// groups, so it runs without bank conflicts; a row keeps its chunks (width / chunk >= 8 of them),
// only their order changes.
EMBER_ATTENTION_HOST_DEVICE constexpr int flash_swizzled_offset(int row, int col, int width, int chunk = 8) {
  return row * width + (((col / chunk) ^ (row & 7)) * chunk + col % chunk);
}

// Byte offsets of the forward's buffers: the q tile (queries x head_dim), then `stages` k tiles and
// `stages` v tiles (keys x head_dim each), of elements `element_bytes` wide (2, or 4 for float32
// on TF32).
struct FlashForwardPlan {
  size_t q = 0, k = 0, v = 0, bytes = 0;
};

EMBER_ATTENTION_HOST_DEVICE constexpr FlashForwardPlan flash_forward_plan(int head_dim, const FlashTile& tile,
                                                                          int element_bytes) {
  const size_t row = size_t(head_dim) * element_bytes;
  FlashForwardPlan plan;
  plan.q = 0;
  plan.k = plan.q + tile.queries * row;
  plan.v = plan.k + tile.stages * tile.keys * row;
  plan.bytes = plan.v + tile.stages * tile.keys * row;
  return plan;
}

// Byte offsets of the backward's buffers: the block's k and v tiles (keys x head_dim), `stages`
// q and grad_out tiles (queries x head_dim), and dS^T (keys x queries), all swizzled, of elements
// `element_bytes` wide.
struct FlashBackwardPlan {
  size_t k = 0, v = 0, q = 0, grad_out = 0, grad_scores = 0, bytes = 0;
};

EMBER_ATTENTION_HOST_DEVICE constexpr FlashBackwardPlan flash_backward_plan(int head_dim, const FlashTile& tile,
                                                                            int element_bytes) {
  const size_t row = size_t(head_dim) * element_bytes;
  FlashBackwardPlan plan;
  plan.k = 0;
  plan.v = plan.k + tile.keys * row;
  plan.q = plan.v + tile.keys * row;
  plan.grad_out = plan.q + tile.stages * tile.queries * row;
  plan.grad_scores = plan.grad_out + tile.stages * tile.queries * row;
  plan.bytes = plan.grad_scores + size_t(tile.keys) * tile.queries * element_bytes;
  return plan;
}

// The deterministic mode's dQ pass (cuda/attention/flash_attention_grad_q.cuh) has one tile shape
// for both head dims, the forward's {queries, keys, warps, stages}: a warp keeps dQ for its 16
// queries (head_dim / 2 floats a lane) beside the scores and dP of one key tile.
inline constexpr FlashTile kFlashGradQTile{64, 64, 4, 2};

// Byte offsets of the dQ pass's buffers: the q and grad_out tiles (queries x head_dim), then
// `stages` k tiles and `stages` v tiles (keys x head_dim), all swizzled, of elements
// `element_bytes` wide.
struct FlashGradQPlan {
  size_t q = 0, grad_out = 0, k = 0, v = 0, bytes = 0;
};

EMBER_ATTENTION_HOST_DEVICE constexpr FlashGradQPlan flash_grad_q_plan(int head_dim, const FlashTile& tile,
                                                                      int element_bytes) {
  const size_t row = size_t(head_dim) * element_bytes;
  FlashGradQPlan plan;
  plan.q = 0;
  plan.grad_out = plan.q + tile.queries * row;
  plan.k = plan.grad_out + tile.queries * row;
  plan.v = plan.k + tile.stages * tile.keys * row;
  plan.bytes = plan.v + tile.stages * tile.keys * row;
  return plan;
}

// The operands' addresses, which the rule checks for cp.async's 16-byte copies (grad_out: the
// backward's; 0 for the forward).
struct FlashOperands {
  uintptr_t q = 0, k = 0, v = 0, grad_out = 0;
};

// Whether q, k and v can be copied 16 bytes at a time: unit column stride, and every row and
// batch stride and the start 16-byte aligned (8 elements of 16 bits, 4 of float32). Heads split
// off a projection as views are (their strides are multiples of the head dim).
inline bool flash_operands_aligned(const AttentionLayout& layout, const FlashOperands& operands,
                                   int element_bytes) {
  const int chunk = 16 / element_bytes;
  const int operand_of[4] = {kAttentionQ, kAttentionK, kAttentionV, kAttentionGradOut};
  const uintptr_t address_of[4] = {operands.q, operands.k, operands.v, operands.grad_out};
  for (int o = 0; o < (operands.grad_out != 0 ? 4 : 3); ++o) {
    const int operand = operand_of[o];
    if (address_of[o] % 16 != 0 || layout.col_stride[operand] != 1 || layout.row_stride[operand] % chunk != 0) {
      return false;
    }
    for (int d = 0; d < layout.batch_dims; ++d) {
      if (layout.batch_strides[operand][d] % chunk != 0) return false;
    }
  }
  return true;
}

// The bytes of an element the mma.sync kernels take for an element type: 2 for bfloat16 and
// float16; 4 for float32 when the user allows TF32 (set_allow_tf32, as for matrix products: the
// products of q k^T, P v and the backward's then round their operands to 10 fraction bits, the
// softmax and every sum staying float32); 0 otherwise (the kernels do not take it).
inline int flash_element_bytes(int element_size, bool is_floating_16_bit, bool tf32_allowed) {
  if (is_floating_16_bit) return 2;
  if (element_size == 4 && tf32_allowed) return 4;
  return 0;
}

// The rule: an element type flash_element_bytes admits (`element_bytes` 2 or 4); E and Ev
// multiples of 8 up to 128; operands aligned for cp.async; a device of compute capability 8.0 or
// more whose blocks may have the plan's shared memory; the path not switched off
// (EMBER_ATTENTION_FLASH=0). Otherwise the WMMA path or the float32-tile kernel runs
// (attention_uses_tensor_cores). The log-sum-exp it writes is the one the other paths write, so
// any backward can follow it.
inline bool attention_uses_flash_forward(int element_bytes, const AttentionLayout& layout,
                                         const FlashOperands& operands, int compute_capability,
                                         int64_t shared_memory_per_block, const FlashTile& tile, bool allowed) {
  if (!allowed || (element_bytes != 2 && element_bytes != 4) || compute_capability < 80) return false;
  const int head_dim = flash_head_dim(layout.embed, layout.value_embed);
  if (head_dim == 0 || !flash_operands_aligned(layout, operands, element_bytes)) return false;
  return static_cast<int64_t>(flash_forward_plan(head_dim, tile, element_bytes).bytes) <= shared_memory_per_block;
}

// The backward's rule: the forward's, for its own tile and plan, with grad_out aligned too; in the
// deterministic mode the dQ pass's plan must fit as well (where it does not, the WMMA path runs,
// whose dQ is added by atomics: only this path is deterministic).
inline bool attention_uses_flash_backward(int element_bytes, const AttentionLayout& layout,
                                          const FlashOperands& operands, int compute_capability,
                                          int64_t shared_memory_per_block, const FlashTile& tile, bool allowed,
                                          bool deterministic = false) {
  if (!allowed || (element_bytes != 2 && element_bytes != 4) || compute_capability < 80 || operands.grad_out == 0) {
    return false;
  }
  const int head_dim = flash_head_dim(layout.embed, layout.value_embed);
  if (head_dim == 0 || !flash_operands_aligned(layout, operands, element_bytes)) return false;
  const auto grad_q_bytes = static_cast<int64_t>(flash_grad_q_plan(head_dim, kFlashGradQTile, element_bytes).bytes);
  if (deterministic && grad_q_bytes > shared_memory_per_block) return false;
  return static_cast<int64_t>(flash_backward_plan(head_dim, tile, element_bytes).bytes) <= shared_memory_per_block;
}

// Whether the mma.sync kernels may be taken (EMBER_ATTENTION_FLASH: unset or anything but "0"
// allows them), and which tile of each list runs (EMBER_ATTENTION_FLASH_TILE and
// EMBER_ATTENTION_FLASH_BACKWARD_TILE, default 0): read once at the first call, unless set
// since. Defined in cuda/attention/flash_attention_settings.cpp; the setters are for
// benchmarks that compare paths and tiles in one process.
bool attention_flash_allowed();
void set_attention_flash_allowed(bool allowed);
// Whether the backward computes dQ in a pass of its own, each element's sums in a fixed order,
// so that it gives the same bits on every run (EMBER_ATTENTION_DETERMINISTIC: "1" turns it on;
// off by default, since the pass recomputes the scores). Only the mma.sync path has it.
bool attention_deterministic();
void set_attention_deterministic(bool deterministic);

// EMBER_ATTENTION_DETERMINISTIC's value (null when unset) read as the setting: on for any
// non-empty value but "0".
inline bool deterministic_requested_by(const char* environment_value) {
  return environment_value != nullptr && environment_value[0] != '\0' &&
         !(environment_value[0] == '0' && environment_value[1] == '\0');
}
int flash_forward_tile_choice();
void set_flash_forward_tile_choice(int index);
int flash_backward_tile_choice();
void set_flash_backward_tile_choice(int index);

// Allows or forbids the mma.sync kernels, with the given tiles, for the scope's lifetime, then
// restores the settings (for the GPU suites, which run each path in one process).
class AttentionFlashScope {
 public:
  explicit AttentionFlashScope(bool allowed, int forward_tile = 0, int backward_tile = 0)
      : allowed_(attention_flash_allowed()),
        forward_tile_(flash_forward_tile_choice()),
        backward_tile_(flash_backward_tile_choice()) {
    set_attention_flash_allowed(allowed);
    set_flash_forward_tile_choice(forward_tile);
    set_flash_backward_tile_choice(backward_tile);
  }
  ~AttentionFlashScope() {
    set_attention_flash_allowed(allowed_);
    set_flash_forward_tile_choice(forward_tile_);
    set_flash_backward_tile_choice(backward_tile_);
  }
  AttentionFlashScope(const AttentionFlashScope&) = delete;
  AttentionFlashScope& operator=(const AttentionFlashScope&) = delete;

 private:
  bool allowed_;
  int forward_tile_, backward_tile_;
};

// Turns the deterministic mode on or off for the scope's lifetime, then restores the setting.
class AttentionDeterministicScope {
 public:
  explicit AttentionDeterministicScope(bool deterministic) : before_(attention_deterministic()) {
    set_attention_deterministic(deterministic);
  }
  ~AttentionDeterministicScope() { set_attention_deterministic(before_); }
  AttentionDeterministicScope(const AttentionDeterministicScope&) = delete;
  AttentionDeterministicScope& operator=(const AttentionDeterministicScope&) = delete;

 private:
  bool before_;
};

}  // namespace ember::cuda
