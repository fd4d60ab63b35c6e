// The CUDA kernels the emulation runs, behind plain declarations: the test suites that call them
// see neither the emulation's macros nor CUDA's names. Elements are ember's BFloat16 and Float16
// (the same bits as CUDA's __nv_bfloat16 and __half), or float (the kernels on TF32).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/random.h"
#include "cuda/attention/attention_layout.h"
#include "cuda/attention/flash_attention_plan.h"

namespace ember::cuda_emulation {

// The element type of a call's q, k, v, mask, out and gradients (all but grad_q, always float32).
enum class Element { kBFloat16, kFloat16, kFloat32 };

inline size_t element_bytes(Element element) { return element == Element::kFloat32 ? 4 : 2; }

// The operands of one fused attention call, as AttentionPointers<T> holds them for the kernels.
struct AttentionCall {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* out = nullptr;
  const bool* allowed = nullptr;
  const void* added = nullptr;
  bool is_causal = false;
  float scale = 1;
  float dropout_p = 0;
  float dropout_keep_scale = 1;
  PhiloxState dropout_state;
  float* log_sum_exp = nullptr;
  // The backward's (each gradient may be null):
  const void* grad_out = nullptr;
  float* grad_q = nullptr;  // float32, laid out as grad_q, added into
  void* grad_k = nullptr;
  void* grad_v = nullptr;
  float* out_dot_grad = nullptr;  // rowsum(grad_out * out), [matrices, L]
};

// The global buffers cp.async may read (cuda_emulation.h declares them too).
void register_global_region(const void* begin, size_t bytes);
void clear_global_regions();

// Runs cuda/attention/flash_attention_forward.cuh's kernel for `head_dim` (64 or 128) with tile
// `tile_index` of kFlashTiles64 / kFlashTiles128, as its launcher would launch it (grid over query
// tiles and matrices, at most `matrix_blocks` blocks along y), on 16-bit elements (float16 or
// bfloat16) or float (TF32). Throws std::runtime_error for any violation the emulation finds.
void run_flash_attention_forward(Element element, int head_dim, int tile_index, const cuda::AttentionLayout& layout,
                                 const AttentionCall& call, uint64_t interleaving_seed, unsigned int matrix_blocks);

// The same for cuda/attention/flash_attention_backward.cuh (tile `tile_index` of
// kFlashBackwardTiles64 / 128; the grid over key blocks and matrices).
void run_flash_attention_backward(Element element, int head_dim, int tile_index, const cuda::AttentionLayout& layout,
                                  const AttentionCall& call, uint64_t interleaving_seed, unsigned int matrix_blocks);

// The deterministic mode's dQ pass (cuda/attention/flash_attention_grad_q.cuh, its one tile
// shape; the grid over query tiles and matrices): adds dQ into call.grad_q.
void run_flash_attention_grad_q(Element element, int head_dim, const cuda::AttentionLayout& layout,
                                const AttentionCall& call, uint64_t interleaving_seed, unsigned int matrix_blocks);

}  // namespace ember::cuda_emulation
