// The launcher that writes a batched product's pointer arrays on the device (gemm_pointers.cu).
// fmt-free: both compilers read it.
#pragma once

#include <cstddef>

#include "cuda/common/gemm_batch_plan.h"

namespace ember::cuda {

// pointers[i] = a + offset_a(i), pointers[count + i] = b + offset_b(i) and
// pointers[2 count + i] = c + offset_c(i), for the `layout.count` matrices of the batch, in
// bytes of `element_size`. Queued on the current stream; `pointers` is device memory.
void launch_gemm_pointers(const GemmBatchLayout& layout, const void* a, const void* b, void* c, size_t element_size,
                          void** pointers);

}  // namespace ember::cuda
