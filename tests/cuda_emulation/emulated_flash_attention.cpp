// cuda/attention/flash_attention_forward.cuh, flash_attention_backward.cuh and
// flash_attention_grad_q.cuh compiled as C++ against the CPU emulation, and launched as
// cuda/attention/flash_attention_launch.cuh launches them.
// Every tile shape of the lists, as the GPU check's build compiles them (the emulation's g++ build
// of them takes seconds).
#define EMBER_ATTENTION_TILE_SWEEP 1
#include "tests/cuda_emulation/cuda_emulation.h"
// The emulation first: the kernel's headers then see its keywords, built-ins and 16-bit types.
#include <fmt/format.h>

#include <stdexcept>

#include "cuda/attention/flash_attention_backward.cuh"
#include "cuda/attention/flash_attention_forward.cuh"
#include "cuda/attention/flash_attention_grad_q.cuh"
#include "tests/cuda_emulation/emulated_kernels.h"

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
  args.grad_out = static_cast<const T*>(call.grad_out);
  args.grad_q = call.grad_q;
  args.grad_k = static_cast<T*>(call.grad_k);
  args.grad_v = static_cast<T*>(call.grad_v);
  args.out_dot_grad = call.out_dot_grad;
  return args;
}

// Launches the kernel of one pass for one tile as cuda/attention/flash_attention_launch.cuh does.
template <class T, int D, cuda::FlashPass Pass>
struct TileLaunch {
  const cuda::AttentionLayout& layout;
  const AttentionCall& call;
  uint64_t seed;
  unsigned int matrix_blocks;

  template <int Queries, int Keys, int Warps, int Stages>
  void run() const {
    constexpr cuda::FlashTile tile{Queries, Keys, Warps, Stages};
    const cuda::AttentionPointers<T> args = pointers_of<T>(call);
    if constexpr (Pass == cuda::FlashPass::kForward) {
      const dim3 grid(static_cast<unsigned int>((layout.target_length + Queries - 1) / Queries), matrix_blocks, 1);
      launch(
          grid, dim3(cuda::flash_tile_threads(tile)), cuda::flash_forward_plan(D, tile, sizeof(T)).bytes,
          [&] { cuda::flash_attention_forward<T, D, Queries, Keys, Warps, Stages>(layout, args); }, seed);
    } else {
      const dim3 grid(static_cast<unsigned int>((layout.source_length + Keys - 1) / Keys), matrix_blocks, 1);
      launch(
          grid, dim3(cuda::flash_tile_threads(tile)), cuda::flash_backward_plan(D, tile, sizeof(T)).bytes,
          [&] { cuda::flash_attention_backward<T, D, Queries, Keys, Warps, Stages>(layout, args); }, seed);
    }
  }
};

template <cuda::FlashPass Pass, class T, int D>
void run_head_dim(int tile_index, const cuda::AttentionLayout& layout, const AttentionCall& call, uint64_t seed,
                  unsigned int matrix_blocks) {
  const TileLaunch<T, D, Pass> launch_tile{layout, call, seed, matrix_blocks};
  if (!cuda::visit_flash_tile<D, Pass, sizeof(T)>(tile_index, launch_tile)) {
    throw std::runtime_error(fmt::format("no flash attention tile {}", tile_index));
  }
}

// The dQ pass, on its one tile shape, over query tiles.
template <class T, int D>
void run_grad_q(const cuda::AttentionLayout& layout, const AttentionCall& call, uint64_t seed,
                unsigned int matrix_blocks) {
  constexpr cuda::FlashTile tile = cuda::kFlashGradQTile;
  const cuda::AttentionPointers<T> args = pointers_of<T>(call);
  const auto query_tiles = static_cast<unsigned int>((layout.target_length + tile.queries - 1) / tile.queries);
  const dim3 grid(query_tiles, matrix_blocks, 1);
  launch(
      grid, dim3(cuda::flash_tile_threads(tile)), cuda::flash_grad_q_plan(D, tile, sizeof(T)).bytes,
      [&] {
        cuda::flash_attention_grad_q<T, D, tile.queries, tile.keys, tile.warps, tile.stages>(layout, args);
      },
      seed);
}

// Calls visit.template operator()<T, D>() for the element type and head dim of a call.
template <class Visit>
void with_element_and_head_dim(Element element, int head_dim, Visit&& visit) {
  if (head_dim != 64 && head_dim != 128) throw std::runtime_error("head dim 64 or 128");
  auto with_head_dim = [&](auto element_tag) {
    using T = decltype(element_tag);
    if (head_dim == 64) {
      visit.template operator()<T, 64>();
    } else {
      visit.template operator()<T, 128>();
    }
  };
  switch (element) {
    case Element::kBFloat16:
      with_head_dim(__nv_bfloat16{});
      break;
    case Element::kFloat16:
      with_head_dim(__half{});
      break;
    case Element::kFloat32:
      with_head_dim(float{});
      break;
  }
}

template <cuda::FlashPass Pass>
void run_pass(Element element, int head_dim, int tile_index, const cuda::AttentionLayout& layout,
              const AttentionCall& call, uint64_t seed, unsigned int matrix_blocks) {
  with_element_and_head_dim(element, head_dim, [&]<class T, int D>() {
    run_head_dim<Pass, T, D>(tile_index, layout, call, seed, matrix_blocks);
  });
}

}  // namespace

void run_flash_attention_forward(Element element, int head_dim, int tile_index, const cuda::AttentionLayout& layout,
                                 const AttentionCall& call, uint64_t interleaving_seed, unsigned int matrix_blocks) {
  run_pass<cuda::FlashPass::kForward>(element, head_dim, tile_index, layout, call, interleaving_seed, matrix_blocks);
}

void run_flash_attention_backward(Element element, int head_dim, int tile_index, const cuda::AttentionLayout& layout,
                                  const AttentionCall& call, uint64_t interleaving_seed, unsigned int matrix_blocks) {
  run_pass<cuda::FlashPass::kBackward>(element, head_dim, tile_index, layout, call, interleaving_seed, matrix_blocks);
}

void run_flash_attention_grad_q(Element element, int head_dim, const cuda::AttentionLayout& layout,
                                const AttentionCall& call, uint64_t interleaving_seed, unsigned int matrix_blocks) {
  with_element_and_head_dim(element, head_dim, [&]<class T, int D>() {
    run_grad_q<T, D>(layout, call, interleaving_seed, matrix_blocks);
  });
}

}  // namespace ember::cuda_emulation
