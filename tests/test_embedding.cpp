// embedding: row lookup for ids of any shape, scatter-add backward with repeated ids and
// padding_idx, gradcheck, errors.
#include "helpers.h"

using namespace ember;
using namespace ember::testing;

TEST_CASE("embedding picks weight rows for ids of any shape") {
  const Tensor weight = randn({6, 3});
  const Tensor ids = tensor<int64_t>({5, 0, 2, 2, 1, 5}, {2, 3});
  const Tensor out = embedding(weight, ids);
  REQUIRE(out.sizes() == Shape{2, 3, 3});
  const std::vector<int64_t> flat = ids.to_vector<int64_t>();
  for (int64_t k = 0; k < 6; ++k) {
    for (int64_t d = 0; d < 3; ++d) CHECK(out.at<float>(k / 3, k % 3, d) == weight.at<float>(flat[k], d));
  }
  // A 0-d id gives one row; strided weight and ids work too.
  CHECK(embedding(weight, tensor<int64_t>({4}, {})).sizes() == Shape{3});
  const Tensor strided_weight = randn({3, 6}, kFloat64).t();  // [6, 3]
  const Tensor strided_ids = tensor<int64_t>({1, 2, 3, 4}, {2, 2}).t();
  check_close(embedding(strided_weight, strided_ids), embedding(strided_weight.contiguous(), strided_ids.contiguous()),
              0.0, 0.0);
  // The padding row's value is looked up as usual; only its gradient is suppressed.
  check_close(embedding(weight, tensor<int64_t>({0}, {1}), 0), weight.narrow(0, 0, 1), 0.0, 0.0);
}

TEST_CASE("embedding backward adds up repeated ids and skips padding_idx") {
  const Tensor weight = randn({5, 4}, kFloat64).requires_grad_();
  const Tensor ids = tensor<int64_t>({1, 3, 1, 1, 4, 3}, {3, 2});
  const Tensor upstream = randn({3, 2, 4}, kFloat64);
  sum(mul(embedding(weight, ids, /*padding_idx=*/-1), upstream)).backward();  // -1 wraps to 4
  std::vector<double> expected(20, 0.0);
  const std::vector<int64_t> flat = ids.to_vector<int64_t>();
  const std::vector<double> g = upstream.to_vector<double>();
  for (size_t k = 0; k < flat.size(); ++k) {
    if (flat[k] == 4) continue;
    for (int d = 0; d < 4; ++d) expected[flat[k] * 4 + d] += g[k * 4 + d];
  }
  check_close(weight.grad(), tensor(expected, {5, 4}, kFloat64), 1e-12);
}

TEST_CASE("embedding backward over many ids and a wide table (split across threads)") {
  const Tensor weight = randn({50, 700}, kFloat64).requires_grad_();
  const Tensor ids = randint(0, 50, {300});
  const Tensor upstream = randn({300, 700}, kFloat64);
  sum(mul(embedding(weight, ids, 7), upstream)).backward();
  std::vector<double> expected(50 * 700, 0.0);
  const std::vector<int64_t> flat = ids.to_vector<int64_t>();
  const std::vector<double> g = upstream.to_vector<double>();
  for (size_t k = 0; k < flat.size(); ++k) {
    if (flat[k] == 7) continue;
    for (int d = 0; d < 700; ++d) expected[flat[k] * 700 + d] += g[k * 700 + d];
  }
  check_close(weight.grad(), tensor(expected, {50, 700}, kFloat64), 1e-12);
}

TEST_CASE("embedding passes gradcheck with repeated ids, padding_idx and a strided weight") {
  const Tensor ids = tensor<int64_t>({0, 2, 2, 3, 0, 1}, {2, 3});
  CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return embedding(in[0], ids); },
                  std::vector<Tensor>{leaf({4, 3})});
  // The padding row's gradient is zero by definition, not by calculus: gradcheck the lookup
  // with the padded positions masked out, whose true derivative there is zero.
  auto masked = [&](const Tensor& weight, int64_t padding_idx, int64_t padding_row) {
    const Tensor keep = ne(ids, static_cast<double>(padding_row)).to(kFloat64).unsqueeze(-1);
    return mul(embedding(weight, ids, padding_idx), keep);
  };
  CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return masked(in[0], 2, 2); },
                  std::vector<Tensor>{leaf({4, 3})});
  CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return masked(in[0], -4, 0); },
                  std::vector<Tensor>{as_leaf(randn({3, 4}, kFloat64).t())});
}

TEST_CASE("embedding errors") {
  const Tensor weight = randn({5, 2});
  CHECK_THROWS_WITH_ALL(embedding(weight, tensor<int64_t>({1, 5}, {2})), "embedding", "id 5", "5 embeddings");
  CHECK_THROWS_WITH_ALL(embedding(weight, tensor<int64_t>({-1}, {1})), "embedding", "id -1", "5 embeddings");
  CHECK_THROWS_WITH_ALL(embedding(weight, tensor({1.0f}, {1})), "embedding", "int64", "float32");
  CHECK_THROWS_WITH_ALL(embedding(randn({5}), tensor<int64_t>({1}, {1})), "embedding", "2-D", "[5]");
  CHECK_THROWS_WITH_ALL(embedding(weight, tensor<int64_t>({1}, {1}), 5), "padding_idx 5", "5 embeddings");
  CHECK_THROWS_WITH_ALL(embedding(weight, tensor<int64_t>({1}, {1}), -6), "padding_idx -6", "5 embeddings");
}
