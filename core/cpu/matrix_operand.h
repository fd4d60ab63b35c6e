// A matrix as ember's own CPU gemms read it (core/cpu/bf16_gemm.h, core/cpu/float16_gemm.h).
#pragma once

#include <cstdint>

namespace ember::cpu {

// Element (i, j) of op(X) is data[i * ld + j], or data[j * ld + i] when transposed (the layouts
// of cpu::matrix_layout).
template <class T>
struct MatrixOperand {
  const T* data;
  int64_t ld;
  bool transposed;
};

}  // namespace ember::cpu
