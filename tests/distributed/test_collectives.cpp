// The collectives on CPU tensors, across the ranks mpirun started, against values computed by
// hand: every dtype, empty and large tensors, and the errors of misuse.
#include <doctest/doctest.h>

#include <numeric>

#include "ember.h"

using namespace ember;

namespace {
int rank() { return distributed::rank(); }
int world() { return distributed::world_size(); }
// 0 + 1 + ... + (world - 1)
int64_t sum_of_ranks() { return int64_t{world()} * (world() - 1) / 2; }
}  // namespace

TEST_CASE("the job has the ranks mpirun started") {
  CHECK(distributed::is_initialized());
  CHECK(world() >= 2);
  CHECK(rank() >= 0);
  CHECK(rank() < world());
  CHECK(distributed::local_rank() == rank());  // one machine
  CHECK(distributed::has_backend(distributed::Backend::MPI));
}

TEST_CASE("all_reduce sums every dtype") {
  // Rank r holds {r, 2r + 1, -r}; the sum over ranks is {S, 2S + W, -S}.
  const int64_t S = sum_of_ranks(), W = world();
  for (DType dtype : {kFloat32, kFloat64, kInt64}) {
    CAPTURE(dtype_name(dtype));
    Tensor x = tensor({double(rank()), 2.0 * rank() + 1, -double(rank())}, {3}).to(dtype);
    distributed::all_reduce(x);
    CHECK(x.dtype() == dtype);
    CHECK(x.to(kFloat64).to_vector<double>() == std::vector<double>{double(S), double(2 * S + W), double(-S)});
  }
  // bool: logical or. Only rank 1 sets the first element; nobody sets the second.
  Tensor flags = tensor({rank() == 1, false, true}, {3});
  distributed::all_reduce(flags);
  CHECK(flags.to_vector<bool>() == std::vector<bool>{true, false, true});
}

TEST_CASE("all_reduce's mean divides by the world size, and refuses dtypes it cannot average") {
  for (DType dtype : {kFloat32, kFloat64}) {
    Tensor x = tensor({double(rank()), 1.0}, {2}).to(dtype);
    distributed::all_reduce(x, distributed::ReduceOp::Mean);
    CHECK(x.to(kFloat64).to_vector<double>() == std::vector<double>{double(sum_of_ranks()) / world(), 1.0});
  }
  Tensor ints = tensor({int64_t{1}}, {1});
  CHECK_THROWS_WITH_AS(distributed::all_reduce(ints, distributed::ReduceOp::Mean),
                       "all_reduce: the mean needs a floating point tensor (float32 or float64), got int64", Error);
}

TEST_CASE("a large all_reduce, started without waiting, is right once waited for") {
  const int64_t n = 3'000'000;  // 24 MB of float64
  Tensor x = full({n}, double(rank() + 1), kFloat64);
  distributed::Work work = distributed::all_reduce_async(x);
  work.wait();
  CHECK(work.test());
  const double expected = double(sum_of_ranks() + world());
  const std::vector<double> values = x.to_vector<double>();
  CHECK(std::all_of(values.begin(), values.end(), [&](double v) { return v == expected; }));
}

TEST_CASE("empty tensors pass through every collective") {
  Tensor x = zeros({0, 3});
  distributed::all_reduce(x);
  distributed::broadcast(x, 0);
  Tensor gathered = distributed::all_gather(x);
  CHECK(gathered.sizes() == Shape{world(), 0, 3});
}

TEST_CASE("broadcast copies the root's tensor to every rank, for every dtype") {
  const int root = world() - 1;
  for (DType dtype : {kFloat32, kFloat64, kInt64, kBool}) {
    CAPTURE(dtype_name(dtype));
    Tensor x = tensor({double(rank()), 0.0, 1.0, double(rank() * 7)}, {2, 2}).to(dtype);
    distributed::broadcast(x, root);
    Tensor expected = tensor({double(root), 0.0, 1.0, double(root * 7)}, {2, 2}).to(dtype);
    CHECK(x.to(kFloat64).to_vector<double>() == expected.to(kFloat64).to_vector<double>());
  }
  Tensor x = zeros({2});
  const std::string message = fmt::format("broadcast: root must be a rank in [0, {}), got {}", world(), world());
  CHECK_THROWS_WITH_AS(distributed::broadcast(x, world()), message.c_str(), Error);
}

TEST_CASE("all_gather stacks every rank's tensor in rank order, for every dtype") {
  for (DType dtype : {kFloat32, kFloat64, kInt64, kBool}) {
    CAPTURE(dtype_name(dtype));
    Tensor x = tensor({double(rank()), double(rank() % 2 == 0)}, {2}).to(dtype);
    Tensor gathered = distributed::all_gather(x);
    REQUIRE(gathered.sizes() == Shape{world(), 2});
    CHECK(gathered.dtype() == dtype);
    std::vector<double> expected;
    for (int r = 0; r < world(); ++r) {
      Tensor row = tensor({double(r), double(r % 2 == 0)}, {2}).to(dtype);
      for (double v : row.to(kFloat64).to_vector<double>()) expected.push_back(v);
    }
    CHECK(gathered.to(kFloat64).to_vector<double>() == expected);
  }
}

TEST_CASE("barrier returns on every rank") {
  distributed::barrier();
  distributed::barrier();
}

TEST_CASE("ranks that disagree on a tensor's size or dtype get an error, not a hang") {
  Tensor x = zeros({rank() == 0 ? 4 : 6});
  CHECK_THROWS_WITH_AS(distributed::all_reduce(x), doctest::Contains("all_reduce: ranks disagree"), Error);
  Tensor y = zeros({2}, rank() == 0 ? kFloat32 : kFloat64);
  CHECK_THROWS_WITH_AS(distributed::broadcast(y), doctest::Contains("broadcast: ranks disagree"), Error);
}

TEST_CASE("16-bit tensors move between ranks, and an all_reduce over MPI refuses them, naming the dtype") {
  Tensor x = full({3}, rank() == 0 ? 1.5 : 0.0, kBFloat16);
  distributed::broadcast(x);
  CHECK(x.to_vector<float>() == std::vector<float>(3, 1.5f));
  CHECK_THROWS_WITH_AS(distributed::all_reduce(x), doctest::Contains("all_reduce: bfloat16 tensors cannot be summed"),
                       Error);
}

TEST_CASE("collectives refuse non-contiguous and undefined tensors") {
  Tensor x = zeros({3, 2}).t();
  CHECK_THROWS_WITH_AS(distributed::all_reduce(x),
                       "all_reduce: expected a contiguous tensor, got shape [2, 3] with strides [1, 2] (call "
                       "contiguous() first)",
                       Error);
  CHECK_THROWS_WITH_AS(distributed::all_gather(Tensor()), "all_gather: tensor is undefined", Error);
}
