// The mma.sync path of fused attention's forward (cuda/attention/flash_attention_forward.cuh): its
// tile shapes, where its tiles sit in shared memory, the swizzle that spreads their rows over the
// banks, and the rule that decides when it runs.
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

// Calls visitor.template run<Queries, Keys, Warps, Stages>() for tile `index` of head dim D's list
// (the kernel's template arguments are compile-time, the choice is not): one switch, shared by the
// launcher (cuda/attention/flash_attention.cu) and the CPU emulation's. Returns false for an index
// past the list.
template <int D, class Visitor>
bool visit_flash_tile(int index, Visitor&& visitor) {
  static_assert(D == 64 || D == 128, "head dims 64 and 128");
  constexpr const FlashTile* tiles = D == 64 ? kFlashTiles64 : kFlashTiles128;
  static_assert(kFlashTileChoices == 4, "one case per tile below");
  switch (index) {
    case 0: visitor.template run<tiles[0].queries, tiles[0].keys, tiles[0].warps, tiles[0].stages>(); return true;
    case 1: visitor.template run<tiles[1].queries, tiles[1].keys, tiles[1].warps, tiles[1].stages>(); return true;
    case 2: visitor.template run<tiles[2].queries, tiles[2].keys, tiles[2].warps, tiles[2].stages>(); return true;
    case 3: visitor.template run<tiles[3].queries, tiles[3].keys, tiles[3].warps, tiles[3].stages>(); return true;
    default: return false;
  }
}

// Head dims the kernels are compiled for: E and Ev, multiples of 8, zero-padded up to 64 or 128.
EMBER_ATTENTION_HOST_DEVICE constexpr int flash_head_dim(int64_t embed, int64_t value_embed) {
  if (embed < 8 || value_embed < 8 || embed % 8 != 0 || value_embed % 8 != 0) return 0;
  const int64_t widest = embed > value_embed ? embed : value_embed;
  if (widest > 128) return 0;
  return widest <= 64 ? 64 : 128;
}

// Element index of (row, col) in a tile of 16-bit rows `head_dim` long, col a multiple of 8 (one
// 16-byte chunk): chunk c of row r is stored at chunk c ^ (r % 8). The eight rows an ldmatrix reads
// at one logical chunk then sit in eight different 16-byte bank groups, so it runs without bank
// conflicts; a row keeps its chunks (head_dim / 8 >= 8 of them), only their order changes.
EMBER_ATTENTION_HOST_DEVICE constexpr int flash_swizzled_offset(int row, int col, int head_dim) {
  return row * head_dim + ((((col >> 3) ^ (row & 7)) << 3) | (col & 7));
}

// Byte offsets of the forward's buffers: the q tile (queries x head_dim), then `stages` k tiles and
// `stages` v tiles (keys x head_dim each), all 16-bit.
struct FlashForwardPlan {
  size_t q = 0, k = 0, v = 0, bytes = 0;
};

EMBER_ATTENTION_HOST_DEVICE constexpr FlashForwardPlan flash_forward_plan(int head_dim, const FlashTile& tile) {
  FlashForwardPlan plan;
  plan.q = 0;
  plan.k = plan.q + size_t(tile.queries) * head_dim * 2;
  plan.v = plan.k + size_t(tile.stages) * tile.keys * head_dim * 2;
  plan.bytes = plan.v + size_t(tile.stages) * tile.keys * head_dim * 2;
  return plan;
}

// The operands' addresses, which the rule checks for cp.async's 16-byte copies.
struct FlashOperands {
  uintptr_t q = 0, k = 0, v = 0;
};

// Whether q, k and v can be copied 16 bytes at a time: unit column stride, and every row and
// batch stride and the start 16-byte aligned (8 elements). Heads split off a projection as views
// are (their strides are multiples of the head dim).
inline bool flash_operands_aligned(const AttentionLayout& layout, const FlashOperands& operands) {
  const int operand_of[3] = {kAttentionQ, kAttentionK, kAttentionV};
  const uintptr_t address_of[3] = {operands.q, operands.k, operands.v};
  for (int o = 0; o < 3; ++o) {
    const int operand = operand_of[o];
    if (address_of[o] % 16 != 0 || layout.col_stride[operand] != 1 || layout.row_stride[operand] % 8 != 0) {
      return false;
    }
    for (int d = 0; d < layout.batch_dims; ++d) {
      if (layout.batch_strides[operand][d] % 8 != 0) return false;
    }
  }
  return true;
}

// The rule: 16-bit operands; E and Ev multiples of 8 up to 128; operands aligned for cp.async; a
// device of compute capability 8.0 or more whose blocks may have the plan's shared memory; the
// path not switched off (EMBER_ATTENTION_FLASH=0). Otherwise the WMMA path or the float32-tile
// kernel runs (attention_uses_tensor_cores). The log-sum-exp it writes is the one the other
// paths write, so any backward can follow it.
inline bool attention_uses_flash_forward(bool sixteen_bit, const AttentionLayout& layout,
                                         const FlashOperands& operands, int compute_capability,
                                         int64_t shared_memory_per_block, const FlashTile& tile, bool allowed) {
  if (!allowed || !sixteen_bit || compute_capability < 80) return false;
  const int head_dim = flash_head_dim(layout.embed, layout.value_embed);
  if (head_dim == 0 || !flash_operands_aligned(layout, operands)) return false;
  return static_cast<int64_t>(flash_forward_plan(head_dim, tile).bytes) <= shared_memory_per_block;
}

// Whether the mma.sync forward may be taken (EMBER_ATTENTION_FLASH: unset or anything but "0"
// allows it), and which tile of its list runs (EMBER_ATTENTION_FLASH_TILE, default 0): read once
// at the first call, unless set since. Defined with the launcher (cuda/attention/flash_attention.cu);
// the setters are for benchmarks that compare paths and tiles in one process.
bool attention_flash_allowed();
void set_attention_flash_allowed(bool allowed);
int flash_forward_tile_choice();
void set_flash_forward_tile_choice(int index);

}  // namespace ember::cuda
