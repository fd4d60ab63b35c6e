// Parity of the elementwise ops on CUDA against the CPU: every unary op, clamp, every binary op
// with broadcasting and non-contiguous operands, where, masked_fill, tril and triu, forward and,
// where differentiable, backward, in float32 and float64, plus int64 and bool where the op
// takes them. The kernels are also run directly into poisoned outputs, so an element a kernel
// leaves unwritten shows up.
#include <cmath>

#include "helpers.h"
#include "parity.h"

using namespace ember;
using namespace ember::testing::cuda;
using ember::testing::as_leaf;

namespace {

// Tolerance for a dtype: the float32 bound, a tight one for float64.
double tolerance_for(DType dtype, double float32_tolerance) { return dtype == kFloat64 ? 1e-12 : float32_tolerance; }

// Inputs in the op's domain: positive for log, sqrt and rsqrt.
Tensor domain_input(UnaryOp op, const Shape& shape, DType dtype) {
  const Tensor x = randn(shape, dtype);
  if (op == UnaryOp::Log || op == UnaryOp::Sqrt || op == UnaryOp::Rsqrt) return add(abs(x), 0.1);
  return x;
}

const std::vector<BinaryOp> kArithmetic = {BinaryOp::Add, BinaryOp::Sub,     BinaryOp::Mul,    BinaryOp::Div,
                                           BinaryOp::Pow, BinaryOp::Maximum, BinaryOp::Minimum};
const std::vector<BinaryOp> kPredicates = {BinaryOp::Eq, BinaryOp::Ne, BinaryOp::Lt,         BinaryOp::Le,
                                           BinaryOp::Gt, BinaryOp::Ge, BinaryOp::LogicalAnd, BinaryOp::LogicalOr};

const std::vector<UnaryOp> kDifferentiableUnary = {UnaryOp::Neg,  UnaryOp::Abs,     UnaryOp::Exp,  UnaryOp::Log,
                                                   UnaryOp::Sqrt, UnaryOp::Rsqrt,   UnaryOp::Sin,  UnaryOp::Cos,
                                                   UnaryOp::Tanh, UnaryOp::Sigmoid, UnaryOp::Relu, UnaryOp::Erf,
                                                   UnaryOp::Gelu, UnaryOp::GeluTanh};

Tensor apply_unary(UnaryOp op, const Tensor& x) {
  switch (op) {
    case UnaryOp::Neg: return neg(x);
    case UnaryOp::Abs: return abs(x);
    case UnaryOp::Exp: return exp(x);
    case UnaryOp::Log: return log(x);
    case UnaryOp::Sqrt: return sqrt(x);
    case UnaryOp::Rsqrt: return rsqrt(x);
    case UnaryOp::Sin: return sin(x);
    case UnaryOp::Cos: return cos(x);
    case UnaryOp::Tanh: return tanh(x);
    case UnaryOp::Sigmoid: return sigmoid(x);
    case UnaryOp::Relu: return relu(x);
    case UnaryOp::Erf: return erf(x);
    case UnaryOp::Gelu: return gelu(x);
    case UnaryOp::GeluTanh: return gelu(x, GeluApproximation::Tanh);
    case UnaryOp::Sign: return unary_forward(UnaryOp::Sign, x);
    case UnaryOp::IsFinite: return isfinite(x);
    case UnaryOp::IsNan: return isnan(x);
  }
  return x;
}

Tensor apply_binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  switch (op) {
    case BinaryOp::Add: return add(a, b);
    case BinaryOp::Sub: return sub(a, b);
    case BinaryOp::Mul: return mul(a, b);
    case BinaryOp::Div: return div(a, b);
    case BinaryOp::Pow: return pow(a, b);
    case BinaryOp::Maximum: return maximum(a, b);
    case BinaryOp::Minimum: return minimum(a, b);
    default: return binary_forward(op, a, b);
  }
}

// The values a kernel is unlikely to write by chance, for poisoning outputs of each dtype.
Tensor poisoned_output(const Shape& shape, DType dtype, bool flip = false) {
  if (is_floating_point(dtype)) return poisoned(shape, dtype);
  if (dtype == kInt64) return full(shape, -123456789.0, TensorOptions(kInt64).device(kGPU));
  return full(shape, flip ? 0.0 : 1.0, TensorOptions(kBool).device(kGPU));
}

// Runs `kernel(out)` into poisoned GPU outputs (twice for bool, with both values) and checks
// every element against the CPU result.
template <class Kernel>
void check_poisoned(const Tensor& cpu_result, Kernel kernel, const std::string& what) {
  for (bool flip : {false, true}) {
    Tensor out = poisoned_output(cpu_result.sizes(), cpu_result.dtype(), flip);
    kernel(out);
    check_parity(out, cpu_result, is_floating_point(cpu_result.dtype()) ? 1e-5 : 0.0, what + " (poisoned output)");
    if (cpu_result.dtype() != kBool) break;
  }
}

// maximum and minimum: NaN wins, on both devices.
void check_nan_wins(DType dtype) {
  const Tensor with_nan = tensor<double>({1.0, NAN, 3.0, 2.0}, {4}).to(dtype);
  const Tensor other = tensor<double>({2.0, 0.0, NAN, 2.0}, {4}).to(dtype);
  const std::string name(dtype_name(dtype));
  check_parity(maximum(with_nan.to(kGPU), other.to(kGPU)), maximum(with_nan, other), 0.0, "maximum NaN " + name);
  check_parity(minimum(with_nan.to(kGPU), other.to(kGPU)), minimum(with_nan, other), 0.0, "minimum NaN " + name);
}

}  // namespace

TEST_CASE("every unary op matches the CPU, forward and backward, contiguous and transposed") {
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  manual_seed(seed);
  for (DType dtype : {kFloat32, kFloat64}) {
    for (UnaryOp op : kDifferentiableUnary) {
      const std::string name = std::string(unary_op_name(op)) + " " + std::string(dtype_name(dtype));
      const double tolerance = tolerance_for(dtype, kElementwiseTolerance);
      const Tensor x = as_leaf(domain_input(op, {37, 65}, dtype));
      check_op_parity([op](const Inputs& in) { return apply_unary(op, in[0]); }, {x}, tolerance, name);
      check_op_parity([op](const Inputs& in) { return apply_unary(op, in[0].t()); }, {x}, tolerance,
                      name + " transposed");
      check_poisoned(apply_unary(op, x.detach()),
                     [&](const Tensor& out) { kernels::unary.get(kGPU, "unary")(op, out, x.detach().to(kGPU)); },
                     name);
    }
  }
}

TEST_CASE("sign, isfinite, isnan and the int64 unary ops match the CPU") {
  const Tensor values = tensor<double>({-2.5, 0.0, 3.0, NAN, INFINITY, -INFINITY, 1e-30}, {7});
  for (DType dtype : {kFloat32, kFloat64}) {
    const Tensor x = values.to(dtype);
    for (UnaryOp op : {UnaryOp::Sign, UnaryOp::IsFinite, UnaryOp::IsNan, UnaryOp::Relu, UnaryOp::Abs}) {
      const Tensor cpu_result = apply_unary(op, x);
      check_parity(apply_unary(op, x.to(kGPU)), cpu_result, 0.0, std::string(unary_op_name(op)));
    }
  }
  const Tensor integers = tensor({-7, 0, 5, 9}, {4}).to(kInt64);
  for (UnaryOp op : {UnaryOp::Neg, UnaryOp::Abs, UnaryOp::Relu, UnaryOp::Sign, UnaryOp::IsFinite, UnaryOp::IsNan}) {
    check_parity(apply_unary(op, integers.to(kGPU)), apply_unary(op, integers), 0.0,
                 std::string(unary_op_name(op)) + " int64");
  }
  check_parity(isnan(gt(integers, 0.0).to(kGPU)), isnan(gt(integers, 0.0)), 0.0, "isnan bool");
  CHECK_THROWS_WITH_ALL(unary_forward(UnaryOp::Exp, integers.to(kGPU)), "exp", "int64");
}

TEST_CASE("clamp matches the CPU, with either bound absent, in every numeric dtype") {
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  manual_seed(seed);
  for (DType dtype : {kFloat32, kFloat64}) {
    const Tensor x = as_leaf(randn({20, 30}, dtype));
    const double tolerance = tolerance_for(dtype, kElementwiseTolerance);
    check_op_parity([](const Inputs& in) { return clamp(in[0], -0.5, 0.7); }, {x}, tolerance, "clamp");
    check_op_parity([](const Inputs& in) { return clamp(in[0].t(), std::nullopt, 0.2); }, {x}, tolerance,
                    "clamp max only");
    check_op_parity([](const Inputs& in) { return clamp(in[0], -0.1, std::nullopt); }, {x}, tolerance,
                    "clamp min only");
  }
  const Tensor integers = randint(-50, 50, {40});
  check_parity(clamp(integers.to(kGPU), -10, 20), clamp(integers, -10, 20), 0.0, "clamp int64");
  check_parity(clamp(tensor({NAN, 5.f}).to(kGPU), 0, 1), clamp(tensor({NAN, 5.f}), 0, 1), 0.0, "clamp NaN");
}

TEST_CASE("every binary op matches the CPU with broadcasting and non-contiguous operands") {
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  manual_seed(seed);
  for (DType dtype : {kFloat32, kFloat64}) {
    const double tolerance = tolerance_for(dtype, kElementwiseTolerance);
    for (BinaryOp op : kArithmetic) {
      const std::string name = std::string(binary_op_name(op)) + " " + std::string(dtype_name(dtype));
      // pow takes a positive base; div a divisor away from 0.
      const Tensor a = as_leaf(op == BinaryOp::Pow ? add(rand({4, 1, 6}, dtype), 0.5) : randn({4, 1, 6}, dtype));
      const bool positive = op == BinaryOp::Div || op == BinaryOp::Pow;
      const Tensor b = as_leaf(positive ? add(rand({5, 6}, dtype), 0.5) : randn({5, 6}, dtype));
      check_op_parity([op](const Inputs& in) { return apply_binary(op, in[0], in[1]); }, {a, b}, tolerance,
                      name + " broadcast");
      const Tensor c = as_leaf(positive ? add(rand({6, 5}, dtype), 0.5) : randn({6, 5}, dtype));
      check_op_parity([op](const Inputs& in) { return apply_binary(op, in[0], in[1].t()); }, {b, c}, tolerance,
                      name + " transposed");
      check_op_parity([op](const Inputs& in) { return apply_binary(op, in[0], scalar_operand(in[0], 1.5, "t")); },
                      {b}, tolerance, name + " with a scalar");
      check_poisoned(apply_binary(op, a.detach(), b.detach()),
                     [&](const Tensor& out) {
                       kernels::binary.get(kGPU, "binary")(op, out, a.detach().to(kGPU), b.detach().to(kGPU));
                     },
                     name);
    }
    check_nan_wins(dtype);
  }
}

TEST_CASE("comparisons, logical ops and int64 arithmetic match the CPU") {
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  manual_seed(seed);
  for (DType dtype : {kFloat32, kFloat64, kInt64, kBool}) {
    // Few distinct values, so equality is common.
    const Tensor a = dtype == kBool ? gt(randn({3, 1, 8}), 0.0) : randint(-2, 3, {3, 1, 8}).to(dtype);
    const Tensor b = dtype == kBool ? gt(randn({8, 4}), 0.0) : randint(-2, 3, {8, 4}).to(dtype);
    for (BinaryOp op : kPredicates) {
      const std::string name = std::string(binary_op_name(op)) + " " + std::string(dtype_name(dtype));
      // b.t() is [4, 8], non-contiguous, and broadcasts against a's [3, 1, 8].
      check_parity(binary_forward(op, a.to(kGPU), b.to(kGPU).t()), binary_forward(op, a, b.t()), 0.0, name);
      check_poisoned(binary_forward(op, a, b.t()),
                     [&](const Tensor& out) {
                       kernels::binary.get(kGPU, "binary")(op, out, a.to(kGPU), b.to(kGPU).t());
                     },
                     name);
    }
  }
  const Tensor a = randint(-100, 100, {6, 7}), b = randint(1, 100, {7});
  for (BinaryOp op : {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Maximum, BinaryOp::Minimum}) {
    check_parity(binary_forward(op, a.to(kGPU), b.to(kGPU)), binary_forward(op, a, b), 0.0,
                 std::string(binary_op_name(op)) + " int64");
  }
  CHECK_THROWS_WITH_ALL(kernels::binary.get(kGPU, "div")(BinaryOp::Div, empty({7}, TensorOptions(kInt64).device(kGPU)),
                                                         b.to(kGPU), b.to(kGPU)),
                        "div", "int64");
}

TEST_CASE("in-place arithmetic on GPU views matches the CPU") {
  const Tensor base = randn({6, 8});
  Tensor cpu_copy = base.clone(), gpu_copy = base.to(kGPU);
  Tensor cpu_view = cpu_copy.narrow(1, 2, 4), gpu_view = gpu_copy.narrow(1, 2, 4);
  cpu_view.add_(ones({4}), 2.0).mul_(3.0);
  gpu_view.add_(ones({4}, kGPU), 2.0).mul_(3.0);
  check_parity(gpu_copy, cpu_copy, 0.0, "add_ and mul_ through a view");
  gpu_view.fill_(7.0);
  cpu_view.fill_(7.0);
  check_parity(gpu_copy, cpu_copy, 0.0, "fill_ of a view");
  gpu_copy.t().zero_();
  CHECK(gpu_copy.abs().sum().item() == 0.0);
}

TEST_CASE("where and masked_fill match the CPU, with broadcast masks and both gradients") {
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  manual_seed(seed);
  for (DType dtype : {kFloat32, kFloat64}) {
    const double tolerance = tolerance_for(dtype, kElementwiseTolerance);
    const Tensor condition = gt(randn({4, 1, 6}), 0.0);
    const Tensor a = as_leaf(randn({5, 6}, dtype)), b = as_leaf(randn({4, 5, 1}, dtype));
    check_op_parity([](const Inputs& in) { return where(in[0], in[1], in[2]); }, {condition, a, b}, tolerance,
                    "where");
    const Tensor mask = gt(randn({6, 1}), 0.0);
    const Tensor x = as_leaf(randn({5, 6}, dtype));
    check_op_parity([](const Inputs& in) { return masked_fill(in[0].t(), in[1], -1e9); }, {x, mask}, tolerance,
                    "masked_fill");
    check_poisoned(where(condition, a.detach(), b.detach()),
                   [&](const Tensor& out) {
                     kernels::where.get(kGPU, "where")(out, condition.to(kGPU), a.detach().to(kGPU),
                                                       b.detach().to(kGPU));
                   },
                   "where");
  }
  const Tensor condition = gt(randn({9}), 0.0);
  const Tensor ints = randint(0, 9, {9}), bools = gt(randn({9}), 0.0);
  check_parity(where(condition.to(kGPU), ints.to(kGPU), ints.to(kGPU).neg()), where(condition, ints, ints.neg()), 0.0,
               "where int64");
  check_parity(where(condition.to(kGPU), bools.to(kGPU), logical_not(bools).to(kGPU)),
               where(condition, bools, logical_not(bools)), 0.0, "where bool");
}

TEST_CASE("tril and triu match the CPU for every diagonal, batched, with gradients") {
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  manual_seed(seed);
  for (DType dtype : {kFloat32, kFloat64}) {
    const Tensor x = as_leaf(randn({3, 5, 7}, dtype));
    for (int64_t diagonal : {-6, -2, 0, 1, 3, 8}) {
      check_op_parity([diagonal](const Inputs& in) { return tril(in[0], diagonal); }, {x}, 0.0, "tril");
      check_op_parity([diagonal](const Inputs& in) { return triu(in[0].transpose(1, 2), diagonal); }, {x}, 0.0,
                      "triu transposed");
    }
  }
  const Tensor causal = ones({4, 4}, kBool);
  check_parity(tril(causal.to(kGPU)), tril(causal), 0.0, "tril bool");
  const Tensor integers = randint(0, 9, {3, 3});
  check_parity(triu(integers.to(kGPU), 1), triu(integers, 1), 0.0, "triu int64");
}

TEST_CASE("every dtype converts to every other on the GPU as on the CPU, contiguous or not") {
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  manual_seed(seed);
  // Fractions of both signs (truncated toward 0 by int64, nonzero to bool), and some zeros.
  const Tensor values = where(gt(rand({6, 7}), 0.8), zeros({6, 7}), mul(randn({6, 7}), 5.0));
  for (DType from : {kFloat32, kFloat64, kInt64, kBool}) {
    const Tensor host = from == kBool ? gt(values, 0.0) : values.to(from);
    const Tensor device = host.to(kGPU);
    for (DType to : {kFloat32, kFloat64, kInt64, kBool}) {
      const std::string name = std::string(dtype_name(from)) + " to " + std::string(dtype_name(to));
      check_parity(device.to(to), host.to(to), 0.0, name);
      check_parity(device.t().to(to), host.t().to(to), 0.0, name + " transposed");
    }
  }
}

TEST_CASE("empty tensors pass through the elementwise kernels, copies and factories") {
  const Tensor x = randn({0, 5}), y = randn({5});
  const Tensor gx = x.to(kGPU), gy = y.to(kGPU);
  for (UnaryOp op : kDifferentiableUnary) {
    check_parity(apply_unary(op, gx), apply_unary(op, x), 0.0, std::string(unary_op_name(op)) + " of an empty tensor");
  }
  check_parity(add(gx, gy), add(x, y), 0.0, "add, empty with broadcast");
  check_parity(lt(gx, gy), lt(x, y), 0.0, "lt, empty with broadcast");
  check_parity(clamp(gx, -1.0, 1.0), clamp(x, -1.0, 1.0), 0.0, "clamp of an empty tensor");
  check_parity(where(gt(gx, 0.0), gx, gy), where(gt(x, 0.0), x, y), 0.0, "where of empty tensors");
  check_parity(tril(randn({3, 0, 4}).to(kGPU)), tril(randn({3, 0, 4})), 0.0, "tril of empty matrices");
  check_parity(gx.t().contiguous(), x.t().contiguous(), 0.0, "contiguous of an empty view");
  check_parity(gx.to(kInt64), x.to(kInt64), 0.0, "conversion of an empty tensor");
  check_parity(full({0, 3}, 1.0, kGPU), full({0, 3}, 1.0), 0.0, "full, empty");
  check_parity(arange(0.0, TensorOptions(kFloat32).device(kGPU)), arange(0.0), 0.0, "arange, empty");
  check_parity(rand({0}, TensorOptions(kFloat32).device(kGPU)), rand({0}), 0.0, "rand, empty");
  CHECK(gx.cpu().sizes() == Shape{0, 5});
  CHECK_NOTHROW(ember::cuda::synchronize());  // no launch error is pending either
}

TEST_CASE("a large elementwise op covers every element across many blocks") {
  const Tensor x = randn({3, 1000, 1001});
  const Tensor y = randn({1000, 1});
  check_parity(add(x.to(kGPU).transpose(0, 2), y.t().to(kGPU).unsqueeze(2)), add(x.transpose(0, 2), y.t().unsqueeze(2)),
               0.0, "large broadcast add");
}

// --- bfloat16 and float16 -----------------------------------------------------------------------
// Each op in 16 bits against the CPU in the same dtype, forward and backward, and against the
// float32 op on the GPU on the same rounded inputs, rounded (check_half_op_parity, parity.h).

TEST_CASE("every unary op and clamp match in bfloat16 and float16, forward and backward") {
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  manual_seed(seed);
  for (const DType dtype : kHalfDTypes) {
    for (UnaryOp op : kDifferentiableUnary) {
      const std::string name(unary_op_name(op));
      const Tensor x = as_leaf(domain_input(op, {37, 65}, kFloat32));
      check_half_op_parity([op](const Inputs& in) { return apply_unary(op, in[0]); }, {x}, dtype, name);
      check_half_op_parity([op](const Inputs& in) { return apply_unary(op, in[0].t()); }, {x}, dtype,
                           name + " transposed");
    }
    const Tensor x = as_leaf(randn({20, 30}));
    check_half_op_parity([](const Inputs& in) { return clamp(in[0], -0.5, 0.7); }, {x}, dtype, "clamp");
    check_half_op_parity([](const Inputs& in) { return clamp(in[0].t(), std::nullopt, 0.2); }, {x}, dtype,
                         "clamp max only");
    // The predicates and sign on the special values: exact on both devices.
    const Tensor values = tensor<double>({-2.5, 0.0, 3.0, NAN, INFINITY, -INFINITY, 1e-30, 7e4}, {8}).to(dtype);
    for (UnaryOp op : {UnaryOp::Sign, UnaryOp::IsFinite, UnaryOp::IsNan, UnaryOp::Relu, UnaryOp::Abs, UnaryOp::Neg}) {
      check_parity(apply_unary(op, values.to(kGPU)), apply_unary(op, values), 0.0,
                   std::string(unary_op_name(op)) + " " + std::string(dtype_name(dtype)));
    }
    check_parity(clamp(values.to(kGPU), -1.0, 1.0), clamp(values, -1.0, 1.0), 0.0, "clamp of special values");
  }
}

TEST_CASE("every binary op matches in bfloat16 and float16, broadcast, transposed and with a scalar") {
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  manual_seed(seed);
  for (const DType dtype : kHalfDTypes) {
    for (BinaryOp op : kArithmetic) {
      const std::string name(binary_op_name(op));
      const bool positive = op == BinaryOp::Div || op == BinaryOp::Pow;
      const Tensor a = as_leaf(op == BinaryOp::Pow ? add(rand({4, 1, 6}), 0.5) : randn({4, 1, 6}));
      const Tensor b = as_leaf(positive ? add(rand({5, 6}), 0.5) : randn({5, 6}));
      const Tensor c = as_leaf(positive ? add(rand({6, 5}), 0.5) : randn({6, 5}));
      check_half_op_parity([op](const Inputs& in) { return apply_binary(op, in[0], in[1]); }, {a, b}, dtype,
                           name + " broadcast");
      check_half_op_parity([op](const Inputs& in) { return apply_binary(op, in[0], in[1].t()); }, {b, c}, dtype,
                           name + " transposed");
      check_half_op_parity(
          [op](const Inputs& in) { return apply_binary(op, in[0], scalar_operand(in[0], 1.5, "t")); }, {b}, dtype,
          name + " with a scalar");
    }
    // Few distinct values, so equality is common: the predicates are exact.
    const Tensor a = randint(-2, 3, {3, 1, 8}).to(dtype), b = randint(-2, 3, {8, 4}).to(dtype);
    for (BinaryOp op : kPredicates) {
      check_parity(binary_forward(op, a.to(kGPU), b.to(kGPU).t()), binary_forward(op, a, b.t()), 0.0,
                   std::string(binary_op_name(op)) + " " + std::string(dtype_name(dtype)));
    }
    check_nan_wins(dtype);
  }
}

TEST_CASE("where, masked_fill, tril and triu move bfloat16 and float16 elements exactly") {
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  manual_seed(seed);
  for (const DType dtype : kHalfDTypes) {
    const Tensor condition = gt(randn({4, 1, 6}), 0.0);
    const Tensor a = as_leaf(randn({5, 6})), b = as_leaf(randn({4, 5, 1}));
    check_half_op_parity([](const Inputs& in) { return where(in[0], in[1], in[2]); }, {condition, a, b}, dtype,
                         "where");
    const Tensor mask = gt(randn({6, 1}), 0.0);
    // -6e4 is within both 16-bit ranges (a fill value past them is refused, as in PyTorch).
    check_half_op_parity([](const Inputs& in) { return masked_fill(in[0].t(), in[1], -6e4); },
                         {as_leaf(randn({5, 6})), mask}, dtype, "masked_fill");
    const Tensor x = as_leaf(randn({3, 5, 7}));
    for (int64_t diagonal : {-2, 0, 3}) {
      check_half_op_parity([diagonal](const Inputs& in) { return tril(in[0], diagonal); }, {x}, dtype, "tril");
      check_half_op_parity([diagonal](const Inputs& in) { return triu(in[0].transpose(1, 2), diagonal); }, {x},
                           dtype, "triu transposed");
    }
    const Tensor rounded = randn({9}).to(dtype);
    check_parity(where(gt(rounded, 0.0).to(kGPU), rounded.to(kGPU), neg(rounded).to(kGPU)),
                 where(gt(rounded, 0.0), rounded, neg(rounded)), 0.0, "where is exact");
  }
}

TEST_CASE("every dtype converts to and from bfloat16 and float16 on the GPU as on the CPU") {
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  manual_seed(seed);
  // Fractions of both signs, zeros, large values and values below float16's normal range. (Past
  // float16's range a value becomes inf, whose conversion to int64 C++ leaves undefined and the
  // two devices answer differently: overflow is checked on its own below.)
  Tensor values = where(gt(rand({6, 7}), 0.8), zeros({6, 7}), mul(randn({6, 7}), 5.0));
  values = where(gt(rand({6, 7}), 0.9), mul(rand({6, 7}), 6e4), values);
  values = where(gt(rand({6, 7}), 0.9), mul(randn({6, 7}), 1e-6), values);
  const std::vector<DType> all = {kFloat32, kFloat64, kInt64, kBool, kBFloat16, kFloat16};
  for (DType from : all) {
    const Tensor host = from == kBool ? gt(values, 0.0) : values.to(from);
    const Tensor device = host.to(kGPU);
    for (DType to : all) {
      if (!is_16_bit_floating_point(from) && !is_16_bit_floating_point(to)) continue;
      const std::string name = std::string(dtype_name(from)) + " to " + std::string(dtype_name(to));
      check_parity(device.to(to), host.to(to), 0.0, name);
      check_parity(device.t().to(to), host.t().to(to), 0.0, name + " transposed");
      check_parity(device.t().contiguous().to(to), host.t().contiguous().to(to), 0.0, name + " made contiguous");
    }
  }
  // Past the largest finite value (65504 for float16): infinity, on both devices.
  const Tensor large = tensor<double>({65519.0, 65520.0, -7e4, 1e6, 3.5e38, -1e39, NAN}, {7});
  for (DType to : kHalfDTypes) {
    check_parity(large.to(kGPU).to(to), large.to(to), 0.0, "overflow to " + std::string(dtype_name(to)));
    check_parity(large.to(kFloat32).to(kGPU).to(to), large.to(kFloat32).to(to), 0.0,
                 "float32 overflow to " + std::string(dtype_name(to)));
  }
}

TEST_CASE("bfloat16 and float16 fill, arange, rand, randn and randint match the CPU's rounding") {
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  for (const DType dtype : kHalfDTypes) {
    const std::string name(dtype_name(dtype));
    const TensorOptions on_gpu = TensorOptions(dtype).device(kGPU);
    // 61,000 falls between two float16 values (32 apart there); a value past float16's largest
    // finite one, 65,504, is refused on both devices (tested on the CPU in test_scalar_range).
    for (const double value : {0.1, -3.3, 6.1e4, 1.0 + 0x1p-8 + 0x1p-30, 1e-7}) {
      check_parity(full({5, 3}, value, on_gpu), full({5, 3}, value, dtype), 0.0, "full " + name);
    }
    Tensor view = zeros({4, 6}, on_gpu);
    view.t().narrow(0, 1, 3).fill_(2.5);
    Tensor host_view = zeros({4, 6}, dtype);
    host_view.t().narrow(0, 1, 3).fill_(2.5);
    check_parity(view, host_view, 0.0, "fill_ of a view " + name);
    check_parity(arange(-3.0, 300.0, 0.7, on_gpu), arange(-3.0, 300.0, 0.7, dtype), 0.0, "arange " + name);
    // The same draws on both devices: float32's numbers, rounded by the CPU's rules.
    manual_seed(seed);
    const Tensor uniform = rand({4099}, on_gpu);
    manual_seed(seed);
    check_parity(uniform, rand({4099}, dtype), 0.0, "rand " + name);
    CHECK(all(lt(uniform, 1.0)).item<bool>());
    manual_seed(seed);
    const Tensor normal = randn({4099}, on_gpu);
    manual_seed(seed);
    check_parity(normal, randn({4099}, dtype), 0.0, "randn " + name);
    manual_seed(seed);
    check_parity(normal, randn({4099}, TensorOptions(kFloat32).device(kGPU)).to(dtype), 0.0,
                 "randn is float32's draw, rounded " + name);
    manual_seed(seed);
    const Tensor integers = randint(-70000, 70000, {999}, on_gpu);
    manual_seed(seed);
    check_parity(integers, randint(-70000, 70000, {999}, dtype), 0.0, "randint " + name);
  }
}
