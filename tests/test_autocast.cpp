// Autocast: which dtype each op computes in inside a scope — read from the kernels
// themselves — how gradients come back to float32 parameters, the parameter-cast cache,
// nesting, and errors.
#include <thread>
#include <tuple>

#include "core/autograd/node.h"
#include "helpers.h"

using namespace ember;
using namespace ember::testing;

namespace {

template <class Table>
struct signature_of;
template <class Fn>
struct signature_of<KernelTable<Fn>> {
  using type = Fn;
};

// Puts a spy in front of a kernel table's CPU kernel that notes the dtype of argument `Input`
// on every call, then calls the kernel: what a kernel computed in, seen from the kernel's side
// rather than assumed from the op's output. Installed on the first watch() and left in place
// (it only forwards); watch() forgets what was seen before.
template <auto& Table, size_t Input, class Fn = typename signature_of<std::remove_cvref_t<decltype(Table)>>::type>
struct KernelDtypes;

template <auto& Table, size_t Input, class Result, class... Args>
struct KernelDtypes<Table, Input, Result(Args...)> {
  static std::vector<DType>& seen() {
    static std::vector<DType> dtypes;
    return dtypes;
  }
  static KernelCall<Result(Args...)>& kernel() {
    static KernelCall<Result(Args...)> call = Table[kCPU];
    return call;
  }
  static Result spy(Args... args) {
    seen().push_back(std::get<Input>(std::tie(args...)).dtype());
    return kernel()(std::forward<Args>(args)...);
  }
  static void watch() {
    static const bool installed = [] {
      kernel();
      Table.set(DeviceType::CPU, &spy);
      return true;
    }();
    (void)installed;
    seen().clear();
  }
};

using GemmDtypes = KernelDtypes<kernels::gemm, 1>;              // (out, a, b, beta)
using SoftmaxDtypes = KernelDtypes<kernels::softmax, 1>;        // (out, x, ...)
using LayerNormDtypes = KernelDtypes<kernels::layer_norm, 3>;   // (y, mean, rstd, x, ...)
using CrossEntropyDtypes = KernelDtypes<kernels::cross_entropy, 3>;  // (losses, max, log_sum, logits, ...)
using SumDtypes = KernelDtypes<kernels::sum, 1>;                // (out, x, mask)
using LogsumexpDtypes = KernelDtypes<kernels::logsumexp, 1>;    // (out, x, mask)
using BinaryLeftDtypes = KernelDtypes<kernels::binary, 2>;      // (op, out, a, b)
using AttentionDtypes = KernelDtypes<kernels::attention, 1>;    // (out, q, k, v, ...)
using CopySources = KernelDtypes<kernels::copy, 1>;     // (dst, src)

// Every dtype seen is `dtype`, and there was at least one call.
void check_all(const std::vector<DType>& seen, DType dtype) {
  REQUIRE_FALSE(seen.empty());
  for (const DType d : seen) CHECK(d == dtype);
}

Tensor float32_leaf(const Shape& shape, double scale = 1.0) {
  Tensor x = mul(randn(shape), scale).detach();
  x.requires_grad_(true);
  return x;
}

Tensor bfloat16_leaf(const Shape& shape) {
  Tensor x = randn(shape).to(kBFloat16).detach();
  x.requires_grad_(true);
  return x;
}

}  // namespace

TEST_CASE("autocast: a guard turns it on for its device type, nests, can turn it off, and restores") {
  CHECK_FALSE(autocast::is_enabled(DeviceType::CPU));
  {
    AutocastGuard outer(DeviceType::CPU, kBFloat16);
    CHECK(autocast::is_enabled(DeviceType::CPU));
    CHECK(autocast::dtype(DeviceType::CPU) == kBFloat16);
    CHECK_FALSE(autocast::is_enabled(DeviceType::CUDA));  // each device type has its own state
    {
      AutocastGuard inner(DeviceType::CPU, kFloat16);
      CHECK(autocast::dtype(DeviceType::CPU) == kFloat16);
      {
        AutocastGuard off(DeviceType::CPU, false);
        CHECK_FALSE(autocast::is_enabled(DeviceType::CPU));
        // Off, ops see exactly what they are given: a mismatch is the op's error again.
        CHECK_THROWS_WITH_ALL(add(randn({2}).to(kBFloat16), randn({2})), "add", "bfloat16", "float32");
      }
      CHECK(autocast::is_enabled(DeviceType::CPU));
      CHECK(autocast::dtype(DeviceType::CPU) == kFloat16);
    }
    CHECK(autocast::dtype(DeviceType::CPU) == kBFloat16);
    // The loop form: a precision's dtype passed either way, on only for 16-bit.
    {
      AutocastGuard fp32_loop(DeviceType::CPU, kFloat32, /*enabled=*/false);
      CHECK_FALSE(autocast::is_enabled(DeviceType::CPU));
    }
    CHECK(autocast::is_enabled(DeviceType::CPU));
  }
  CHECK_FALSE(autocast::is_enabled(DeviceType::CPU));
  {
    AutocastGuard cuda_only(DeviceType::CUDA, kBFloat16);
    CHECK(autocast::is_enabled(DeviceType::CUDA));
    CHECK_FALSE(autocast::is_enabled(DeviceType::CPU));
    // A scope for CUDA leaves CPU tensors alone.
    CHECK_THROWS_WITH_ALL(add(randn({2}).to(kBFloat16), randn({2})), "add", "bfloat16", "float32");
  }
}

TEST_CASE("autocast: the state belongs to the thread that opened the scope") {
  AutocastGuard autocast(DeviceType::CPU, kBFloat16);
  bool enabled_elsewhere = true;
  std::thread other([&] { enabled_elsewhere = autocast::is_enabled(DeviceType::CPU); });
  other.join();
  CHECK_FALSE(enabled_elsewhere);
  CHECK(autocast::is_enabled(DeviceType::CPU));
}

TEST_CASE("autocast: its dtype must be bfloat16 or float16") {
  CHECK_THROWS_WITH_ALL(AutocastGuard(DeviceType::CPU, kFloat32),
                        "autocast: dtype must be bfloat16 or float16, got float32");
  CHECK_THROWS_WITH_ALL(AutocastGuard(DeviceType::CUDA, kFloat64), "autocast", "got float64");
  CHECK_THROWS_WITH_ALL(AutocastGuard(DeviceType::CPU, kInt64), "autocast", "got int64");
  // A refused guard changes nothing.
  CHECK_FALSE(autocast::is_enabled(DeviceType::CPU));
  CHECK_FALSE(autocast::is_enabled(DeviceType::CUDA));
}

TEST_CASE("autocast: softmax, log_softmax, layer_norm, the losses and sum, mean, logsumexp compute in float32") {
  manual_seed(1);
  AutocastGuard autocast(DeviceType::CPU, kBFloat16);
  const Tensor x = bfloat16_leaf({4, 6});

  SoftmaxDtypes::watch();
  CHECK(softmax(x, -1).dtype() == kFloat32);
  CHECK(log_softmax(x, 0).dtype() == kFloat32);
  check_all(SoftmaxDtypes::seen(), kFloat32);

  LayerNormDtypes::watch();
  const Tensor weight = ones({6}), bias = zeros({6});
  CHECK(layer_norm(x, {6}, weight, bias).dtype() == kFloat32);
  CHECK(layer_norm(x, {6}, weight.to(kBFloat16), bias.to(kBFloat16)).dtype() == kFloat32);
  check_all(LayerNormDtypes::seen(), kFloat32);

  CrossEntropyDtypes::watch();
  const Tensor targets = tensor(std::vector<int64_t>{0, 5, 2, 3}, Shape{4});
  CHECK(cross_entropy(x, targets).dtype() == kFloat32);
  CHECK(nn::cross_entropy(x, targets).dtype() == kFloat32);
  check_all(CrossEntropyDtypes::seen(), kFloat32);
  CHECK(nn::nll_loss(x, targets).dtype() == kFloat32);
  CHECK(nn::mse_loss(x, zeros({4, 6}).to(kBFloat16)).dtype() == kFloat32);

  SumDtypes::watch();
  CHECK(sum(x).dtype() == kFloat32);
  CHECK(sum(x, {1}).dtype() == kFloat32);
  CHECK(mean(x).dtype() == kFloat32);
  CHECK(mean(x, {0}, true).dtype() == kFloat32);
  check_all(SumDtypes::seen(), kFloat32);

  LogsumexpDtypes::watch();
  CHECK(logsumexp(x, {1}).dtype() == kFloat32);
  check_all(LogsumexpDtypes::seen(), kFloat32);

  // The casts are recorded: the gradient comes back to the bfloat16 input in bfloat16, equal to
  // the float32 computation's gradient rounded once.
  const Tensor loss = add(sum(softmax(x, -1).pow(2.0)), logsumexp(x, {1}).sum());
  loss.backward();
  REQUIRE(x.grad().defined());
  CHECK(x.grad().dtype() == kBFloat16);
  const Tensor x32 = as_leaf(x.to(kFloat32));
  {
    AutocastGuard off(DeviceType::CPU, false);
    add(sum(softmax(x32, -1).pow(2.0)), logsumexp(x32, {1}).sum()).backward();
  }
  check_close(x.grad().to(kFloat32), x32.grad().to(kBFloat16).to(kFloat32), 0, 0);
}

TEST_CASE("autocast: a float32 op leaves float32 and float64 inputs as they are") {
  AutocastGuard autocast(DeviceType::CPU, kBFloat16);
  CopySources::watch();
  const Tensor x = randn({3, 4}), y = randn({3, 4}, kFloat64);
  CHECK(softmax(x, -1).dtype() == kFloat32);
  CHECK(sum(y).dtype() == kFloat64);
  CHECK(add(x, x).dtype() == kFloat32);
  CHECK(CopySources::seen().empty());  // nothing was converted
}

TEST_CASE("autocast: a 16-bit operand meets a float32 one in float32") {
  manual_seed(2);
  const Tensor low = bfloat16_leaf({2, 3});
  const Tensor high = float32_leaf({3});  // broadcast, as a bias or a residual
  {
    AutocastGuard autocast(DeviceType::CPU, kBFloat16);
    BinaryLeftDtypes::watch();
    using Binary = Tensor (*)(const Tensor&, const Tensor&);
    for (const Binary op : std::initializer_list<Binary>{add, sub, mul, div, maximum, minimum}) {
      CHECK(op(low, high).dtype() == kFloat32);
      CHECK(op(high, low).dtype() == kFloat32);
    }
    CHECK(pow(low, high).dtype() == kFloat32);
    // Comparisons widen alike (their result is bool).
    for (const Binary op : std::initializer_list<Binary>{eq, ne, lt, le, gt, ge}) CHECK(op(low, high).dtype() == kBool);
    CHECK((low + high).dtype() == kFloat32);
    check_all(BinaryLeftDtypes::seen(), kFloat32);
    // bfloat16 beside float16 widens too; float64 beside float32 does not: that is no 16-bit
    // question, and the op says so as everywhere else.
    CHECK(add(low, randn({3}).to(kFloat16)).dtype() == kFloat32);
    CHECK_THROWS_WITH_ALL(add(randn({3}), randn({3}, kFloat64)), "add", "float32", "float64");

    const Tensor loss = sum(mul(add(low, high), high));
    loss.backward();
  }
  // Each operand's gradient comes back in its own dtype.
  REQUIRE(low.grad().defined());
  REQUIRE(high.grad().defined());
  CHECK(low.grad().dtype() == kBFloat16);
  CHECK(high.grad().dtype() == kFloat32);
  // Outside the scope the mismatch is an error again.
  CHECK_THROWS_WITH_ALL(add(low, high), "add", "bfloat16", "float32");
}

// --- products: these need the 16-bit CPU kernels ---------------------------------------------

TEST_CASE("autocast: matmul, bmm, linear, einsum and attention compute in the scope's 16-bit dtype") {
  manual_seed(3);
  for (const DType low : {kBFloat16, kFloat16}) {
    CAPTURE(dtype_name(low));
    AutocastGuard autocast(DeviceType::CPU, low);
    const Tensor a = randn({2, 3, 4}), b = randn({2, 4, 5});
    GemmDtypes::watch();
    CHECK(matmul(a, b).dtype() == low);
    CHECK(bmm(a, b).dtype() == low);
    CHECK(linear(a, randn({5, 4}), randn({5})).dtype() == low);
    CHECK(einsum("bij,bjk->bik", {a, b}).dtype() == low);
    CHECK(matmul(a.to(kBFloat16), b.to(kFloat16)).dtype() == low);  // any 16-bit mix goes to the scope's
    check_all(GemmDtypes::seen(), low);

    const Tensor q = randn({2, 3, 4}), k = randn({2, 5, 4}), v = randn({2, 5, 4});
    AttentionDtypes::watch();
    CHECK(scaled_dot_product_attention(q, k, v).dtype() == low);
    // A float mask is an operand too: cast with q, k and v, as the op wants them alike.
    CHECK(scaled_dot_product_attention(q, k, v, {.attn_mask = zeros({3, 5})}).dtype() == low);
    check_all(AttentionDtypes::seen(), low);
    GemmDtypes::watch();
    const AttentionResult with_weights = scaled_dot_product_attention_with_weights(q, k, v);
    CHECK(with_weights.output.dtype() == low);
    check_all(GemmDtypes::seen(), low);
    // softmax inside the composed form is float32, as everywhere in the scope.
    CHECK(with_weights.weights.dtype() == kFloat32);
  }
}

TEST_CASE("autocast: a float64 product stays float64") {
  AutocastGuard autocast(DeviceType::CPU, kBFloat16);
  GemmDtypes::watch();
  CHECK(matmul(randn({2, 3}, kFloat64), randn({3, 2}, kFloat64)).dtype() == kFloat64);
  check_all(GemmDtypes::seen(), kFloat64);
}

TEST_CASE("autocast: nn::Linear and nn::MultiHeadAttention go through the cast products") {
  manual_seed(4);
  nn::Linear linear(8, 4);
  nn::MultiHeadAttention attention(8, 2);
  const Tensor x = randn({2, 3, 8});
  AutocastGuard autocast(DeviceType::CPU, kBFloat16);
  GemmDtypes::watch();
  CHECK(linear.forward(x).dtype() == kBFloat16);
  CHECK(attention.forward(x, x, x).output.dtype() == kBFloat16);
  // Masks are made in the inputs' dtype (float32 here) and cast with q, k and v.
  const Tensor padding = tensor({false, false, true, false, false, false}, Shape{2, 3});
  CHECK(attention.forward(x, x, x, {.key_padding_mask = padding, .is_causal = true}).output.dtype() == kBFloat16);
  CHECK(attention.forward(x, x, x, {.key_padding_mask = padding, .attn_mask = zeros({3, 3})}).output.dtype() ==
        kBFloat16);
  const nn::MultiHeadAttentionOutput with_weights = attention.forward(x, x, x, {.need_weights = true});
  CHECK(with_weights.output.dtype() == kBFloat16);
  CHECK(with_weights.weights.dtype() == kFloat32);
  check_all(GemmDtypes::seen(), kBFloat16);
}

TEST_CASE("autocast: float32 parameters get float32 gradients close to the float32 run's") {
  // Linear -> GELU -> Linear -> residual -> LayerNorm -> cross_entropy: every rule at once.
  manual_seed(5);
  const Tensor w1 = float32_leaf({16, 8}, 0.3), b1 = float32_leaf({16}, 0.1);
  const Tensor w2 = float32_leaf({8, 16}, 0.3), b2 = float32_leaf({8}, 0.1);
  const Tensor x = randn({32, 8}), targets = randint(0, 8, {32});
  const std::vector<Tensor> params{w1, b1, w2, b2};
  auto loss_of = [&] {
    const Tensor hidden = gelu(linear(x, w1, b1));
    return cross_entropy(layer_norm(add(x, linear(hidden, w2, b2)), {8}), targets);
  };

  const Tensor loss32 = loss_of();
  loss32.backward();
  std::vector<Tensor> grads32;
  for (Tensor p : params) {
    grads32.push_back(p.grad());
    p.mutable_grad() = Tensor();
  }

  for (const DType low : {kBFloat16, kFloat16}) {
    CAPTURE(dtype_name(low));
    Tensor loss;
    {
      AutocastGuard autocast(DeviceType::CPU, low);
      loss = loss_of();
    }
    CHECK(loss.dtype() == kFloat32);
    loss.backward();
    // Tolerance: the products round their operands to the 16-bit format (relative error at most
    // u = 2^-8 for bfloat16, 2^-11 for float16) and their results once more; the backward's
    // products round the incoming gradient again. A few such roundings, each at most u of the
    // magnitudes involved, bound the error by a small multiple of u times the gradient's
    // largest entry: 8u leaves room for the sums in which they meet (measured: under 2u).
    const double u = low == kBFloat16 ? 0x1p-8 : 0x1p-11;
    CHECK(std::abs(loss.item() - loss32.item()) <= 8 * u * std::abs(loss32.item()));
    for (size_t i = 0; i < params.size(); ++i) {
      CAPTURE(i);
      Tensor p = params[i];
      REQUIRE(p.grad().defined());
      CHECK(p.grad().dtype() == kFloat32);
      const double scale = max_abs(grads32[i]);
      check_close(p.grad(), grads32[i], 8 * u * scale, 0);
      p.mutable_grad() = Tensor();
    }
  }
}

TEST_CASE("autocast: a parameter is cast once per outermost scope, and the cache is dropped on exit") {
  manual_seed(6);
  const Tensor weight = float32_leaf({4, 4}), bias = float32_leaf({4});
  const Tensor x = randn({2, 4});
  // The graph shows which cast an op read: linear's inputs are x, weight, bias, and the weight's
  // edge leads to the node of the cast, whose own edge leads to the parameter.
  auto weight_cast_of = [](const Tensor& out) { return out.grad_fn()->inputs[1].node; };
  {
    AutocastGuard autocast(DeviceType::CPU, kBFloat16);
    const Tensor first = linear(x, weight, bias);
    CHECK(autocast::cached_cast_count() == 2);  // weight and bias
    const std::shared_ptr<autograd::Node> cast = weight_cast_of(first);
    REQUIRE(cast != nullptr);
    CHECK(cast->op == "to");
    CHECK(cast->inputs[0].leaf.get() == weight.impl());
    Tensor second;
    {
      AutocastGuard inner(DeviceType::CPU, kBFloat16);  // a nested scope shares the cache
      second = linear(first, weight, bias);
    }
    CHECK(weight_cast_of(second) == cast);  // one cast, read twice
    CHECK(autocast::cached_cast_count() == 2);

    // A parameter read under NoGradGuard is cast but not kept: that cast carries no gradient,
    // and reused later it would leave the parameter without one.
    {
      NoGradGuard no_grad;
      (void)matmul(x, float32_leaf({4, 4}));
    }
    CHECK(autocast::cached_cast_count() == 2);

    // A parameter changed in place (an optimizer step inside the scope) is cast again.
    {
      NoGradGuard no_grad;
      Tensor w = weight;
      add_(w, 1.0);
    }
    const Tensor third = linear(x, weight, bias);
    CHECK(weight_cast_of(third) != cast);
    CHECK(autocast::cached_cast_count() == 2);

    sum(add(second, third)).backward();
    REQUIRE(weight.grad().defined());
    CHECK(weight.grad().dtype() == kFloat32);
  }
  CHECK(autocast::cached_cast_count() == 0);
  // A new scope casts afresh.
  AutocastGuard autocast(DeviceType::CPU, kBFloat16);
  const Tensor first = linear(x, weight, bias);
  CHECK(autocast::cached_cast_count() == 2);
  CHECK(weight_cast_of(first)->inputs[0].leaf.get() == weight.impl());
}
