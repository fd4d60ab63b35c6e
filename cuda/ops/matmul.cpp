// The gemm behind matmul, bmm and linear on CUDA, through cuBLAS: one cuBLAS call per product,
// whatever the batch layout.
//
// cuBLAS is column-major; ember's out is row-major [m, n], which cuBLAS reads as out^T [n, m].
// So each product is computed as out^T = b^T a^T: the operands swap places, and a matrix
// stored row-major (stride[-1] == 1) is already its own transpose to cuBLAS, while a
// column-contiguous one (a transposed view) is passed with CUBLAS_OP_T. No operand is copied.
// The batch goes to cuBLAS as planned by gemm_batch_plan.h: one strided-batched call when its
// dims merge to one stride per operand, else one batched call over pointer arrays that a
// kernel computes on the device. A host loop of one call per matrix (for attention's heads,
// split off a projection as views) was measured to make a GPU training step ten times slower.
//
// The handle comes from cuda/runtime/cublas_handle.h, bound to the current stream (the
// default stream, or a graph capture's), so products are ordered with the ops around them
// without events.
// TF32 is off unless set_allow_tf32(true): with it float32 products round their inputs to 10
// mantissa bits and no longer match the CPU to the parity tests' 1e-4.
// bfloat16 and float16 products go through cuBLAS's typed entry points (cublasGemm*Ex) with
// CUBLAS_COMPUTE_32F: the products run on tensor cores, accumulate in float32 and are rounded
// once to the output's format, as the CPU computes them in float and rounds on store.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <climits>
#include <type_traits>

#include "core/cuda.h"
#include "core/ops/copy.h"
#include "core/ops/matmul.h"
#include "cuda/runtime/check.h"
#include "cuda/runtime/cublas_handle.h"
#include "cuda/ops/device_elements.h"
#include "cuda/common/gemm_batch_plan.h"
#include "cuda/ops/gemm_pointers_kernels.h"
#include "cuda/runtime/stream.h"

namespace ember::cuda {
namespace {

std::atomic<bool> tf32_allowed{false};
std::atomic<int64_t> cublas_call_count{0};

// How cuBLAS reads the matrices of x [*batch, rows, cols]: the op to apply and the leading
// dimension. Both are the same for every matrix of the batch.
struct Operand {
  cublasOperation_t op;
  int ld;
};

Operand operand_of(const Tensor& x) {
  const int64_t r = x.dim();
  const int64_t rows = x.sizes()[r - 2], cols = x.sizes()[r - 1];
  const int64_t row_stride = x.strides()[r - 2], col_stride = x.strides()[r - 1];
  cublasOperation_t op = CUBLAS_OP_N;
  int64_t ld = 0;
  // The same rule as the CPU kernel's: a size-1 dim's stride never disqualifies a matrix.
  if ((cols == 1 || col_stride == 1) && (rows == 1 || row_stride >= std::max<int64_t>(cols, 1))) {
    op = CUBLAS_OP_N;  // row-major: cuBLAS sees x^T, as the swapped product wants
    ld = rows == 1 ? std::max<int64_t>(cols, 1) : row_stride;
  } else if ((rows == 1 || row_stride == 1) && (cols == 1 || col_stride >= std::max<int64_t>(rows, 1))) {
    op = CUBLAS_OP_T;  // column-major: cuBLAS sees x itself, so transpose it
    ld = cols == 1 ? std::max<int64_t>(rows, 1) : col_stride;
  } else {
    fail("matmul: gemm kernel got an operand that is neither row- nor column-contiguous (strides {})",
         shape_str(x.strides()));
  }
  EMBER_CHECK(ld <= INT_MAX, "matmul: leading dimension {} exceeds the cuBLAS int range", ld);
  return {op, static_cast<int>(ld)};
}

// The batch of a product as gemm_batch_plan.h merges it.
GemmBatchLayout batch_layout_of(const Tensor& out, const Tensor& a, const Tensor& b) {
  const int rank = static_cast<int>(out.dim()) - 2;
  const GemmBatchLayout layout =
      plan_gemm_batch(rank, out.sizes().data(), a.strides().data(), b.strides().data(), out.strides().data());
  EMBER_CHECK(layout.dims >= 0,
              "matmul: a batch of shape {} whose operands' strides ({} and {}) leave more than {} dims that cannot "
              "be merged; make an operand contiguous first",
              shape_str(Shape(out.sizes().begin(), out.sizes().end() - 2)), shape_str(a.strides()),
              shape_str(b.strides()), kMaxGemmBatchDims);
  return layout;
}

// cuBLAS's name for a 16-bit element type.
template <class T>
constexpr cudaDataType_t cublas_data_type() {
  static_assert(is_16_bit_element<T>, "the typed gemm entry points are used for the 16-bit formats");
  return std::is_same_v<T, __nv_bfloat16> ? CUDA_R_16BF : CUDA_R_16F;
}

// The cuBLAS entry points by element type T (float, double, __nv_bfloat16, __half). Each
// computes out^T = op(b) op(a), b first. alpha and beta are of T's compute type: float for the
// 16-bit formats, the scalars of CUBLAS_COMPUTE_32F.
struct Gemm {
  cublasHandle_t handle;
  Operand a, b;
  int m, n, k;

  template <class T>
  cublasStatus_t strided(const compute_t<T>* alpha, const T* pa, long long stride_a, const T* pb, long long stride_b,
                         const compute_t<T>* beta, T* c, long long stride_c, int count) const {
    if constexpr (std::is_same_v<T, float>) {
      return cublasSgemmStridedBatched(handle, b.op, a.op, n, m, k, alpha, pb, b.ld, stride_b, pa, a.ld, stride_a,
                                       beta, c, n, stride_c, count);
    } else if constexpr (std::is_same_v<T, double>) {
      return cublasDgemmStridedBatched(handle, b.op, a.op, n, m, k, alpha, pb, b.ld, stride_b, pa, a.ld, stride_a,
                                       beta, c, n, stride_c, count);
    } else {
      constexpr cudaDataType_t type = cublas_data_type<T>();
      return cublasGemmStridedBatchedEx(handle, b.op, a.op, n, m, k, alpha, pb, type, b.ld, stride_b, pa, type, a.ld,
                                        stride_a, beta, c, type, n, stride_c, count, CUBLAS_COMPUTE_32F,
                                        CUBLAS_GEMM_DEFAULT);
    }
  }
  // pointers: the a, b and c arrays of `count` entries each, one after another.
  template <class T>
  cublasStatus_t batched(const compute_t<T>* alpha, void** pointers, const compute_t<T>* beta, int count) const {
    void** const a_arrays = pointers;
    void** const b_arrays = pointers + count;
    void** const c_arrays = pointers + 2 * int64_t{count};
    if constexpr (std::is_same_v<T, float>) {
      return cublasSgemmBatched(handle, b.op, a.op, n, m, k, alpha, reinterpret_cast<const float* const*>(b_arrays),
                                b.ld, reinterpret_cast<const float* const*>(a_arrays), a.ld, beta,
                                reinterpret_cast<float* const*>(c_arrays), n, count);
    } else if constexpr (std::is_same_v<T, double>) {
      return cublasDgemmBatched(handle, b.op, a.op, n, m, k, alpha, reinterpret_cast<const double* const*>(b_arrays),
                                b.ld, reinterpret_cast<const double* const*>(a_arrays), a.ld, beta,
                                reinterpret_cast<double* const*>(c_arrays), n, count);
    } else {
      constexpr cudaDataType_t type = cublas_data_type<T>();
      return cublasGemmBatchedEx(handle, b.op, a.op, n, m, k, alpha, b_arrays, type, b.ld, a_arrays, type, a.ld, beta,
                                 c_arrays, type, n, count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    }
  }
};

// How cuBLAS may compute a product of T. float: TF32 tensor cores only when allowed. 16-bit:
// the split-K reductions must stay in float32 too, which cuBLAS does not promise by default
// (it may add the partial sums in the 16-bit format); the CPU sums in float32 throughout.
template <class T>
cublasMath_t math_mode() {
  if constexpr (is_16_bit_element<T>) {
    return static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);
  } else if constexpr (std::is_same_v<T, float>) {
    return tf32_allowed.load() ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH;
  } else {
    return CUBLAS_DEFAULT_MATH;
  }
}

// Whether a batch that is not strided may go to cuBLAS as pointer arrays: always for float and
// double; for the 16-bit formats only when every matrix pointer is 16-byte aligned (heads split
// off a projection with a head size not a multiple of 8 are not).
template <class T>
bool pointer_arrays_allowed(const GemmBatchLayout& layout, const Tensor& out, const Tensor& a, const Tensor& b) {
  if constexpr (!is_16_bit_element<T>) {
    return true;
  } else {
    constexpr int64_t kAlignment = 16;
    const auto aligned = [&](int operand, const Tensor& t) {
      return batch_pointers_aligned(layout, operand, reinterpret_cast<uint64_t>(t.raw_data()), sizeof(T), kAlignment);
    };
    return aligned(kOperandA, a) && aligned(kOperandB, b) && aligned(kOperandC, out);
  }
}

Tensor contiguous_copy(const Tensor& x) {
  const Tensor copy = make_tensor(x.sizes(), x.dtype(), x.device());
  kernels::copy[x.device()](copy, x);
  return copy;
}

// out = a @ b + beta * out, with out contiguous [*batch, m, n] (see core/ops/matmul.h).
void gemm_cuda(const Tensor& out, const Tensor& a, const Tensor& b, double beta) {
  const int64_t rank = out.dim();
  const int64_t m = out.sizes()[rank - 2], n = out.sizes()[rank - 1], k = a.sizes()[rank - 1];
  const int64_t count = out.numel() / std::max<int64_t>(m * n, 1);
  if (m == 0 || n == 0 || count == 0) return;
  visit_any_floating(out.dtype(), "matmul", [&]<class T>() {
    using Element = device_element_t<T>;
    using Scalar = compute_t<Element>;  // alpha and beta: float for the 16-bit formats
    Element* c = device_data<T>(out);
    if (k == 0) {  // an empty sum: out is beta * out, i.e. zero or unchanged
      if (beta == 0) check(cudaMemsetAsync(c, 0, sizeof(T) * count * m * n, current_stream()), "matmul");
      return;
    }
    EMBER_CHECK(m <= INT_MAX && n <= INT_MAX && k <= INT_MAX && count <= INT_MAX,
                "matmul: matrix dims {}x{}x{} (batch {}) exceed the cuBLAS int range", m, k, n, count);
    const GemmBatchLayout layout = batch_layout_of(out, a, b);
    if (!layout.is_strided() && !pointer_arrays_allowed<Element>(layout, out, a, b)) {
      // Contiguous operands merge with out's contiguous batch into one stride: strided-batched,
      // which cuBLAS checks for itself.
      return gemm_cuda(out, contiguous_copy(a), contiguous_copy(b), beta);
    }
    const Gemm gemm{cublas_handle_for_current_device(), operand_of(a), operand_of(b), static_cast<int>(m),
                    static_cast<int>(n), static_cast<int>(k)};
    check(cublasSetMathMode(gemm.handle, math_mode<Element>()), "matmul: cublasSetMathMode");
    const Scalar alpha_value = Scalar(1), beta_value = static_cast<Scalar>(beta);
    const Element* pa = device_data<T>(a);
    const Element* pb = device_data<T>(b);
    const int batch = static_cast<int>(count);
    if (layout.is_strided()) {
      check(gemm.strided<Element>(&alpha_value, pa, layout.batch_stride(kOperandA), pb,
                                  layout.batch_stride(kOperandB), &beta_value, c, m * n, batch),
            "matmul: cublas gemm");
    } else {
      // Three arrays of `count` pointers, freed to the allocator right after the call is
      // queued: the next op to get the block runs after the call on the same stream.
      const Tensor pointers = make_tensor({3 * count}, kInt64, out.device());
      void** const arrays = static_cast<void**>(pointers.raw_data());
      launch_gemm_pointers(layout, pa, pb, c, sizeof(T), arrays);
      check(gemm.batched<Element>(&alpha_value, arrays, &beta_value, batch), "matmul: cublas batched gemm");
    }
    cublas_call_count.fetch_add(1, std::memory_order_relaxed);
  });
}
EMBER_REGISTER_KERNEL(kernels::gemm, DeviceType::CUDA, gemm_cuda);

}  // namespace

void set_allow_tf32(bool allow) { tf32_allowed.store(allow); }
bool allow_tf32() { return tf32_allowed.load(); }
int64_t cublas_calls() { return cublas_call_count.load(std::memory_order_relaxed); }

}  // namespace ember::cuda
