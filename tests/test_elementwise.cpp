// Binary elementwise ops: values against naive loops under broadcasting and strided operands,
// scalar forms and operators, int64 and bool results, errors, and gradients.
#include <cmath>
#include <functional>

#include "helpers.h"

using namespace ember;
using namespace ember::testing;

namespace {

using Reference = std::function<double(double, double)>;

// The value at multi-index `index` of `shape` in a row-major vector of a tensor of shape
// `from`, broadcast to `shape` (size-1 and missing leading dims repeat).
double broadcast_at(const std::vector<double>& data, const Shape& from, const Shape& shape, const Shape& index) {
  const size_t lead = shape.size() - from.size();
  int64_t flat = 0;
  for (size_t d = 0; d < from.size(); ++d) flat = flat * from[d] + (from[d] == 1 ? 0 : index[lead + d]);
  return data[flat];
}

// f applied elementwise by a plain loop over the broadcast shape.
Tensor naive_binary(const Tensor& a, const Tensor& b, const Reference& f, DType out_dtype) {
  const Shape shape = broadcast_shapes(a.sizes(), b.sizes(), "test");
  const std::vector<double> da = a.to_vector<double>(), db = b.to_vector<double>();
  std::vector<double> out(numel_of(shape));
  Shape index(shape.size(), 0);
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = f(broadcast_at(da, a.sizes(), shape, index), broadcast_at(db, b.sizes(), shape, index));
    for (size_t d = shape.size(); d-- > 0;) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
  return tensor(out, shape).to(out_dtype);
}

struct BinaryCase {
  const char* name;
  Tensor (*op)(const Tensor&, const Tensor&);
  Reference reference;
};

const std::vector<BinaryCase>& arithmetic_cases() {
  static const std::vector<BinaryCase> cases = {
      {"add", add, [](double x, double y) { return x + y; }},
      {"sub", sub, [](double x, double y) { return x - y; }},
      {"mul", mul, [](double x, double y) { return x * y; }},
      {"div", div, [](double x, double y) { return x / y; }},
      {"pow", pow, [](double x, double y) { return std::pow(x, y); }},
      {"maximum", maximum, [](double x, double y) { return std::max(x, y); }},
      {"minimum", minimum, [](double x, double y) { return std::min(x, y); }},
  };
  return cases;
}

// Positive values (so pow is real) away from zero (so div is tame).
Tensor positive(const Shape& shape, DType dtype) { return add(rand(shape, dtype), 0.5); }

// Pairs of operands: broadcasting shapes, a 0-d scalar, transposed and step-sliced views.
std::vector<std::pair<Tensor, Tensor>> operand_pairs(DType dtype) {
  return {
      {positive({2, 3}, dtype), positive({2, 3}, dtype)},
      {positive({3, 1}, dtype), positive({1, 4}, dtype)},
      {positive({2, 3, 4}, dtype), positive({4}, dtype)},
      {positive({}, dtype), positive({2, 3}, dtype)},
      {positive({2, 3}, dtype), positive({}, dtype)},
      {positive({4, 3}, dtype).t(), positive({3, 4}, dtype)},
      {positive({3, 8}, dtype).slice(1, 1, 8, 2), positive({4, 3}, dtype).t()},
      {positive({5, 1, 6}, dtype).slice(2, 0, 6, 3), positive({3, 1}, dtype)},
      // Large enough to split across threads, with broadcasting and a transposed operand.
      {positive({300, 200}, dtype).t(), positive({300}, dtype)},
  };
}

}  // namespace

TEST_CASE("every arithmetic op matches a naive loop under broadcasting and strides") {
  for (DType dtype : {kFloat32, kFloat64}) {
    for (const BinaryCase& c : arithmetic_cases()) {
      for (const auto& [a, b] : operand_pairs(dtype)) {
        INFO(std::string(c.name) << " " << dtype_name(dtype) << " " << shape_str(a.sizes()) << " with " << shape_str(b.sizes()));
        const Tensor out = c.op(a, b);
        CHECK(out.dtype() == dtype);
        CHECK(out.is_contiguous());
        check_close(out, naive_binary(a, b, c.reference, dtype), 1e-6, dtype == kFloat32 ? 1e-6 : 1e-12);
      }
    }
  }
}

TEST_CASE("maximum and minimum let NaN win") {
  const Tensor a = tensor({1.0f, NAN, 3.0f});
  const Tensor b = tensor({NAN, 2.0f, 1.0f});
  const std::vector<float> high = maximum(a, b).to_vector<float>();
  const std::vector<float> low = minimum(a, b).to_vector<float>();
  CHECK(std::isnan(high[0]));
  CHECK(std::isnan(high[1]));
  CHECK(high[2] == 3.0f);
  CHECK(std::isnan(low[0]));
  CHECK(std::isnan(low[1]));
  CHECK(low[2] == 1.0f);
}

TEST_CASE("scalar overloads and C++ operators") {
  const Tensor x = tensor({1.0, 2.0, 4.0}, {3});
  const Tensor y = tensor({2.0, 8.0, 0.5}, {3});
  auto near = [](const Tensor& t, std::vector<double> expected) { check_close(t, tensor(expected, {3}), 1e-12, 1e-12); };
  near(add(x, 1.5), {2.5, 3.5, 5.5});
  near(sub(x, 1.0), {0, 1, 3});
  near(mul(x, -2.0), {-2, -4, -8});
  near(div(x, 4.0), {0.25, 0.5, 1});
  near(pow(x, 2.0), {1, 4, 16});
  near(pow(x, 0.5), {1, std::sqrt(2.0), 2});
  near(pow(x, -1.0), {1, 0.5, 0.25});
  near(pow(2.0, x), {2, 4, 16});
  near(x + y, {3, 10, 4.5});
  near(x - y, {-1, -6, 3.5});
  near(x * y, {2, 16, 2});
  near(x / y, {0.5, 0.25, 8});
  near(x + 1.0, {2, 3, 5});
  near(1.0 + x, {2, 3, 5});
  near(x - 1.0, {0, 1, 3});
  near(10.0 - x, {9, 8, 6});
  near(x * 3.0, {3, 6, 12});
  near(3.0 * x, {3, 6, 12});
  near(x / 2.0, {0.5, 1, 2});
  near(8.0 / x, {8, 4, 2});
  near(-x, {-1, -2, -4});
  CHECK(add(x, 1.0).dtype() == kFloat64);  // the scalar takes the tensor's dtype
  CHECK(mul(tensor({1.0f, 2.0f}), 0.1).dtype() == kFloat32);
}

TEST_CASE("int64 arithmetic stays exact and integral") {
  const Tensor a = tensor<int64_t>({7, -7, 3000000000, 5}, {4});
  const Tensor b = tensor<int64_t>({2, 2, 3, -5}, {4});
  CHECK(add(a, b).to_vector<int64_t>() == std::vector<int64_t>{9, -5, 3000000003, 0});
  CHECK(sub(a, b).to_vector<int64_t>() == std::vector<int64_t>{5, -9, 2999999997, 10});
  CHECK(mul(a, b).to_vector<int64_t>() == std::vector<int64_t>{14, -14, 9000000000, -25});
  CHECK(maximum(a, b).to_vector<int64_t>() == std::vector<int64_t>{7, 2, 3000000000, 5});
  CHECK(minimum(a, b).to_vector<int64_t>() == std::vector<int64_t>{2, -7, 3, -5});
  CHECK(add(a, 2.0).to_vector<int64_t>() == std::vector<int64_t>{9, -5, 3000000002, 7});
  CHECK(mul(a, -1.0).dtype() == kInt64);
  CHECK((a * 2.0).to_vector<int64_t>() == std::vector<int64_t>{14, -14, 6000000000, 10});
  // Broadcasting works for int64 as for floats.
  CHECK(add(tensor({1, 2}, {2, 1}), tensor({10, 20, 30})).to_vector<int64_t>() ==
        std::vector<int64_t>{11, 21, 31, 12, 22, 32});
}

TEST_CASE("comparisons and logical ops give bool tensors") {
  const Tensor a = tensor({1.0f, 2.0f, 3.0f, NAN});
  const Tensor b = tensor({2.0f, 2.0f, 2.0f, 2.0f});
  CHECK(eq(a, b).dtype() == kBool);
  CHECK(eq(a, b).to_vector<bool>() == std::vector<bool>{false, true, false, false});
  CHECK(ne(a, b).to_vector<bool>() == std::vector<bool>{true, false, true, true});
  CHECK(lt(a, b).to_vector<bool>() == std::vector<bool>{true, false, false, false});
  CHECK(le(a, b).to_vector<bool>() == std::vector<bool>{true, true, false, false});
  CHECK(gt(a, b).to_vector<bool>() == std::vector<bool>{false, false, true, false});
  CHECK(ge(a, b).to_vector<bool>() == std::vector<bool>{false, true, true, false});
  CHECK(gt(a, 1.5).to_vector<bool>() == std::vector<bool>{false, true, true, false});
  CHECK(eq(tensor({1, 2, 3}), 2.0).to_vector<bool>() == std::vector<bool>{false, true, false});
  // Broadcast [3, 1] against [1, 2].
  CHECK(lt(tensor({1, 2, 3}, {3, 1}), tensor({2, 3}, {1, 2})).to_vector<bool>() ==
        std::vector<bool>{true, true, false, true, false, false});

  const Tensor p = tensor({true, true, false, false});
  const Tensor q = tensor({true, false, true, false});
  CHECK(logical_and(p, q).to_vector<bool>() == std::vector<bool>{true, false, false, false});
  CHECK(logical_or(p, q).to_vector<bool>() == std::vector<bool>{true, true, true, false});
  CHECK(logical_not(p).to_vector<bool>() == std::vector<bool>{false, false, true, true});
  CHECK(eq(p, q).to_vector<bool>() == std::vector<bool>{true, false, false, true});
  // Nonzero counts as true.
  CHECK(logical_and(tensor({0.0f, 2.0f, -1.0f}), tensor({1.0f, 0.5f, 0.0f})).to_vector<bool>() ==
        std::vector<bool>{false, true, false});
  CHECK(logical_not(tensor({0, 3})).to_vector<bool>() == std::vector<bool>{true, false});

  // Comparisons have no gradient.
  const Tensor x = ones({2}, TensorOptions(kFloat64).requires_grad(true));
  CHECK_FALSE(gt(x, 0.0).requires_grad());
  CHECK_FALSE(eq(x, x).requires_grad());
}

TEST_CASE("binary op errors name the op and the operands") {
  const Tensor f = ones({2, 3});
  CHECK_THROWS_WITH_ALL(add(f, ones({4})), "add: shapes [2, 3] and [4] cannot be broadcast");
  CHECK_THROWS_WITH_ALL(mul(ones({3, 2}), f), "mul", "[3, 2]", "[2, 3]", "cannot be broadcast");
  CHECK_THROWS_WITH_ALL(lt(ones({2}), ones({3})), "lt", "[2]", "[3]");
  CHECK_THROWS_WITH_ALL(f + ones({3, 3}), "add", "[2, 3]", "[3, 3]");
  CHECK_THROWS_WITH_ALL(add(f, ones({2, 3}, kFloat64)), "add", "dtype mismatch", "float32", "float64");
  CHECK_THROWS_WITH_ALL(eq(f, ones({2, 3}, kInt64)), "eq", "dtype mismatch", "float32", "int64");
  // An empty CUDA tensor needs no memory, so it exists even without a GPU.
  const Tensor on_gpu = empty({0}, Device::cuda());
  CHECK_THROWS_WITH_ALL(sub(empty({0}), on_gpu), "sub", "device mismatch", "cpu", "cuda:0");

  const Tensor i = tensor({1, 2});
  CHECK_THROWS_WITH_ALL(add(i, 0.5), "add", "scalar 0.5", "not an integer", "int64");
  CHECK_THROWS_WITH_ALL(mul(i, 1.5), "mul", "1.5", "int64");
  CHECK_THROWS_WITH_ALL(div(i, i), "div", "floating point", "int64");
  CHECK_THROWS_WITH_ALL(div(i, 2.0), "div", "floating point", "int64");
  CHECK_THROWS_WITH_ALL(pow(i, i), "pow", "floating point", "int64");
  CHECK_THROWS_WITH_ALL(pow(i, 2.0), "pow", "floating point", "int64");
  const Tensor b = tensor({true, false});
  CHECK_THROWS_WITH_ALL(add(b, b), "add", "bool");
  CHECK_THROWS_WITH_ALL(maximum(b, b), "maximum", "bool");
  CHECK_THROWS_WITH_ALL(add(Tensor(), f), "add", "undefined");
}

TEST_CASE("gradients of every binary op, with broadcast and non-contiguous operands") {
  using Inputs = const std::vector<Tensor>&;
  using Op = Tensor (*)(const Tensor&, const Tensor&);
  const std::pair<const char*, Op> ops[] = {{"add", add}, {"sub", sub}, {"mul", mul}, {"div", div}};
  for (const auto& [name, op] : ops) {
    INFO(std::string(name));
    auto fn = [op](Inputs in) { return op(in[0], in[1]); };
    CHECK_GRADCHECK(fn, {leaf({2, 3}), add(leaf({2, 3}), 3.0).detach().requires_grad_()});
    CHECK_GRADCHECK(fn, {leaf({3, 1}), add(leaf({1, 4}), 3.0).detach().requires_grad_()});
    CHECK_GRADCHECK(fn, {leaf({2, 3, 4}), add(leaf({4}), 3.0).detach().requires_grad_()});
    CHECK_GRADCHECK(fn, {leaf({}), add(leaf({2, 3}), 3.0).detach().requires_grad_()});
    // Non-contiguous leaves: a transposed one, and one sliced with a step inside fn.
    CHECK_GRADCHECK([op](Inputs in) { return op(in[0], in[1].slice(1, 0, 8, 2)); },
                    {as_leaf(leaf({4, 3}).t()), add(leaf({3, 8}), 3.0).detach().requires_grad_()});
    // Only one operand requires grad.
    CHECK_GRADCHECK(fn, {leaf({2, 2}), add(randn({2, 2}, kFloat64), 3.0)});
    CHECK_GRADCHECK(fn, {randn({2, 2}, kFloat64), add(leaf({2, 2}), 3.0).detach().requires_grad_()});
  }

  // pow with a positive base, tensor and scalar exponents.
  auto positive_leaf = [](const Shape& shape) { return add(rand(shape, kFloat64), 0.5).detach().requires_grad_(); };
  CHECK_GRADCHECK([](Inputs in) { return pow(in[0], in[1]); }, {positive_leaf({2, 3}), leaf({2, 3})});
  CHECK_GRADCHECK([](Inputs in) { return pow(in[0], in[1]); }, {positive_leaf({3, 1}), leaf({4})});
  CHECK_GRADCHECK([](Inputs in) { return pow(in[0].t(), in[1]); }, {positive_leaf({3, 2}), leaf({})});
  CHECK_GRADCHECK([](Inputs in) { return pow(in[0], 3.0); }, {leaf({2, 3})});
  CHECK_GRADCHECK([](Inputs in) { return pow(in[0], 2.0); }, {leaf({2, 3})});
  CHECK_GRADCHECK([](Inputs in) { return pow(in[0], -1.5); }, {positive_leaf({4})});
  CHECK_GRADCHECK([](Inputs in) { return pow(2.0, in[0]); }, {leaf({4})});
  CHECK_GRADCHECK([](Inputs in) { return 1.0 / in[0] - 2.0 * in[0]; }, {positive_leaf({3})});

  // maximum and minimum away from ties: the operands differ by at least 0.1 everywhere.
  for (Op op : {Op(maximum), Op(minimum)}) {
    const Tensor a = tensor({0.0, 1.0, -1.0, 2.0, 0.5, -0.5}, {2, 3}).requires_grad_();
    const Tensor b = tensor({0.3, -0.2, 0.1, 1.0}, {4, 1}).requires_grad_();
    CHECK_GRADCHECK([op](Inputs in) { return op(in[0].t(), in[1].slice(0, 0, 4, 2).t()); }, {a, b});
    CHECK_GRADCHECK([op](Inputs in) { return op(in[0], in[1]); }, {as_leaf(a.t()), tensor({0.25, 0.75}, {2})});
  }
}

TEST_CASE("maximum and minimum split the gradient evenly at ties") {
  const Tensor a = tensor({1.0, 2.0, 3.0}, {3}).requires_grad_();
  const Tensor b = tensor({1.0, 5.0, 0.0}, {3}).requires_grad_();
  maximum(a, b).sum().backward();
  check_close(a.grad(), tensor({0.5, 0.0, 1.0}, {3}));
  check_close(b.grad(), tensor({0.5, 1.0, 0.0}, {3}));
}
