// The messages of check.h's failures, formatted by the host compiler (see check.h).
#include "cuda/runtime/check.h"

#include "core/error.h"

namespace ember::cuda {

void throw_cuda_error(std::string_view op, cudaError_t status) {
  cudaGetLastError();  // clear a non-sticky error so that the next op does not report it again
  fail("{}: CUDA error: {} ({})", op, cudaGetErrorString(status), cudaGetErrorName(status));
}

void throw_cublas_error(std::string_view op, cublasStatus_t status) {
  fail("{}: cuBLAS error: {}", op, cublasGetStatusString(status));
}

}  // namespace ember::cuda
