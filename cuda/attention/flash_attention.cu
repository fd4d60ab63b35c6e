// The launcher of the mma.sync forward (cuda/attention/flash_attention_forward.cuh): which of the
// compiled tile shapes runs, its grid and shared memory, and the switches the launcher in
// cuda/attention/attention.cu reads (flash_attention_plan.h declares them).
#include <atomic>
#include <cstdlib>

#include "cuda/attention/attention_device.cuh"
#include "cuda/attention/attention_tensor_core_plan.h"
#include "cuda/attention/flash_attention_forward.cuh"
#include "cuda/runtime/stream.h"

namespace ember::cuda {
namespace {

std::atomic<bool>& flash_setting() {
  static std::atomic<bool> allowed(tensor_cores_allowed_by(std::getenv("EMBER_ATTENTION_FLASH")));
  return allowed;
}

std::atomic<int>& tile_setting() {
  static std::atomic<int> choice([] {
    const char* value = std::getenv("EMBER_ATTENTION_FLASH_TILE");
    const int index = value == nullptr ? 0 : std::atoi(value);
    return index >= 0 && index < kFlashTileChoices ? index : 0;
  }());
  return choice;
}

template <class T, int D>
struct TileLaunch {
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

}  // namespace

bool attention_flash_allowed() { return flash_setting().load(); }
void set_attention_flash_allowed(bool allowed) { flash_setting().store(allowed); }
int flash_forward_tile_choice() { return tile_setting().load(); }
void set_flash_forward_tile_choice(int index) {
  tile_setting().store(index >= 0 && index < kFlashTileChoices ? index : 0);
}

template <class T>
void launch_attention_forward_flash(const AttentionLayout& layout, const AttentionPointers<T>& args) {
  if (flash_head_dim(layout.embed, layout.value_embed) == 64) {
    visit_flash_tile<64>(flash_forward_tile_choice(), TileLaunch<T, 64>{layout, args});
  } else {
    visit_flash_tile<128>(flash_forward_tile_choice(), TileLaunch<T, 128>{layout, args});
  }
}

template void launch_attention_forward_flash<__nv_bfloat16>(const AttentionLayout&,
                                                            const AttentionPointers<__nv_bfloat16>&);
template void launch_attention_forward_flash<__half>(const AttentionLayout&, const AttentionPointers<__half>&);

}  // namespace ember::cuda
