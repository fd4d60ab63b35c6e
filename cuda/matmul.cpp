// The gemm behind matmul, bmm and linear on CUDA, through cuBLAS.
//
// cuBLAS is column-major; ember's out is row-major [m, n], which cuBLAS reads as out^T [n, m].
// So each product is computed as out^T = b^T a^T: the operands swap places, and a matrix
// stored row-major (stride[-1] == 1) is already its own transpose to cuBLAS, while a
// column-contiguous one (a transposed view) is passed with CUBLAS_OP_T. No operand is copied.
// A batch whose matrices lie one stride apart (0 for a broadcast operand) is one
// strided-batched call; other batch layouts loop over the matrices, one call each.
//
// One cuBLAS handle per device, created on first use and bound to the default stream, which
// every ember kernel uses: products are ordered with the ops around them without events.
// TF32 is off unless set_allow_tf32(true): with it float32 products round their inputs to 10
// mantissa bits and no longer match the CPU to the parity tests' 1e-4.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <climits>
#include <mutex>
#include <optional>
#include <vector>

#include "core/cuda.h"
#include "core/ops/matmul.h"
#include "cuda/check.h"

namespace ember::cuda {
namespace {

std::atomic<bool> tf32_allowed{false};

// Handles are never destroyed: at process exit the CUDA context may already be gone, and
// cublasDestroy would then fail.
cublasHandle_t handle_for_current_device() {
  static std::mutex mutex;
  static std::vector<cublasHandle_t> handles;
  int device = 0;
  check(cudaGetDevice(&device), "matmul");
  std::lock_guard<std::mutex> lock(mutex);
  if (handles.size() <= static_cast<size_t>(device)) handles.resize(device + 1, nullptr);
  if (handles[device] == nullptr) {
    check(cublasCreate(&handles[device]), "matmul: cublasCreate");
    check(cublasSetStream(handles[device], nullptr), "matmul: cublasSetStream");
  }
  return handles[device];
}

// How cuBLAS reads the matrices of x [*batch, rows, cols]: the op to apply, the leading
// dimension, and the element distance between consecutive matrices of the batch when it is
// one stride (nullopt otherwise).
struct Operand {
  cublasOperation_t op;
  int64_t ld;
  std::optional<int64_t> batch_stride;
};

// The one stride s with matrix i of the batch at offset i * s, if there is one. Size-1 dims
// do not count; an operand broadcast over the whole batch has s == 0.
std::optional<int64_t> uniform_batch_stride(const Tensor& x) {
  const int64_t batch_rank = x.dim() - 2;
  std::optional<int64_t> stride;
  int64_t inner_count = 1;  // matrices spanned by the dims after d
  for (int64_t d = batch_rank - 1; d >= 0; --d) {
    const int64_t size = x.sizes()[d];
    if (size == 1) continue;
    if (!stride) {
      stride = x.strides()[d];
    } else if (x.strides()[d] != *stride * inner_count) {
      return std::nullopt;
    }
    inner_count *= size;
  }
  return stride.value_or(0);
}

Operand operand_of(const Tensor& x) {
  const int64_t r = x.dim();
  const int64_t rows = x.sizes()[r - 2], cols = x.sizes()[r - 1];
  const int64_t row_stride = x.strides()[r - 2], col_stride = x.strides()[r - 1];
  Operand operand{CUBLAS_OP_N, 0, uniform_batch_stride(x)};
  // The same rule as the CPU kernel's: a size-1 dim's stride never disqualifies a matrix.
  if ((cols == 1 || col_stride == 1) && (rows == 1 || row_stride >= std::max<int64_t>(cols, 1))) {
    operand.op = CUBLAS_OP_N;  // row-major: cuBLAS sees x^T, as the swapped product wants
    operand.ld = rows == 1 ? std::max<int64_t>(cols, 1) : row_stride;
  } else if ((rows == 1 || row_stride == 1) && (cols == 1 || col_stride >= std::max<int64_t>(rows, 1))) {
    operand.op = CUBLAS_OP_T;  // column-major: cuBLAS sees x itself, so transpose it
    operand.ld = cols == 1 ? std::max<int64_t>(rows, 1) : col_stride;
  } else {
    fail("matmul: gemm kernel got an operand that is neither row- nor column-contiguous (strides {})",
         shape_str(x.strides()));
  }
  EMBER_CHECK(operand.ld <= INT_MAX, "matmul: leading dimension {} exceeds the cuBLAS int range", operand.ld);
  return operand;
}

// Element offsets of every matrix of x over its batch, in row-major batch order.
std::vector<int64_t> matrix_offsets(const Tensor& x, int64_t count) {
  const int64_t batch_rank = x.dim() - 2;
  std::vector<int64_t> offsets(count);
  for (int64_t i = 0; i < count; ++i) {
    int64_t rest = i, offset = 0;
    for (int64_t d = batch_rank - 1; d >= 0; --d) {
      offset += (rest % x.sizes()[d]) * x.strides()[d];
      rest /= x.sizes()[d];
    }
    offsets[i] = offset;
  }
  return offsets;
}

cublasStatus_t gemm_strided_batched(cublasHandle_t handle, const Operand& a, const Operand& b, int m, int n, int k,
                                    const float* alpha, const float* pa, long long stride_a, const float* pb,
                                    long long stride_b, const float* beta, float* c, long long stride_c, int count) {
  return cublasSgemmStridedBatched(handle, b.op, a.op, n, m, k, alpha, pb, static_cast<int>(b.ld), stride_b, pa,
                                   static_cast<int>(a.ld), stride_a, beta, c, n, stride_c, count);
}

cublasStatus_t gemm_strided_batched(cublasHandle_t handle, const Operand& a, const Operand& b, int m, int n, int k,
                                    const double* alpha, const double* pa, long long stride_a, const double* pb,
                                    long long stride_b, const double* beta, double* c, long long stride_c, int count) {
  return cublasDgemmStridedBatched(handle, b.op, a.op, n, m, k, alpha, pb, static_cast<int>(b.ld), stride_b, pa,
                                   static_cast<int>(a.ld), stride_a, beta, c, n, stride_c, count);
}

// out = a @ b + beta * out, with out contiguous [*batch, m, n] (see core/ops/matmul.h).
void gemm_cuda(const Tensor& out, const Tensor& a, const Tensor& b, double beta) {
  const int64_t rank = out.dim();
  const int64_t m = out.sizes()[rank - 2], n = out.sizes()[rank - 1], k = a.sizes()[rank - 1];
  const int64_t count = out.numel() / std::max<int64_t>(m * n, 1);
  if (m == 0 || n == 0 || count == 0) return;
  visit_floating(out.dtype(), "matmul", [&]<class T>() {
    T* c = out.data_ptr<T>();
    if (k == 0) {  // an empty sum: out is beta * out, i.e. zero or unchanged
      if (beta == 0) check(cudaMemsetAsync(c, 0, sizeof(T) * count * m * n, nullptr), "matmul");
      return;
    }
    EMBER_CHECK(m <= INT_MAX && n <= INT_MAX && k <= INT_MAX && count <= INT_MAX,
                "matmul: matrix dims {}x{}x{} (batch {}) exceed the cuBLAS int range", m, k, n, count);
    const Operand oa = operand_of(a), ob = operand_of(b);
    cublasHandle_t handle = handle_for_current_device();
    check(cublasSetMathMode(handle, tf32_allowed.load() ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
          "matmul: cublasSetMathMode");
    const T alpha_value = T(1), beta_value = static_cast<T>(beta);
    const T* pa = a.data_ptr<T>();
    const T* pb = b.data_ptr<T>();
    const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
    if (count == 1 || (oa.batch_stride && ob.batch_stride)) {
      check(gemm_strided_batched(handle, oa, ob, mi, ni, ki, &alpha_value, pa, oa.batch_stride.value_or(0), pb,
                                 ob.batch_stride.value_or(0), &beta_value, c, m * n, static_cast<int>(count)),
            "matmul: cublas gemm");
      return;
    }
    const std::vector<int64_t> offsets_a = matrix_offsets(a, count), offsets_b = matrix_offsets(b, count);
    for (int64_t i = 0; i < count; ++i) {
      check(gemm_strided_batched(handle, oa, ob, mi, ni, ki, &alpha_value, pa + offsets_a[i], 0, pb + offsets_b[i], 0,
                                 &beta_value, c + i * m * n, m * n, 1),
            "matmul: cublas gemm");
    }
  });
}
EMBER_REGISTER_KERNEL(kernels::gemm, DeviceType::CUDA, gemm_cuda);

}  // namespace

void set_allow_tf32(bool allow) { tf32_allowed.store(allow); }
bool allow_tf32() { return tf32_allowed.load(); }

}  // namespace ember::cuda
