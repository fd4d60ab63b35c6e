// The plan of the mma.sync attention forward (cuda/attention/flash_attention_plan.h), on the CPU:
// the tile shapes compile to whole fragments, the swizzle keeps each row's chunks and spreads an
// ldmatrix's eight rows over eight bank groups, the buffers fit and do not overlap, and the rule
// takes the path only where cp.async can copy the operands.
#include <doctest/doctest.h>

#include <algorithm>
#include <iterator>

#include <set>

#include "cuda/attention/flash_attention_plan.h"

namespace {

using namespace ember::cuda;

AttentionLayout contiguous_layout(int64_t L, int64_t S, int64_t E, int64_t Ev) {
  AttentionLayout layout;
  layout.target_length = L;
  layout.source_length = S;
  layout.embed = E;
  layout.value_embed = Ev;
  layout.matrices = 4;
  layout.batch_dims = 1;
  layout.batch_sizes[0] = 4;
  const int64_t rows[] = {L, S, S, L, L, L, L, S, S};
  const int64_t cols[] = {E, E, Ev, Ev, S, Ev, E, E, Ev};
  for (int operand = 0; operand < kAttentionOperands; ++operand) {
    layout.batch_strides[operand][0] = rows[operand] * cols[operand];
    layout.row_stride[operand] = cols[operand];
    layout.col_stride[operand] = 1;
  }
  return layout;
}

TEST_CASE("every compiled tile shape, forward and backward, is whole fragments and fits an H100's shared memory") {
  for (const auto* tiles : {kFlashTiles64, kFlashTiles128}) {
    const int head_dim = tiles == kFlashTiles64 ? 64 : 128;
    for (int t = 0; t < kFlashTileChoices; ++t) {
      const FlashTile tile = tiles[t];
      CAPTURE(head_dim);
      CAPTURE(t);
      CHECK(flash_tile_is_valid(tile));
      const FlashForwardPlan plan = flash_forward_plan(head_dim, tile, 2);
      CHECK(plan.k == size_t(tile.queries) * head_dim * 2);
      CHECK(plan.v - plan.k == size_t(tile.stages) * tile.keys * head_dim * 2);
      CHECK(plan.bytes - plan.v == plan.v - plan.k);
      CHECK(plan.k % 128 == 0);
      CHECK(plan.v % 128 == 0);
      CHECK(plan.bytes <= 227 * 1024);  // an H100's or H200's opt-in limit per block
    }
  }
  for (const auto* tiles : {kFlashBackwardTiles64, kFlashBackwardTiles128}) {
    const int head_dim = tiles == kFlashBackwardTiles64 ? 64 : 128;
    for (int t = 0; t < kFlashTileChoices; ++t) {
      const FlashTile tile = tiles[t];
      CAPTURE(head_dim);
      CAPTURE(t);
      CHECK(flash_backward_tile_is_valid(tile));
      const FlashBackwardPlan plan = flash_backward_plan(head_dim, tile, 2);
      CHECK(plan.v == size_t(tile.keys) * head_dim * 2);
      CHECK(plan.q == 2 * plan.v);
      CHECK(plan.grad_out - plan.q == size_t(tile.stages) * tile.queries * head_dim * 2);
      CHECK(plan.grad_scores - plan.grad_out == plan.grad_out - plan.q);
      CHECK(plan.bytes - plan.grad_scores == size_t(tile.keys) * tile.queries * 2);
      CHECK(plan.bytes <= 227 * 1024);
    }
  }
  // The deterministic mode's dQ pass: q and dO, then the forward's k and v stages.
  CHECK(flash_tile_is_valid(kFlashGradQTile));
  for (const int head_dim : {64, 128}) {
    const FlashGradQPlan plan = flash_grad_q_plan(head_dim, kFlashGradQTile, 2);
    CHECK(plan.grad_out == size_t(kFlashGradQTile.queries) * head_dim * 2);
    CHECK(plan.k == 2 * plan.grad_out);
    CHECK(plan.v - plan.k == size_t(kFlashGradQTile.stages) * kFlashGradQTile.keys * head_dim * 2);
    CHECK(plan.bytes - plan.v == plan.v - plan.k);
    CHECK(plan.bytes <= 227 * 1024);
  }
  CHECK_FALSE(flash_backward_tile_is_valid({64, 128, 8, 2}));  // 8 queries a warp for dQ
  CHECK_FALSE(flash_backward_tile_is_valid({32, 64, 2, 2}));   // dS^T rows too short to swizzle
  CHECK_FALSE(flash_tile_is_valid({48, 64, 4, 2}));  // 12 queries a warp
  CHECK_FALSE(flash_tile_is_valid({64, 40, 4, 2}));  // keys not a multiple of 16
  CHECK_FALSE(flash_tile_is_valid({64, 64, 4, 3}));  // three stages
}

TEST_CASE("the swizzle keeps a row's chunks and spreads eight rows over eight bank groups") {
  for (const int head_dim : {64, 128}) {
    for (int row = 0; row < 64; ++row) {
      std::set<int> offsets;
      for (int col = 0; col < head_dim; ++col) {
        const int at = flash_swizzled_offset(row, col, head_dim);
        CHECK(at / head_dim == row);
        if (col % 8 != 0) CHECK(at == flash_swizzled_offset(row, col - col % 8, head_dim) + col % 8);
        offsets.insert(at);
      }
      CHECK(offsets.size() == size_t(head_dim));
    }
    // ldmatrix reads rows r .. r + 7 at one logical chunk: eight distinct 16-byte slots modulo 128
    // bytes (the banks' width), so no two rows share a bank.
    for (int row0 = 0; row0 < 64; row0 += 8) {
      for (int col = 0; col < head_dim; col += 8) {
        std::set<int> bank_groups;
        for (int r = row0; r < row0 + 8; ++r)
          bank_groups.insert((flash_swizzled_offset(r, col, head_dim) * 2 / 16) % 8);
        CHECK(bank_groups.size() == 8);
      }
    }
  }
}

TEST_CASE("the rule: 16-bit, head dims multiples of 8 up to 128, operands cp.async can copy") {
  // Which element types the kernels take: 16-bit always, float32 only on TF32 when allowed.
  CHECK(flash_element_bytes(2, true, false) == 2);
  CHECK(flash_element_bytes(4, false, true) == 4);
  CHECK(flash_element_bytes(4, false, false) == 0);
  CHECK(flash_element_bytes(8, false, true) == 0);  // float64 never
  const FlashTile tile = kFlashTiles64[0];
  const FlashOperands aligned{0x1000, 0x2000, 0x3000};
  const int64_t h100 = 227 * 1024;
  const AttentionLayout layout = contiguous_layout(100, 90, 64, 64);
  CHECK(attention_uses_flash_forward(2, layout, aligned, 90, h100, tile, true));
  CHECK_FALSE(attention_uses_flash_forward(0, layout, aligned, 90, h100, tile, true));  // float32 without TF32
  CHECK_FALSE(attention_uses_flash_forward(2, layout, aligned, 75, h100, tile, true));   // before sm_80
  CHECK_FALSE(attention_uses_flash_forward(2, layout, aligned, 90, h100, tile, false));  // switched off
  CHECK_FALSE(attention_uses_flash_forward(2, layout, aligned, 90, 32 * 1024, tile, true));
  CHECK_FALSE(attention_uses_flash_forward(2, layout, {0x1008, 0x2000, 0x3000}, 90, h100, tile, true));
  // The backward checks grad_out too, against its own tile's plan.
  const FlashTile backward_tile = kFlashBackwardTiles64[0];
  CHECK(attention_uses_flash_backward(2, layout, {0x1000, 0x2000, 0x3000, 0x4000}, 90, h100, backward_tile, true));
  CHECK_FALSE(
      attention_uses_flash_backward(2, layout, {0x1000, 0x2000, 0x3000, 0x4004}, 90, h100, backward_tile, true));
  CHECK_FALSE(attention_uses_flash_backward(2, layout, aligned, 90, h100, backward_tile, true));  // no grad_out
  CHECK_FALSE(
      attention_uses_flash_backward(2, layout, {0x1000, 0x2000, 0x3000, 0x4000}, 90, 40 * 1024, backward_tile, true));
  // Deterministic, the dQ pass's plan must fit too: at head dim 128 a one-stage backward tile
  // (72 KB) fits in 80 KB where the dQ pass (96 KB) does not.
  const AttentionLayout wide = contiguous_layout(100, 90, 128, 128);
  const FlashOperands with_grad_out{0x1000, 0x2000, 0x3000, 0x4000};
  const FlashTile one_stage{64, 64, 4, 1};
  CHECK(flash_backward_plan(128, one_stage, 2).bytes == 72 * 1024);
  CHECK(flash_grad_q_plan(128, kFlashGradQTile, 2).bytes == 96 * 1024);
  CHECK(attention_uses_flash_backward(2, wide, with_grad_out, 90, 80 * 1024, one_stage, true, false));
  CHECK_FALSE(attention_uses_flash_backward(2, wide, with_grad_out, 90, 80 * 1024, one_stage, true, true));
  CHECK(attention_uses_flash_backward(2, wide, with_grad_out, 90, h100, one_stage, true, true));

  CHECK(flash_head_dim(64, 64) == 64);
  CHECK(flash_head_dim(40, 24) == 64);
  CHECK(flash_head_dim(72, 64) == 128);
  CHECK(flash_head_dim(128, 128) == 128);
  CHECK(flash_head_dim(136, 128) == 0);
  CHECK(flash_head_dim(60, 64) == 0);  // not whole 16-byte chunks

  AttentionLayout strided = layout;
  strided.col_stride[kAttentionK] = 2;
  CHECK_FALSE(flash_operands_aligned(strided, aligned, 2));
  strided = layout;
  strided.row_stride[kAttentionV] = 68;
  CHECK_FALSE(flash_operands_aligned(strided, aligned, 2));
  strided = layout;
  strided.batch_strides[kAttentionQ][0] = 100 * 64 + 4;
  CHECK_FALSE(flash_operands_aligned(strided, aligned, 2));
  // Heads split off [B, L, H * E] as views: row stride H * E, head stride E.
  AttentionLayout heads = layout;
  heads.batch_dims = 2;
  heads.batch_sizes[0] = 2;
  heads.batch_sizes[1] = 2;
  for (const int operand : {int(kAttentionQ), int(kAttentionK), int(kAttentionV)}) {
    heads.batch_strides[operand][0] = 100 * 2 * 64;
    heads.batch_strides[operand][1] = 64;
    heads.row_stride[operand] = 2 * 64;
  }
  CHECK(flash_operands_aligned(heads, aligned, 2));
}

TEST_CASE("float32 on TF32: plans of 4-byte elements, the swizzle by 4-element chunks, the rule") {
  // Twice the bytes of the 16-bit plans, element for element.
  for (const int head_dim : {64, 128}) {
    for (const FlashTile& tile : kFlashTiles64) {
      CHECK(flash_forward_plan(head_dim, tile, 4).bytes == 2 * flash_forward_plan(head_dim, tile, 2).bytes);
      CHECK(flash_grad_q_plan(head_dim, tile, 4).bytes == 2 * flash_grad_q_plan(head_dim, tile, 2).bytes);
    }
    for (const FlashTile& tile : kFlashBackwardTiles64) {
      CHECK(flash_backward_plan(head_dim, tile, 4).bytes == 2 * flash_backward_plan(head_dim, tile, 2).bytes);
    }
  }
  // The TF32 list at head dim 64 holds the 16-bit list's shapes, 16 queries a warp first; the
  // other lists are the 16-bit ones.
  CHECK(flash_forward_tiles(64, 4)[0].queries == 64);
  CHECK(flash_forward_tiles(64, 4)[0].warps == 4);
  CHECK(flash_forward_tiles(64, 2) == kFlashTiles64);
  CHECK(flash_forward_tiles(128, 4) == kFlashTiles128);
  CHECK(flash_backward_tiles(64) == kFlashBackwardTiles64);
  for (const FlashTile& tile : kFlashTf32Tiles64) {
    CHECK(flash_tile_is_valid(tile));
    CHECK(std::any_of(std::begin(kFlashTiles64), std::end(kFlashTiles64), [&](const FlashTile& other) {
      return other.queries == tile.queries && other.keys == tile.keys && other.warps == tile.warps &&
             other.stages == tile.stages;
    }));
  }
  // The default tiles fit an H100's 227 KB at both head dims, the largest the backward at 128:
  // k, v 32 KB each, two stages of q and dO 128 KB, dS^T 16 KB.
  const int64_t h100 = 227 * 1024;
  CHECK(flash_backward_plan(128, kFlashBackwardTiles128[0], 4).bytes == 208 * 1024);
  CHECK(int64_t(flash_forward_plan(128, kFlashTiles128[0], 4).bytes) <= h100);
  CHECK(int64_t(flash_grad_q_plan(128, kFlashGradQTile, 4).bytes) <= h100);
  // A row of 64 floats is 16 chunks of 4: each row keeps its chunks, and the eight rows an ldmatrix
  // reads at one logical chunk sit in eight bank groups.
  for (int row = 0; row < 16; ++row) {
    std::set<int> offsets;
    for (int col = 0; col < 64; ++col) {
      const int at = flash_swizzled_offset(row, col, 64, 4);
      CHECK(at / 64 == row);
      CHECK(at % 4 == col % 4);
      offsets.insert(at);
    }
    CHECK(offsets.size() == 64);
  }
  for (int col = 0; col < 64; col += 4) {
    std::set<int> bank_groups;
    for (int r = 0; r < 8; ++r) bank_groups.insert((flash_swizzled_offset(r, col, 64, 4) * 4 / 16) % 8);
    CHECK(bank_groups.size() == 8);
  }
  // The rule with 4-byte elements: 16-byte alignment is 4 elements, and the larger plans must fit.
  const AttentionLayout layout = contiguous_layout(100, 90, 64, 64);
  const FlashOperands aligned{0x1000, 0x2000, 0x3000, 0x4000};
  CHECK(attention_uses_flash_forward(4, layout, aligned, 90, h100, kFlashTiles64[0], true));
  CHECK(attention_uses_flash_backward(4, layout, aligned, 90, h100, kFlashBackwardTiles64[0], true, true));
  CHECK_FALSE(attention_uses_flash_forward(4, layout, aligned, 90, 64 * 1024, kFlashTiles64[0], true));  // 96 KB
  CHECK_FALSE(attention_uses_flash_forward(3, layout, aligned, 90, h100, kFlashTiles64[0], true));
  AttentionLayout four = layout;
  four.row_stride[kAttentionV] = 68;  // 272 bytes: whole 16-byte chunks of float32, not of 16-bit
  CHECK(flash_operands_aligned(four, aligned, 4));
  CHECK_FALSE(flash_operands_aligned(four, aligned, 2));
}

TEST_CASE("EMBER_ATTENTION_DETERMINISTIC: on for any value but 0 or empty, off when unset") {
  CHECK_FALSE(deterministic_requested_by(nullptr));
  CHECK_FALSE(deterministic_requested_by(""));
  CHECK_FALSE(deterministic_requested_by("0"));
  CHECK(deterministic_requested_by("1"));
  CHECK(deterministic_requested_by("yes"));
  CHECK(deterministic_requested_by("00"));
}

}  // namespace
