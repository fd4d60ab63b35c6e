// index_select, gather, masked_fill, where, tril and triu: values against naive loops,
// gradients (repeated indices, broadcast operands, strided inputs) and every documented error.
#include "helpers.h"

using namespace ember;
using namespace ember::testing;

namespace {

Tensor index_tensor(std::vector<int64_t> values, const Shape& shape) { return tensor(values, shape, kInt64); }

}  // namespace

TEST_CASE("index_select picks rows along any dim, repeated indices and strided inputs included") {
  manual_seed(3);
  const Tensor x = randn({5, 4, 3}, kFloat64).permute({2, 0, 1});  // [3, 5, 4], non-contiguous
  const Tensor index = index_tensor({3, 0, 3, 2}, {4});
  for (int64_t dim : {0, 1, 2, -1}) {
    const int64_t d = dim < 0 ? dim + 3 : dim;
    const Tensor picked = index_tensor({2, 0, 2}, {3});
    const Tensor idx = d == 0 ? picked : index;
    const Tensor out = index_select(x, dim, idx);
    Shape shape = x.sizes();
    shape[d] = idx.numel();
    REQUIRE(out.sizes() == shape);
    for (int64_t i = 0; i < shape[0]; ++i) {
      for (int64_t j = 0; j < shape[1]; ++j) {
        for (int64_t k = 0; k < shape[2]; ++k) {
          int64_t at[3] = {i, j, k};
          at[d] = idx.at<int64_t>(at[d]);
          CHECK(out.at<double>(i, j, k) == x.at<double>(at[0], at[1], at[2]));
        }
      }
    }
  }
  CHECK(index_select(tensor<int64_t>({7, 8, 9}), 0, index_tensor({}, {0})).numel() == 0);
  CHECK(index_select(tensor<int64_t>({7, 8, 9}), 0, scalar_tensor(1, kInt64)).to_vector<int64_t>() ==
        std::vector<int64_t>{8});
}

TEST_CASE("index_select backward accumulates repeated indices") {
  Tensor x = zeros({3, 2}, TensorOptions(kFloat64).requires_grad(true));
  index_select(x, 0, index_tensor({0, 2, 0, 0}, {4})).sum().backward();
  check_close(x.grad(), tensor({3.0, 3.0, 0.0, 0.0, 1.0, 1.0}, {3, 2}, kFloat64), 0, 0);

  const Tensor repeated = index_tensor({1, 1, 0, 3, 1}, {5});
  CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return index_select(in[0], 0, repeated); },
                  std::vector<Tensor>{leaf({4, 3})});
  CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return index_select(in[0], 1, repeated); },
                  std::vector<Tensor>{as_leaf(leaf({4, 2, 3}).transpose(0, 1))});  // [2, 4, 3], strided
  CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return index_select(in[0], -1, repeated); },
                  std::vector<Tensor>{leaf({2, 4})});
}

TEST_CASE("gather matches a naive loop, with the index smaller than the input in other dims") {
  manual_seed(4);
  const Tensor x = randn({4, 6, 3}, kFloat64).transpose(0, 2);  // [3, 6, 4], non-contiguous
  for (int64_t dim : {0, 1, 2, -2}) {
    const int64_t d = dim < 0 ? dim + 3 : dim;
    Shape index_shape{2, 5, 3};  // <= x's sizes outside d; any size along d
    index_shape[d] = 7;
    const Tensor index = randint(0, x.size(d), index_shape);
    const Tensor out = gather(x, dim, index);
    REQUIRE(out.sizes() == index_shape);
    for (int64_t i = 0; i < index_shape[0]; ++i) {
      for (int64_t j = 0; j < index_shape[1]; ++j) {
        for (int64_t k = 0; k < index_shape[2]; ++k) {
          int64_t at[3] = {i, j, k};
          at[d] = index.at<int64_t>(i, j, k);
          CHECK(out.at<double>(i, j, k) == x.at<double>(at[0], at[1], at[2]));
        }
      }
    }
  }
  // A strided index works too.
  const Tensor m = tensor({1.0, 2.0, 3.0, 4.0}, {2, 2}, kFloat64);
  const Tensor idx = index_tensor({1, 1, 0, 0}, {2, 2}).t();  // [[1, 0], [1, 0]]
  CHECK(gather(m, 1, idx).to_vector<double>() == std::vector<double>{2, 1, 4, 3});
}

TEST_CASE("gather gradcheck with repeated indices") {
  const Tensor index = index_tensor({0, 0, 2, 1, 1, 1, 2, 0}, {2, 4});
  CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return gather(in[0], 1, index); },
                  std::vector<Tensor>{leaf({3, 3})});
  CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return gather(in[0], 0, index.narrow(1, 0, 3)); },
                  std::vector<Tensor>{as_leaf(leaf({3, 3}).t())});
  Tensor x = zeros({2, 3}, TensorOptions(kFloat64).requires_grad(true));
  gather(x, 1, index_tensor({2, 2, 2, 0, 1, 0}, {2, 3})).sum().backward();
  check_close(x.grad(), tensor({0.0, 0.0, 3.0, 2.0, 1.0, 0.0}, {2, 3}, kFloat64), 0, 0);
}

TEST_CASE("masked_fill writes the value where the broadcast mask holds; no gradient there") {
  const Tensor x = arange(6.0, kFloat64).reshape({2, 3});
  const Tensor row_mask = tensor<bool>({true, false, true}, {3});
  CHECK(masked_fill(x, row_mask, -1.0).to_vector<double>() == std::vector<double>{-1, 1, -1, -1, 4, -1});
  const Tensor column_mask = tensor<bool>({false, true}, {2, 1});
  CHECK(masked_fill(x.t(), column_mask.t(), 9.0).to_vector<double>() == std::vector<double>{0, 9, 1, 9, 2, 9});
  const Tensor ints = tensor<int64_t>({1, 2, 3}, {3});
  CHECK(masked_fill(ints, row_mask, 7).to_vector<int64_t>() == std::vector<int64_t>{7, 2, 7});
  const Tensor scores = zeros({2, 2});
  const Tensor filled = masked_fill(scores, tensor<bool>({false, true, false, false}, {2, 2}),
                                    -std::numeric_limits<double>::infinity());
  CHECK(std::isinf(filled.at<float>(0, 1)));

  Tensor w = ones({2, 3}, TensorOptions(kFloat64).requires_grad(true));
  masked_fill(w, row_mask, 5.0).sum().backward();
  check_close(w.grad(), tensor({0.0, 1.0, 0.0, 0.0, 1.0, 0.0}, {2, 3}, kFloat64), 0, 0);

  const Tensor mask = gt(randn({3, 1, 4}), 0.0);
  CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return masked_fill(in[0], mask, 2.5); },
                  std::vector<Tensor>{leaf({3, 2, 4})});
  CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return masked_fill(in[0], mask.squeeze(1), 2.5); },
                  std::vector<Tensor>{as_leaf(leaf({4, 3}).t())});
}

TEST_CASE("where broadcasts condition, a and b together") {
  manual_seed(5);
  const Tensor condition = gt(randn({2, 4, 1}), 0.0);
  const Tensor a = randn({2, 1, 3}, kFloat64);
  const Tensor b = randn({3, 4}, kFloat64).t();  // [4, 3], non-contiguous
  const Tensor out = where(condition, a, b);
  REQUIRE(out.sizes() == Shape{2, 4, 3});
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t j = 0; j < 4; ++j) {
      for (int64_t k = 0; k < 3; ++k) {
        const double expected = condition.at<bool>(i, j, 0) ? a.at<double>(i, 0, k) : b.at<double>(j, k);
        CHECK(out.at<double>(i, j, k) == expected);
      }
    }
  }
  const Tensor scalar_b = where(condition, a, -3.0);
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t j = 0; j < 4; ++j) {
      CHECK(scalar_b.at<double>(i, j, 1) == (condition.at<bool>(i, j, 0) ? a.at<double>(i, 0, 1) : -3.0));
    }
  }
  const Tensor ints = where(tensor<bool>({true, false}), tensor<int64_t>({1, 2}), tensor<int64_t>({3, 4}));
  CHECK(ints.to_vector<int64_t>() == std::vector<int64_t>{1, 4});
}

TEST_CASE("where gradients: summed back over broadcast dims, zero where not chosen") {
  Tensor a = ones({1, 3}, TensorOptions(kFloat64).requires_grad(true));
  Tensor b = ones({2, 1}, TensorOptions(kFloat64).requires_grad(true));
  const Tensor condition = tensor<bool>({true, false, true, false, false, true}, {2, 3});
  where(condition, a, b).sum().backward();
  check_close(a.grad(), tensor({1.0, 0.0, 2.0}, {1, 3}, kFloat64), 0, 0);
  check_close(b.grad(), tensor({1.0, 2.0}, {2, 1}, kFloat64), 0, 0);

  const Tensor broadcast_condition = gt(randn({2, 3, 1}), 0.0);
  CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return where(broadcast_condition, in[0], in[1]); },
                  std::vector<Tensor>{leaf({1, 4}), as_leaf(leaf({4, 3}).t())});
  CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return where(broadcast_condition, in[0], in[1]); },
                  std::vector<Tensor>{leaf({3, 1}), leaf({2, 1, 4})});
  CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return where(broadcast_condition, in[0], 0.5); },
                  std::vector<Tensor>{leaf({2, 3, 2})});
}

TEST_CASE("tril and triu keep the triangles of the last two dims") {
  manual_seed(6);
  const Tensor x = randn({2, 5, 3, 4}, kFloat64).permute({0, 2, 3, 1});  // [2, 3, 4, 5], strided
  for (int64_t diagonal : {-2, -1, 0, 1, 3, 7}) {
    const Tensor lower = tril(x, diagonal), upper = triu(x, diagonal);
    for (int64_t b0 = 0; b0 < 2; ++b0) {
      for (int64_t b1 = 0; b1 < 3; ++b1) {
        for (int64_t i = 0; i < 4; ++i) {
          for (int64_t j = 0; j < 5; ++j) {
            const double v = x.at<double>(b0, b1, i, j);
            CHECK(lower.at<double>(b0, b1, i, j) == (j - i <= diagonal ? v : 0.0));
            CHECK(upper.at<double>(b0, b1, i, j) == (j - i >= diagonal ? v : 0.0));
          }
        }
      }
    }
  }
  // The causal mask of attention: a bool lower triangle.
  const Tensor causal = tril(ones({3, 3}, kBool));
  CHECK(causal.to_vector<bool>() == std::vector<bool>{true, false, false, true, true, false, true, true, true});
  CHECK(triu(ones({2, 3}, kInt64), 1).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 1, 0, 0, 1});
  CHECK(tril(zeros({0, 3})).sizes() == Shape{0, 3});

  CHECK_GRADCHECK([](const std::vector<Tensor>& in) { return tril(in[0], -1); }, std::vector<Tensor>{leaf({2, 3, 4})});
  CHECK_GRADCHECK([](const std::vector<Tensor>& in) { return triu(in[0], 1); },
                  std::vector<Tensor>{as_leaf(leaf({4, 3}).t())});
  CHECK_GRADCHECK([](const std::vector<Tensor>& in) { return tril(in[0]); }, std::vector<Tensor>{leaf({3, 3})});
}

TEST_CASE("indexing errors name the op, the index and the sizes") {
  const Tensor x = zeros({3, 5});
  CHECK_THROWS_WITH_ALL(gather(x, 1, index_tensor({0, 7, 1}, {1, 3})),
                        "gather: index 7 (at flat position 1) is out of range for dim 1 of size 5");
  CHECK_THROWS_WITH_ALL(gather(x, 0, index_tensor({-1}, {1, 1})),
                        "gather: index -1 (at flat position 0) is out of range for dim 0 of size 3");
  CHECK_THROWS_WITH_ALL(index_select(x, 1, index_tensor({0, 5}, {2})),
                        "index_select: index 5 (at flat position 1) is out of range for dim 1 of size 5");
  CHECK_THROWS_WITH_ALL(index_select(x, 0, index_tensor({-2}, {1})),
                        "index_select: index -2 (at flat position 0) is out of range for dim 0 of size 3");
  CHECK_THROWS_WITH_ALL(index_select(x, 0, tensor({0.0, 1.0})), "index_select", "int64", "float64");
  CHECK_THROWS_WITH_ALL(gather(x, 0, zeros({1, 1}, kBool)), "gather", "int64", "bool");
  CHECK_THROWS_WITH_ALL(index_select(x, 0, zeros({1, 1}, kInt64)), "index_select", "1-D", "[1, 1]");
  CHECK_THROWS_WITH_ALL(index_select(x, 2, zeros({1}, kInt64)), "index_select", "dim");
  CHECK_THROWS_WITH_ALL(gather(x, 0, zeros({2}, kInt64)), "gather", "rank", "[3, 5]", "[2]");
  CHECK_THROWS_WITH_ALL(gather(x, 0, zeros({2, 6}, kInt64)), "gather", "[2, 6]", "[3, 5]", "dim 1", "6 > 5");
  CHECK_THROWS_WITH_ALL(masked_fill(x, zeros({3, 5}), 1.0), "masked_fill", "mask", "bool", "float32");
  CHECK_THROWS_WITH_ALL(masked_fill(x, zeros({5, 3}, kBool), 1.0), "masked_fill", "[5, 3]", "[3, 5]");
  CHECK_THROWS_WITH_ALL(masked_fill(zeros({2}, kInt64), zeros({2}, kBool), 0.5), "masked_fill", "0.5", "int64");
  CHECK_THROWS_WITH_ALL(where(zeros({3, 5}, kInt64), x, x), "where", "condition", "bool", "int64");
  CHECK_THROWS_WITH_ALL(where(zeros({3, 5}, kBool), x, zeros({3, 5}, kFloat64)), "where", "dtype mismatch",
                        "float32", "float64");
  CHECK_THROWS_WITH_ALL(where(zeros({2}, kBool), x, x), "where", "[2]", "[3, 5]");
  CHECK_THROWS_WITH_ALL(tril(zeros({4})), "tril", "at least 2 dims", "[4]");
  CHECK_THROWS_WITH_ALL(triu(scalar_tensor(1.0)), "triu", "at least 2 dims");
}

TEST_CASE("large inputs take the multithreaded paths and agree with naive loops") {
  manual_seed(9);
  // 1000 x 64 rows with an index full of repeats: the backward splits columns across threads.
  Tensor x = randn({1000, 64}, kFloat64).requires_grad_();
  const Tensor index = randint(0, 50, {1000});
  const Tensor grad_out = randn({1000, 64}, kFloat64);
  const Tensor selected = index_select(x, 0, index);
  selected.backward(grad_out);
  std::vector<double> expected_grad(1000 * 64, 0.0);
  const std::vector<int64_t> idx = index.to_vector<int64_t>();
  const std::vector<double> g = grad_out.to_vector<double>(), xv = x.detach().to_vector<double>();
  const std::vector<double> sv = selected.to_vector<double>();
  for (int64_t j = 0; j < 1000; ++j) {
    for (int64_t i = 0; i < 64; ++i) {
      expected_grad[idx[j] * 64 + i] += g[j * 64 + i];
      REQUIRE(sv[j * 64 + i] == xv[idx[j] * 64 + i]);
    }
  }
  check_close(x.grad(), tensor(expected_grad, {1000, 64}, kFloat64), 1e-12, 1e-12);

  // gather along dim 0 with the same shapes, so repeated indices collide across rows.
  x.mutable_grad() = Tensor();
  const Tensor gather_index = randint(0, 1000, {800, 64});
  const Tensor gathered = gather(x, 0, gather_index);
  gathered.backward(grad_out.narrow(0, 0, 800));
  std::fill(expected_grad.begin(), expected_grad.end(), 0.0);
  const std::vector<int64_t> gi = gather_index.to_vector<int64_t>();
  const std::vector<double> gv = gathered.to_vector<double>();
  for (int64_t j = 0; j < 800; ++j) {
    for (int64_t i = 0; i < 64; ++i) {
      expected_grad[gi[j * 64 + i] * 64 + i] += g[j * 64 + i];
      REQUIRE(gv[j * 64 + i] == xv[gi[j * 64 + i] * 64 + i]);
    }
  }
  check_close(x.grad(), tensor(expected_grad, {1000, 64}, kFloat64), 1e-12, 1e-12);
}
