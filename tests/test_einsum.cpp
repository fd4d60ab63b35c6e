// einsum: each attention-style equation against a naive loop over all letter values and
// against the matmul/permute expression it stands for, gradcheck, and every error.
#include <map>
#include <string>

#include "helpers.h"

using namespace ember;
using namespace ember::testing;

namespace {

// einsum by definition: walk every assignment of values to the equation's letters and add
// the product of the operands' entries into the output entry those letters name.
Tensor naive_einsum(const std::string& equation, const std::vector<Tensor>& operands) {
  const size_t arrow = equation.find("->");
  const std::string output = equation.substr(arrow + 2);
  std::vector<std::string> terms;
  std::string lhs = equation.substr(0, arrow);
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  std::map<char, int64_t> size;
  std::vector<std::vector<double>> values;
  for (size_t i = 0; i < terms.size(); ++i) {
    for (size_t d = 0; d < terms[i].size(); ++d) size[terms[i][d]] = operands[i].sizes()[d];
    values.push_back(operands[i].to_vector<double>());
  }
  std::string letters;
  for (const auto& [letter, unused] : size) letters.push_back(letter);
  Shape out_shape;
  for (char c : output) out_shape.push_back(size[c]);
  std::vector<double> out(numel_of(out_shape), 0.0);
  // Row-major flat index of `term` at the current letter values.
  std::map<char, int64_t> value;
  auto flat = [&](const std::string& term) {
    int64_t index = 0;
    for (char c : term) index = index * size[c] + value[c];
    return index;
  };
  int64_t total = 1;
  for (char c : letters) total *= size[c];
  for (int64_t i = 0; i < total; ++i) {
    int64_t rest = i;
    for (auto it = letters.rbegin(); it != letters.rend(); ++it) {
      value[*it] = rest % size[*it];
      rest /= size[*it];
    }
    double product = 1;
    for (size_t t = 0; t < terms.size(); ++t) product *= values[t][flat(terms[t])];
    out[flat(output)] += product;
  }
  return tensor(out, out_shape, kFloat64);
}

struct Case {
  const char* equation;
  std::vector<Shape> shapes;
};

const Case kCases[] = {
    {"nqhd,nkhd->nhqk", {{2, 3, 2, 4}, {2, 5, 2, 4}}},
    {"nhql,nlhd->nqhd", {{2, 2, 3, 5}, {2, 5, 2, 4}}},
    {"bij,bjk->bik", {{3, 2, 4}, {3, 4, 5}}},
    {"ij,jk->ik", {{3, 4}, {4, 5}}},
    {"bhqd,bhkd->bhqk", {{2, 3, 4, 5}, {2, 3, 6, 5}}},
    {"bhqk,bhkd->bhqd", {{2, 3, 4, 6}, {2, 3, 6, 5}}},
    {"i,j->ij", {{3}, {4}}},
    {"i,i->", {{5}, {5}}},
    {"bij,bjk->bk", {{2, 3, 4}, {2, 4, 5}}},
    {"ij,kj->jik", {{3, 4}, {2, 4}}},
    {"ij->ji", {{3, 4}}},
    {"ij->j", {{3, 4}}},
    {"ijk->", {{2, 3, 4}}},
};

}  // namespace

TEST_CASE("einsum matches a naive loop over all letter values") {
  for (DType dtype : {kFloat32, kFloat64}) {
    const double tolerance = dtype == kFloat32 ? 1e-4 : 1e-12;
    for (const Case& c : kCases) {
      CAPTURE(c.equation);
      std::vector<Tensor> operands;
      for (const Shape& shape : c.shapes) operands.push_back(randn(shape, dtype));
      const Tensor out = einsum(c.equation, operands);
      CHECK(out.dtype() == dtype);
      check_close(out, naive_einsum(c.equation, operands), tolerance, tolerance);
    }
  }
}

TEST_CASE("einsum equals the matmul and permute expressions attention writes by hand") {
  const Tensor q = randn({2, 3, 2, 4}), k = randn({2, 5, 2, 4}), v = randn({2, 5, 2, 4});
  // scores[n, h, q, k] = sum_d q[n, q, h, d] k[n, k, h, d]
  const Tensor scores = einsum("nqhd,nkhd->nhqk", {q, k});
  check_close(scores, matmul(q.permute({0, 2, 1, 3}), k.permute({0, 2, 3, 1})), 1e-5, 1e-5);
  // out[n, q, h, d] = sum_l p[n, h, q, l] v[n, l, h, d]
  const Tensor p = randn({2, 2, 3, 5});
  check_close(einsum("nhql,nlhd->nqhd", {p, v}), matmul(p, v.permute({0, 2, 1, 3})).permute({0, 2, 1, 3}), 1e-5,
              1e-5);
  const Tensor a = randn({3, 2, 4}), b = randn({3, 4, 5});
  check_close(einsum("bij,bjk->bik", {a, b}), bmm(a, b), 1e-5, 1e-5);
  check_close(einsum("ij,jk->ik", {a.select(0, 0), b.select(0, 1)}), matmul(a.select(0, 0), b.select(0, 1)), 1e-5,
              1e-5);
  const Tensor qh = randn({2, 3, 4, 5}), kh = randn({2, 3, 6, 5}), vh = randn({2, 3, 6, 5});
  const Tensor scores_h = einsum("bhqd,bhkd->bhqk", {qh, kh});
  check_close(scores_h, matmul(qh, kh.transpose(-1, -2)), 1e-5, 1e-5);
  check_close(einsum("bhqk,bhkd->bhqd", {scores_h, vh}), matmul(scores_h, vh), 1e-4, 1e-5);
}

TEST_CASE("einsum reads non-contiguous operands") {
  const Tensor q = randn({2, 4, 2, 3}, kFloat64).transpose(1, 3);  // [2, 3, 2, 4], strided
  const Tensor k = randn({2, 5, 2, 8}, kFloat64).slice(3, 0, std::nullopt, 2);
  check_close(einsum("nqhd,nkhd->nhqk", {q, k}), naive_einsum("nqhd,nkhd->nhqk", {q, k}), 1e-12, 1e-12);
}

TEST_CASE("einsum gradcheck") {
  CHECK_GRADCHECK([](const std::vector<Tensor>& in) { return einsum("nqhd,nkhd->nhqk", in); },
                  std::vector<Tensor>{leaf({2, 3, 2, 2}), leaf({2, 2, 2, 2})});
  CHECK_GRADCHECK([](const std::vector<Tensor>& in) { return einsum("nhql,nlhd->nqhd", in); },
                  std::vector<Tensor>{leaf({1, 2, 3, 2}), leaf({1, 2, 2, 3})});
  CHECK_GRADCHECK([](const std::vector<Tensor>& in) { return einsum("bij,bjk->bk", in); },
                  std::vector<Tensor>{leaf({2, 2, 3}), leaf({2, 3, 2})});
  CHECK_GRADCHECK([](const std::vector<Tensor>& in) { return einsum("ij->j", in); },
                  std::vector<Tensor>{leaf({3, 2})});
}

TEST_CASE("einsum errors") {
  const Tensor a = randn({2, 3}), b = randn({3, 4});
  CHECK_THROWS_WITH_ALL(einsum("ij,jk", {a, b}), "einsum", "\"ij,jk\"", "explicit form", "->");
  CHECK_THROWS_WITH_ALL(einsum("ij->jk->k", {a}), "einsum", "explicit form");
  CHECK_THROWS_WITH_ALL(einsum("i1,jk->ik", {a, b}), "einsum", "invalid character '1'", "operand 0");
  CHECK_THROWS_WITH_ALL(einsum("...j,jk->...k", {a, b}), "einsum", "ellipsis", "not supported");
  CHECK_THROWS_WITH_ALL(einsum("ij,jk->ik", {a}), "einsum", "names 2 operand(s) but 1 were given");
  CHECK_THROWS_WITH_ALL(einsum("ij,jk,kl->il", {a, b, b}), "einsum", "3 operands", "one or two");
  CHECK_THROWS_WITH_ALL(einsum("ij,jk->ik", {a, randn({4, 4})}), "einsum", "letter 'j'", "size 3", "4",
                        "operand 1", "[4, 4]");
  CHECK_THROWS_WITH_ALL(einsum("ii,ik->k", {randn({3, 3}), b}), "einsum", "letter 'i' repeats in operand 0",
                        "not supported");
  CHECK_THROWS_WITH_ALL(einsum("ij,jk->iki", {a, b}), "einsum", "letter 'i' repeats in the output");
  CHECK_THROWS_WITH_ALL(einsum("ij,jk->iz", {a, b}), "einsum", "output letter 'z' appears in no operand");
  CHECK_THROWS_WITH_ALL(einsum("ijk,jk->i", {a, b}), "einsum", "operand 0 has shape [2, 3]", "\"ijk\" names 3 dims");
  CHECK_THROWS_WITH_ALL(einsum("ij,jk->ik", {a, randn({3, 4}, kFloat64)}), "dtype mismatch");
}
