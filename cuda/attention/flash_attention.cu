// The launchers of the mma.sync kernels (cuda/attention/flash_attention_forward.cuh and
// flash_attention_backward.cuh): which of the compiled tile shapes runs, the grid and the shared
// memory. Compiled only with CMake's EMBER_CUDA_FLASH (cuda/CMakeLists.txt says why).
#include "cuda/attention/attention_device.cuh"
#include "cuda/attention/flash_attention_backward.cuh"
#include "cuda/attention/flash_attention_forward.cuh"
#include "cuda/runtime/stream.h"

namespace ember::cuda {
namespace {

template <class T, int D>
struct ForwardLaunch {
  const AttentionLayout& layout;
  const AttentionPointers<T>& args;

  template <int Queries, int Keys, int Warps, int Stages>
  void run() const {
    constexpr FlashTile tile{Queries, Keys, Warps, Stages};
    constexpr size_t shared = flash_forward_plan(D, tile).bytes;
    const auto kernel = flash_attention_forward<T, D, Queries, Keys, Warps, Stages>;
    allow_shared_memory(kernel, shared, "attention");
    const dim3 grid(static_cast<unsigned int>((layout.target_length + Queries - 1) / Queries),
                    attention_matrix_blocks(layout.matrices), 1);
    kernel<<<grid, flash_tile_threads(tile), shared, current_stream()>>>(layout, args);
    check_launch("attention");
  }
};

template <class T, int D>
struct BackwardLaunch {
  const AttentionLayout& layout;
  const AttentionPointers<T>& args;

  template <int Queries, int Keys, int Warps, int Stages>
  void run() const {
    constexpr FlashTile tile{Queries, Keys, Warps, Stages};
    constexpr size_t shared = flash_backward_plan(D, tile).bytes;
    const auto kernel = flash_attention_backward<T, D, Queries, Keys, Warps, Stages>;
    allow_shared_memory(kernel, shared, "attention_backward");
    const dim3 grid(static_cast<unsigned int>((layout.source_length + Keys - 1) / Keys),
                    attention_matrix_blocks(layout.matrices), 1);
    kernel<<<grid, flash_tile_threads(tile), shared, current_stream()>>>(layout, args);
    check_launch("attention_backward");
  }
};

}  // namespace

template <class T>
void launch_attention_forward_flash(const AttentionLayout& layout, const AttentionPointers<T>& args) {
  if (flash_head_dim(layout.embed, layout.value_embed) == 64) {
    visit_flash_tile<64, FlashPass::kForward>(flash_forward_tile_choice(), ForwardLaunch<T, 64>{layout, args});
  } else {
    visit_flash_tile<128, FlashPass::kForward>(flash_forward_tile_choice(), ForwardLaunch<T, 128>{layout, args});
  }
}

template <class T>
void launch_attention_backward_flash(const AttentionLayout& layout, const AttentionPointers<T>& args) {
  if (flash_head_dim(layout.embed, layout.value_embed) == 64) {
    visit_flash_tile<64, FlashPass::kBackward>(flash_backward_tile_choice(), BackwardLaunch<T, 64>{layout, args});
  } else {
    visit_flash_tile<128, FlashPass::kBackward>(flash_backward_tile_choice(), BackwardLaunch<T, 128>{layout, args});
  }
}

#define EMBER_INSTANTIATE(T)                                                                            \
  template void launch_attention_forward_flash<T>(const AttentionLayout&, const AttentionPointers<T>&); \
  template void launch_attention_backward_flash<T>(const AttentionLayout&, const AttentionPointers<T>&);
EMBER_INSTANTIATE(__nv_bfloat16)
EMBER_INSTANTIATE(__half)
#undef EMBER_INSTANTIATE

}  // namespace ember::cuda
