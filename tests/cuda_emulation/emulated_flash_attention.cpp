// cuda/attention/flash_attention_forward.cuh compiled as C++ against the CPU emulation, and
// launched as cuda/attention/flash_attention.cu launches it.
#include "tests/cuda_emulation/cuda_emulation.h"
// The emulation first: the kernel's headers then see its keywords, built-ins and 16-bit types.
#include "cuda/attention/flash_attention_forward.cuh"
#include "tests/cuda_emulation/emulated_kernels.h"

#include <fmt/format.h>

#include <stdexcept>

namespace ember::cuda_emulation {
namespace {

template <class T>
cuda::AttentionPointers<T> pointers_of(const AttentionCall& call) {
  cuda::AttentionPointers<T> args;
  args.q = static_cast<const T*>(call.q);
  args.k = static_cast<const T*>(call.k);
  args.v = static_cast<const T*>(call.v);
  args.out = static_cast<T*>(call.out);
  args.allowed = call.allowed;
  args.added = static_cast<const T*>(call.added);
  args.is_causal = call.is_causal;
  args.scale = call.scale;
  args.dropout_p = call.dropout_p;
  args.dropout_keep_scale = call.dropout_keep_scale;
  args.dropout_state = call.dropout_state;
  args.log_sum_exp = call.log_sum_exp;
  return args;
}

// Launches the kernel for one tile as cuda/attention/flash_attention.cu does.
template <class T, int D>
struct TileLaunch {
  const cuda::AttentionLayout& layout;
  const AttentionCall& call;
  uint64_t seed;
  unsigned int matrix_blocks;

  template <int Queries, int Keys, int Warps, int Stages>
  void run() const {
    constexpr cuda::FlashTile tile{Queries, Keys, Warps, Stages};
    const cuda::AttentionPointers<T> args = pointers_of<T>(call);
    const dim3 grid(static_cast<unsigned int>((layout.target_length + Queries - 1) / Queries), matrix_blocks, 1);
    launch(grid, dim3(cuda::flash_tile_threads(tile)), cuda::flash_forward_plan(D, tile).bytes,
           [&] { cuda::flash_attention_forward<T, D, Queries, Keys, Warps, Stages>(layout, args); }, seed);
  }
};

template <class T, int D>
void run_head_dim(int tile_index, const cuda::AttentionLayout& layout, const AttentionCall& call, uint64_t seed,
                  unsigned int matrix_blocks) {
  if (!cuda::visit_flash_tile<D>(tile_index, TileLaunch<T, D>{layout, call, seed, matrix_blocks})) {
    throw std::runtime_error(fmt::format("no flash attention tile {}", tile_index));
  }
}

}  // namespace

void run_flash_attention_forward(bool float16, int head_dim, int tile_index, const cuda::AttentionLayout& layout,
                                 const AttentionCall& call, uint64_t interleaving_seed, unsigned int matrix_blocks) {
  if (head_dim != 64 && head_dim != 128) throw std::runtime_error("head dim 64 or 128");
  if (float16) {
    if (head_dim == 64) run_head_dim<__half, 64>(tile_index, layout, call, interleaving_seed, matrix_blocks);
    else run_head_dim<__half, 128>(tile_index, layout, call, interleaving_seed, matrix_blocks);
  } else {
    if (head_dim == 64) run_head_dim<__nv_bfloat16, 64>(tile_index, layout, call, interleaving_seed, matrix_blocks);
    else run_head_dim<__nv_bfloat16, 128>(tile_index, layout, call, interleaving_seed, matrix_blocks);
  }
}

}  // namespace ember::cuda_emulation
