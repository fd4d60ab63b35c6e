// Binary elementwise ops on the GPU: arithmetic and predicates, with NumPy broadcasting and any
// strides handled by the layout (a broadcast operand has stride 0). As in cuda/ops/unary.cu, the op
// is a runtime switch, so there is one kernel per dtype and family.
#include <type_traits>

#include "cuda/ops/binary_kernels.h"
#include "cuda/common/elementwise.cuh"

namespace ember::cuda {
namespace {

template <class T>
struct Arithmetic {
  BinaryOp op;
  __device__ T operator()(T x, T y) const {
    switch (op) {
      case BinaryOp::Add: return x + y;
      case BinaryOp::Sub: return x - y;
      case BinaryOp::Mul: return x * y;
      case BinaryOp::Div: return x / y;
      case BinaryOp::Pow:
        if constexpr (std::is_floating_point_v<T>) return pow(x, y);
        break;
      // NaN wins, as on the CPU and in PyTorch: x != x is true only for NaN.
      case BinaryOp::Maximum: return (x > y || x != x) ? x : y;
      case BinaryOp::Minimum: return (x < y || x != x) ? x : y;
      default: break;
    }
    return x;  // unreachable: the host checks the op against the dtype
  }
};

template <class T>
struct Predicate {
  BinaryOp op;
  __device__ bool operator()(T x, T y) const {
    switch (op) {
      case BinaryOp::Eq: return x == y;
      case BinaryOp::Ne: return x != y;
      case BinaryOp::Lt: return x < y;
      case BinaryOp::Le: return x <= y;
      case BinaryOp::Gt: return x > y;
      case BinaryOp::Ge: return x >= y;
      case BinaryOp::LogicalAnd: return x != T(0) && y != T(0);
      case BinaryOp::LogicalOr: return x != T(0) || y != T(0);
      default: return false;  // unreachable: the host checks the op
    }
  }
};

}  // namespace

// A 16-bit T runs the float functors (in_compute_type: widened on load, rounded on store).
template <class T>
void launch_binary_arithmetic(BinaryOp op, const StridedLayout<3>& layout, int64_t n, T* out, const T* a,
                              const T* b) {
  launch_elementwise("binary", layout, n, in_compute_type<T>(Arithmetic<compute_t<T>>{op}), out, a, b);
}

template <class T>
void launch_binary_predicate(BinaryOp op, const StridedLayout<3>& layout, int64_t n, bool* out, const T* a,
                             const T* b) {
  launch_elementwise("binary", layout, n, in_compute_type<bool>(Predicate<compute_t<T>>{op}), out, a, b);
}

#define EMBER_INSTANTIATE_ARITHMETIC(T) \
  template void launch_binary_arithmetic<T>(BinaryOp, const StridedLayout<3>&, int64_t, T*, const T*, const T*);
#define EMBER_INSTANTIATE_PREDICATE(T) \
  template void launch_binary_predicate<T>(BinaryOp, const StridedLayout<3>&, int64_t, bool*, const T*, const T*);
EMBER_INSTANTIATE_ARITHMETIC(float)
EMBER_INSTANTIATE_ARITHMETIC(double)
EMBER_INSTANTIATE_ARITHMETIC(int64_t)
EMBER_INSTANTIATE_ARITHMETIC(__nv_bfloat16)
EMBER_INSTANTIATE_ARITHMETIC(__half)
EMBER_INSTANTIATE_PREDICATE(float)
EMBER_INSTANTIATE_PREDICATE(double)
EMBER_INSTANTIATE_PREDICATE(int64_t)
EMBER_INSTANTIATE_PREDICATE(bool)
EMBER_INSTANTIATE_PREDICATE(__nv_bfloat16)
EMBER_INSTANTIATE_PREDICATE(__half)
#undef EMBER_INSTANTIATE_ARITHMETIC
#undef EMBER_INSTANTIATE_PREDICATE

}  // namespace ember::cuda
