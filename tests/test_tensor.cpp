// Tensors themselves: factories, random numbers and seeding, element access, dtype
// conversions, devices.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "helpers.h"

using namespace ember;
using namespace ember::testing;

namespace {

double mean_of(const std::vector<double>& values) {
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

double std_of(const std::vector<double>& values) {
  const double mean = mean_of(values);
  double sum = 0;
  for (double v : values) sum += (v - mean) * (v - mean);
  return std::sqrt(sum / static_cast<double>(values.size() - 1));
}

}  // namespace

TEST_CASE("empty, zeros, ones and full make the asked shape, dtype and values") {
  Tensor e = empty({2, 3}, kFloat64);
  CHECK(e.sizes() == Shape{2, 3});
  CHECK(e.strides() == Shape{3, 1});
  CHECK(e.dtype() == kFloat64);
  CHECK(e.is_cpu());
  CHECK(e.is_contiguous());
  CHECK_FALSE(e.requires_grad());

  CHECK(zeros({4}).to_vector<float>() == std::vector<float>(4, 0.0f));
  CHECK(ones({2, 2}, kInt64).to_vector<int64_t>() == std::vector<int64_t>(4, 1));
  CHECK(full({3}, 2.5, kFloat64).to_vector<double>() == std::vector<double>(3, 2.5));
  CHECK(full({2}, 1.0, kBool).to_vector<bool>() == std::vector<bool>{true, true});
  CHECK(zeros({}).dim() == 0);
  CHECK(zeros({}).numel() == 1);
  CHECK(zeros({0, 3}).numel() == 0);

  Tensor w = zeros({2}, TensorOptions(kFloat64).requires_grad(true));
  CHECK(w.requires_grad());
  CHECK(w.is_leaf());
  CHECK_THROWS_WITH_ALL(zeros({2, -1}), "negative size", "[2, -1]");
  // A shape whose byte count overflows int64 is refused, not allocated wrapped around.
  CHECK_THROWS_WITH_ALL(empty({int64_t{1} << 62}), "empty", "too large", "float32");
  CHECK_THROWS_WITH_ALL(zeros({int64_t{1} << 40, int64_t{1} << 40}, kFloat64), "full", "too large", "[1099511627776, 1099511627776]");
  CHECK_THROWS_WITH_ALL(zeros({2}, TensorOptions(kInt64).requires_grad(true)), "requires_grad_",
                        "floating point", "int64");
}

TEST_CASE("arange counts like torch.arange, with float and negative steps") {
  CHECK(arange(5.0).to_vector<float>() == std::vector<float>{0, 1, 2, 3, 4});
  CHECK(arange(5.0).dtype() == kFloat32);
  CHECK(arange(5.0, kInt64).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK(arange(2.0, 8.0, 2.0, kInt64).to_vector<int64_t>() == std::vector<int64_t>{2, 4, 6});
  CHECK(arange(0.0, 1.0, 0.25, kFloat64).to_vector<double>() == std::vector<double>{0, 0.25, 0.5, 0.75});
  CHECK(arange(5.0, 0.0, -1.5, kFloat64).to_vector<double>() == std::vector<double>{5, 3.5, 2, 0.5});
  CHECK(arange(0.0, 1.0, 0.3).numel() == 4);  // 0, 0.3, 0.6, 0.9: end excluded
  CHECK(arange(3.0, 3.0).numel() == 0);
  CHECK_THROWS_WITH_ALL(arange(0.0, 5.0, 0.0), "arange", "step must be nonzero");
  CHECK_THROWS_WITH_ALL(arange(0.0, 5.0, -1.0), "arange", "step -1 does not lead from 0 to 5");
  CHECK_THROWS_WITH_ALL(arange(0.0, INFINITY), "arange", "finite");
}

TEST_CASE("rand is uniform on [0, 1) and randn standard normal") {
  manual_seed(1);
  for (DType dtype : {kFloat32, kFloat64}) {
    const std::vector<double> u = rand({100000}, dtype).to_vector<double>();
    CHECK(*std::min_element(u.begin(), u.end()) >= 0.0);
    CHECK(*std::max_element(u.begin(), u.end()) < 1.0);
    CHECK(mean_of(u) == doctest::Approx(0.5).epsilon(0.01));
    CHECK(std_of(u) == doctest::Approx(std::sqrt(1.0 / 12.0)).epsilon(0.01));

    const std::vector<double> n = randn({100000}, dtype).to_vector<double>();
    CHECK(std::abs(mean_of(n)) < 0.015);
    CHECK(std_of(n) == doctest::Approx(1.0).epsilon(0.015));
    CHECK(std::all_of(n.begin(), n.end(), [](double v) { return std::isfinite(v); }));
  }
  CHECK_THROWS_WITH_ALL(rand({2}, kInt64), "rand", "int64");
  CHECK_THROWS_WITH_ALL(randn({2}, kBool), "randn", "bool");
}

TEST_CASE("randint covers [low, high) and nothing else") {
  manual_seed(2);
  const std::vector<int64_t> values = randint(-3, 4, {10000}).to_vector<int64_t>();
  const std::set<int64_t> seen(values.begin(), values.end());
  CHECK(seen == std::set<int64_t>{-3, -2, -1, 0, 1, 2, 3});
  CHECK(randint(0, 5, {2, 3}).dtype() == kInt64);
  CHECK(randint(0, 5, {2, 3}).sizes() == Shape{2, 3});
  CHECK_THROWS_WITH_ALL(randint(5, 5, {2}), "randint", "high (5) must be greater than low (5)");
}

TEST_CASE("manual_seed makes random draws repeatable") {
  manual_seed(42);
  const std::vector<float> first = rand({64}).to_vector<float>();
  const std::vector<float> second = rand({64}).to_vector<float>();
  const std::vector<double> normal = randn({7}, kFloat64).to_vector<double>();
  const std::vector<int64_t> integers = randint(0, 1000, {16}).to_vector<int64_t>();
  CHECK(first != second);  // consecutive draws differ

  manual_seed(42);
  CHECK(rand({64}).to_vector<float>() == first);
  CHECK(rand({64}).to_vector<float>() == second);
  CHECK(randn({7}, kFloat64).to_vector<double>() == normal);
  CHECK(randint(0, 1000, {16}).to_vector<int64_t>() == integers);

  manual_seed(43);
  CHECK(rand({64}).to_vector<float>() != first);
}

TEST_CASE("the *_like factories copy shape, dtype and device, not requires_grad") {
  const Tensor x = ones({2, 3}, TensorOptions(kFloat64).requires_grad(true));
  for (const Tensor& y : {empty_like(x), zeros_like(x), ones_like(x), full_like(x, 7.0), rand_like(x), randn_like(x)}) {
    CHECK(y.sizes() == Shape{2, 3});
    CHECK(y.dtype() == kFloat64);
    CHECK(y.device() == x.device());
    CHECK_FALSE(y.requires_grad());
  }
  CHECK(zeros_like(x).to_vector<double>() == std::vector<double>(6, 0.0));
  CHECK(full_like(x, 7.0).to_vector<double>() == std::vector<double>(6, 7.0));
  CHECK(ones_like(tensor({1, 2})).to_vector<int64_t>() == std::vector<int64_t>{1, 1});
}

TEST_CASE("tensor() from C++ values takes their dtype") {
  Tensor f = tensor({1.5f, 2.5f, 3.5f, 4.5f}, {2, 2});
  CHECK(f.dtype() == kFloat32);
  CHECK(f.sizes() == Shape{2, 2});
  CHECK(f.at<float>(1, 0) == 3.5f);

  Tensor d = tensor(std::vector<double>{1, 2, 3}, {3});
  CHECK(d.dtype() == kFloat64);
  Tensor i = tensor({1, 2, 3});
  CHECK(i.dtype() == kInt64);
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{1, 2, 3});
  Tensor b = tensor({true, false});
  CHECK(b.dtype() == kBool);
  CHECK(b.to_vector<bool>() == std::vector<bool>{true, false});
  CHECK(tensor(std::vector<bool>{false, true, true}, {3}).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 1});

  // Options convert the values and can make a leaf that requires grad.
  Tensor converted = tensor({1, 2}, {2}, TensorOptions(kFloat64).requires_grad(true));
  CHECK(converted.dtype() == kFloat64);
  CHECK(converted.requires_grad());
  CHECK(converted.is_leaf());

  CHECK_THROWS_WITH_ALL(tensor({1.0f, 2.0f, 3.0f, 4.0f, 5.0f}, {2, 3}), "tensor", "5 values", "[2, 3]",
                        "6 elements");
}

TEST_CASE("item, at, to_vector and data_ptr") {
  Tensor x = tensor({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f}, {2, 3});
  CHECK(x.at<float>(1, 2) == 6.0f);
  CHECK(x.at<float>(-1, -3) == 4.0f);
  x.at<float>(0, 1) = 20.0f;
  CHECK(x.to_vector<float>() == std::vector<float>{1, 20, 3, 4, 5, 6});
  CHECK(x.to_vector<int64_t>() == std::vector<int64_t>{1, 20, 3, 4, 5, 6});  // converts
  CHECK(x.t().to_vector<float>() == std::vector<float>{1, 4, 20, 5, 3, 6});   // row-major of the view
  CHECK(x.t().at<float>(2, 1) == 6.0f);                                        // honours strides
  CHECK(*x.data_ptr<float>() == 1.0f);
  CHECK(x.select(0, 1).data_ptr<float>() == x.data_ptr<float>() + 3);  // includes the offset

  CHECK(scalar_tensor(2.5, kFloat64).item() == 2.5);
  CHECK(tensor({7}).item<int64_t>() == 7);
  CHECK(tensor({7}).item<double>() == 7.0);  // converts
  CHECK(tensor({true}).item<bool>());

  CHECK_THROWS_WITH_ALL(x.item(), "item", "one-element", "[2, 3]");
  CHECK_THROWS_WITH_ALL(x.data_ptr<double>(), "data_ptr", "float32", "float64");
  CHECK_THROWS_WITH_ALL(tensor({1, 2}).data_ptr<float>(), "data_ptr", "int64", "float32");
  CHECK_THROWS_WITH_ALL(x.at<double>(0, 0), "data_ptr", "float32", "float64");
  CHECK_THROWS_WITH_ALL(x.at<float>(0), "at", "1 indices", "[2, 3]");
  CHECK_THROWS_WITH_ALL(x.at<float>(2, 0), "at", "index 2", "dim 0 of size 2");
  CHECK_THROWS_WITH_ALL(Tensor().sizes(), "undefined");
}

TEST_CASE("to(dtype) converts values, and returns the tensor itself when nothing changes") {
  Tensor f = tensor({-2.7f, -0.5f, 0.0f, 0.5f, 2.7f});
  CHECK(f.to(kInt64).to_vector<int64_t>() == std::vector<int64_t>{-2, 0, 0, 0, 2});  // truncates, as C++
  CHECK(f.to(kBool).to_vector<bool>() == std::vector<bool>{true, true, false, true, true});
  CHECK(f.to(kFloat64).dtype() == kFloat64);
  CHECK(f.to(kFloat64).to_vector<double>()[4] == static_cast<double>(2.7f));
  CHECK(tensor({true, false}).to(kFloat32).to_vector<float>() == std::vector<float>{1, 0});
  CHECK(tensor({3, -4}).to(kFloat64).to_vector<double>() == std::vector<double>{3, -4});
  CHECK(tensor({1.0 / 3.0}, {1}).to(kFloat32).item<float>() == 1.0f / 3.0f);
  CHECK(f.to(kFloat32).impl() == f.impl());
  // The copy is contiguous even from a strided view.
  Tensor t = tensor({1.0f, 2.0f, 3.0f, 4.0f}, {2, 2}).t().to(kFloat64);
  CHECK(t.is_contiguous());
  CHECK(t.to_vector<double>() == std::vector<double>{1, 3, 2, 4});
  // Between floating dtypes the conversion is differentiable.
  Tensor x = leaf({3});
  CHECK_GRADCHECK([](const std::vector<Tensor>& in) { return in[0].to(kFloat32).to(kFloat64); }, {x},
                  GradcheckOptions{.eps = 1e-3, .atol = 1e-4, .rtol = 1e-3});
  CHECK_FALSE(x.to(kInt64).requires_grad());
}

TEST_CASE("Device::parse reads cpu, cuda and cuda:N and names anything else") {
  CHECK(Device::parse("cpu") == kCPU);
  CHECK(Device::parse("cuda") == Device::cuda(0));
  CHECK(Device::parse("cuda:3") == Device::cuda(3));
  CHECK(Device::parse("cuda:3").str() == "cuda:3");
  CHECK_THROWS_WITH_ALL(Device::parse("cuda:x"), "device", "'cuda:x'", "cpu, cuda or cuda:N");
  CHECK_THROWS_WITH_ALL(Device::parse("cuda:"), "'cuda:'");
  CHECK_THROWS_WITH_ALL(Device::parse("gpu"), "'gpu'");
  CHECK_THROWS_WITH_ALL(Device::parse("CPU"), "'CPU'");
}

TEST_CASE("without a GPU, asking for a CUDA tensor throws an ember::Error naming the device") {
  CHECK(cuda::is_available() == (cuda::device_count() > 0));
  CHECK(cuda::device_count() >= 0);
  if (cuda::is_available()) {
    MESSAGE("a GPU is present: the CPU-only behaviour is not checked");
    return;
  }
  CHECK_THROWS_WITH_ALL(zeros({2}, Device::cuda()), "cuda:0", "CUDA");
  CHECK_THROWS_WITH_ALL(ones({2, 3}).to(Device::cuda(1)), "cuda:1", "CUDA");
  CHECK_THROWS_WITH_ALL(ones({2}).to(Device::parse("cuda")), "cuda:0");
}

TEST_CASE("int64 tensors refuse values they cannot hold") {
  CHECK(full({2}, 3.0, kInt64).to_vector<int64_t>() == std::vector<int64_t>{3, 3});
  CHECK_THROWS_WITH_ALL(full({2}, NAN, kInt64), "full", "nan", "int64");
  CHECK_THROWS_WITH_ALL(full({2}, 1e19, kInt64), "full", "int64");
  CHECK_THROWS_WITH_ALL(add(tensor({1}), INFINITY), "add", "inf", "int64");
  CHECK_THROWS_WITH_ALL(tensor({1}).fill_(-1e30), "fill_", "int64");
}
