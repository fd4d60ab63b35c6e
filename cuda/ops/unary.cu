// Unary elementwise ops on the GPU. One kernel per dtype: the op is a runtime switch inside the
// element function, the same for every thread, so it costs a few instructions of a memory-bound
// loop and keeps the number of instantiated kernels (and the build time) small.
#include <type_traits>

#include "cuda/common/elementwise.cuh"
#include "cuda/ops/unary_kernels.h"

namespace ember::cuda {
namespace {

constexpr double kSqrt2OverPi = 0.7978845608028654;  // sqrt(2 / pi)
constexpr double kInvSqrt2 = 0.7071067811865476;     // 1 / sqrt(2)

template <class T>
struct UnaryMath {
  UnaryOp op;
  __device__ T operator()(T v) const {
    switch (op) {
      case UnaryOp::Neg: return -v;
      case UnaryOp::Abs: return v < T(0) ? -v : v;
      case UnaryOp::Relu: return v > T(0) ? v : T(0);
      case UnaryOp::Sign: return T((v > T(0)) - (v < T(0)));
      default: break;
    }
    if constexpr (std::is_floating_point_v<T>) {
      // Unqualified calls pick CUDA's float or double overload.
      switch (op) {
        case UnaryOp::Exp: return exp(v);
        case UnaryOp::Log: return log(v);
        case UnaryOp::Sqrt: return sqrt(v);
        case UnaryOp::Rsqrt: return T(1) / sqrt(v);
        case UnaryOp::Sin: return sin(v);
        case UnaryOp::Cos: return cos(v);
        case UnaryOp::Tanh: return tanh(v);
        case UnaryOp::Sigmoid: return T(1) / (T(1) + exp(-v));
        case UnaryOp::Erf: return erf(v);
        case UnaryOp::Gelu: return T(0.5) * v * (T(1) + erf(v * T(kInvSqrt2)));
        case UnaryOp::GeluTanh: return T(0.5) * v * (T(1) + tanh(T(kSqrt2OverPi) * (v + T(0.044715) * v * v * v)));
        default: break;
      }
    }
    return v;  // unreachable: the host checks the op against the dtype
  }
};

template <class T>
struct UnaryPredicate {
  UnaryOp op;
  __device__ bool operator()(T v) const {
    if constexpr (std::is_floating_point_v<T>) {
      return op == UnaryOp::IsFinite ? isfinite(v) : isnan(v);
    } else {
      return op == UnaryOp::IsFinite;  // integers and bools are always finite, never NaN
    }
  }
};

constexpr double kInvSqrt2Pi = 0.3989422804014327;  // 1 / sqrt(2 pi)

// grad * f'(x), the derivatives of core/ops/unary.cpp's derivative().
template <class T>
struct ActivationBackward {
  UnaryOp op;
  __device__ T operator()(T g, T v) const {
    switch (op) {
      case UnaryOp::Relu: return v > T(0) ? g : T(0);
      case UnaryOp::Gelu: {
        // d/dx x Phi(x) = Phi(x) + x phi(x)
        const T cdf = T(0.5) * (T(1) + erf(v * T(kInvSqrt2)));
        const T pdf = T(kInvSqrt2Pi) * exp(T(-0.5) * v * v);
        return g * (cdf + v * pdf);
      }
      case UnaryOp::GeluTanh: {
        // y = 0.5 x (1 + t), t = tanh(c (x + 0.044715 x^3))
        const T c = T(kSqrt2OverPi), x2 = v * v;
        const T t = tanh(c * (v + T(0.044715) * x2 * v));
        return g * (T(0.5) * (T(1) + t) + T(0.5) * v * (T(1) - t * t) * c * (T(1) + T(3 * 0.044715) * x2));
      }
      default: return g;  // unreachable: the host passes only the activations
    }
  }
};

template <class T>
struct Clamp {
  T low, high;
  __device__ T operator()(T v) const { return v < low ? low : (v > high ? high : v); }
};

}  // namespace

// A 16-bit T runs the float functors (in_compute_type: widened on load, rounded on store).
template <class T>
void launch_unary(UnaryOp op, const StridedLayout<2>& layout, int64_t n, T* out, const T* x) {
  launch_elementwise("unary", layout, n, in_compute_type<T>(UnaryMath<compute_t<T>>{op}), out, x);
}

template <class T>
void launch_unary_predicate(UnaryOp op, const StridedLayout<2>& layout, int64_t n, bool* out, const T* x) {
  launch_elementwise(op == UnaryOp::IsFinite ? "isfinite" : "isnan", layout, n,
                     in_compute_type<bool>(UnaryPredicate<compute_t<T>>{op}), out, x);
}

template <class T>
void launch_activation_backward(UnaryOp op, const StridedLayout<3>& layout, int64_t n, T* grad_x, const T* grad,
                                const T* x) {
  launch_elementwise("activation_backward", layout, n, in_compute_type<T>(ActivationBackward<compute_t<T>>{op}),
                     grad_x, grad, x);
}

template <class T>
void launch_clamp(const StridedLayout<2>& layout, int64_t n, T* out, const T* x, compute_t<T> low,
                  compute_t<T> high) {
  launch_elementwise("clamp", layout, n, in_compute_type<T>(Clamp<compute_t<T>>{low, high}), out, x);
}

#define EMBER_INSTANTIATE_FLOATING(T)                                                                         \
  template void launch_unary<T>(UnaryOp, const StridedLayout<2>&, int64_t, T*, const T*);                   \
  template void launch_unary_predicate<T>(UnaryOp, const StridedLayout<2>&, int64_t, bool*, const T*);      \
  template void launch_activation_backward<T>(UnaryOp, const StridedLayout<3>&, int64_t, T*, const T*,      \
                                              const T*);                                                    \
  template void launch_clamp<T>(const StridedLayout<2>&, int64_t, T*, const T*, compute_t<T>, compute_t<T>);
EMBER_INSTANTIATE_FLOATING(float)
EMBER_INSTANTIATE_FLOATING(double)
EMBER_INSTANTIATE_FLOATING(__nv_bfloat16)
EMBER_INSTANTIATE_FLOATING(__half)
#undef EMBER_INSTANTIATE_FLOATING
template void launch_unary<int64_t>(UnaryOp, const StridedLayout<2>&, int64_t, int64_t*, const int64_t*);
template void launch_unary_predicate<int64_t>(UnaryOp, const StridedLayout<2>&, int64_t, bool*, const int64_t*);
template void launch_unary_predicate<bool>(UnaryOp, const StridedLayout<2>&, int64_t, bool*, const bool*);
template void launch_clamp<int64_t>(const StridedLayout<2>&, int64_t, int64_t*, const int64_t*, int64_t, int64_t);

}  // namespace ember::cuda
