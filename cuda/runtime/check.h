// Turning CUDA and cuBLAS failures into ember::Error. Every runtime call and every kernel launch
// in cuda/ goes through one of these, so a failure names the op that caused it and CUDA's own
// message instead of surfacing later, in an unrelated op, as a sticky error.
//
// This header is included by .cu files, which nvcc compiles: it must not include fmt (nvcc
// cannot evaluate fmt's consteval format strings) nor any core/ header that does. The message
// is formatted in check.cpp, which the host compiler builds. For the same reason, .cu files take
// raw pointers and sizes; the .cpp beside each one unpacks Tensors and registers the kernels.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <string_view>

namespace ember::cuda {

[[noreturn]] void throw_cuda_error(std::string_view op, cudaError_t status);
[[noreturn]] void throw_cublas_error(std::string_view op, cublasStatus_t status);

// Throws "op: CUDA error: <CUDA's message>" unless status is cudaSuccess.
inline void check(cudaError_t status, std::string_view op) {
  if (status != cudaSuccess) [[unlikely]] throw_cuda_error(op, status);
}

// After a kernel launch: a bad launch configuration is only reported by cudaGetLastError().
// Errors raised while the kernel runs arrive asynchronously, at the next synchronising call.
inline void check_launch(std::string_view op) { check(cudaGetLastError(), op); }

inline void check(cublasStatus_t status, std::string_view op) {
  if (status != CUBLAS_STATUS_SUCCESS) [[unlikely]] throw_cublas_error(op, status);
}

}  // namespace ember::cuda
