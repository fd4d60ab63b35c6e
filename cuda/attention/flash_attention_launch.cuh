// The launchers of the mma.sync kernels (cuda/attention/flash_attention_forward.cuh,
// flash_attention_backward.cuh and flash_attention_grad_q.cuh): which of the compiled tile shapes
// runs, the grid and the shared memory. Instantiated one element type per file
// (flash_attention_bf16.cu, _f16.cu, _tf32.cu), so that a build compiles the types' kernels in
// parallel; compiled only with CMake's EMBER_CUDA_FLASH (cuda/CMakeLists.txt says why).
#pragma once

#include "cuda/attention/attention_device.cuh"
#include "cuda/attention/flash_attention_backward.cuh"
#include "cuda/attention/flash_attention_forward.cuh"
#include "cuda/attention/flash_attention_grad_q.cuh"
#include "cuda/runtime/stream.h"

namespace ember::cuda {
namespace flash_launch {

// One kernel over a grid of `blocks` tiles by the matrices, with the tile's threads and `shared`
// bytes of shared memory.
template <class T, class Kernel>
void launch_tiles(Kernel kernel, const FlashTile& tile, size_t shared, int64_t blocks, const AttentionLayout& layout,
                  const AttentionPointers<T>& args, const char* op) {
  allow_shared_memory(kernel, shared, op);
  const dim3 grid(static_cast<unsigned int>(blocks), attention_matrix_blocks(layout.matrices), 1);
  kernel<<<grid, flash_tile_threads(tile), shared, current_stream()>>>(layout, args);
  check_launch(op);
}

// The kernel of one pass for the tile visit_flash_tile chose: the forward over query tiles, the
// backward over key blocks.
template <class T, int D, FlashPass Pass>
struct TileLaunch {
  const AttentionLayout& layout;
  const AttentionPointers<T>& args;

  template <int Queries, int Keys, int Warps, int Stages>
  void run() const {
    constexpr FlashTile tile{Queries, Keys, Warps, Stages};
    if constexpr (Pass == FlashPass::kForward) {
      launch_tiles(flash_attention_forward<T, D, Queries, Keys, Warps, Stages>, tile,
                   flash_forward_plan(D, tile, sizeof(T)).bytes, (layout.target_length + Queries - 1) / Queries,
                   layout, args, "attention");
    } else {
      launch_tiles(flash_attention_backward<T, D, Queries, Keys, Warps, Stages>, tile,
                   flash_backward_plan(D, tile, sizeof(T)).bytes, (layout.source_length + Keys - 1) / Keys, layout,
                   args, "attention_backward");
    }
  }
};

// The deterministic mode's dQ pass, over query tiles (its one tile shape).
template <class T, int D>
void launch_grad_q_pass(const AttentionLayout& layout, const AttentionPointers<T>& args) {
  constexpr FlashTile tile = kFlashGradQTile;
  launch_tiles(flash_attention_grad_q<T, D, tile.queries, tile.keys, tile.warps, tile.stages>, tile,
               flash_grad_q_plan(D, tile, sizeof(T)).bytes,
               (layout.target_length + tile.queries - 1) / tile.queries, layout, args, "attention_backward");
}

template <class T, int D>
void launch_backward(const AttentionLayout& layout, const AttentionPointers<T>& args) {
  if (!attention_deterministic() || args.grad_q == nullptr) {
    visit_flash_tile<D, FlashPass::kBackward, sizeof(T)>(flash_backward_tile_choice(),
                                              TileLaunch<T, D, FlashPass::kBackward>{layout, args});
    return;
  }
  // Deterministic: dK and dV by the backward without its atomic dQ, then dQ in its own pass.
  AttentionPointers<T> keys_and_values = args;
  keys_and_values.grad_q = nullptr;
  if (keys_and_values.grad_k != nullptr || keys_and_values.grad_v != nullptr) {
    visit_flash_tile<D, FlashPass::kBackward, sizeof(T)>(flash_backward_tile_choice(),
                                              TileLaunch<T, D, FlashPass::kBackward>{layout, keys_and_values});
  }
  launch_grad_q_pass<T, D>(layout, args);
}

}  // namespace flash_launch

template <class T>
void launch_attention_forward_flash(const AttentionLayout& layout, const AttentionPointers<T>& args) {
  if (flash_head_dim(layout.embed, layout.value_embed) == 64) {
    visit_flash_tile<64, FlashPass::kForward, sizeof(T)>(flash_forward_tile_choice(),
                                              flash_launch::TileLaunch<T, 64, FlashPass::kForward>{layout, args});
  } else {
    visit_flash_tile<128, FlashPass::kForward, sizeof(T)>(flash_forward_tile_choice(),
                                               flash_launch::TileLaunch<T, 128, FlashPass::kForward>{layout, args});
  }
}

template <class T>
void launch_attention_backward_flash(const AttentionLayout& layout, const AttentionPointers<T>& args) {
  if (flash_head_dim(layout.embed, layout.value_embed) == 64) {
    flash_launch::launch_backward<T, 64>(layout, args);
  } else {
    flash_launch::launch_backward<T, 128>(layout, args);
  }
}

// The explicit instantiations of one element type's launchers (in its own file).
#define EMBER_INSTANTIATE_FLASH_ATTENTION(T)                                                            \
  template void launch_attention_forward_flash<T>(const AttentionLayout&, const AttentionPointers<T>&); \
  template void launch_attention_backward_flash<T>(const AttentionLayout&, const AttentionPointers<T>&);

}  // namespace ember::cuda
