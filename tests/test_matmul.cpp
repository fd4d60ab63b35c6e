// matmul, bmm and linear: every torch.matmul case against a naive triple loop, transposed
// and sliced operands, gradcheck of each, and every documented error.
#include "helpers.h"

using namespace ember;
using namespace ember::testing;

namespace {

// torch.matmul by its definition, in double over the operands' values: vectors become a row
// (left) or a column (right), batch dims broadcast, then one triple loop per matrix.
Tensor naive_matmul(const Tensor& a, const Tensor& b) {
  Shape sa = a.sizes(), sb = b.sizes();
  if (sa.size() == 1) sa.insert(sa.begin(), 1);
  if (sb.size() == 1) sb.push_back(1);
  const int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
  REQUIRE(sb[sb.size() - 2] == k);
  const size_t batch_rank = std::max(sa.size(), sb.size()) - 2;
  auto padded_batch = [&](const Shape& s) {
    Shape batch(batch_rank - (s.size() - 2), 1);
    batch.insert(batch.end(), s.begin(), s.end() - 2);
    return batch;
  };
  const Shape ba = padded_batch(sa), bb = padded_batch(sb);
  Shape batch(batch_rank);
  int64_t count = 1;
  for (size_t d = 0; d < batch_rank; ++d) {
    batch[d] = std::max(ba[d], bb[d]);
    count *= batch[d];
  }
  const std::vector<double> va = a.to_vector<double>(), vb = b.to_vector<double>();
  std::vector<double> out(count * m * n, 0.0);
  for (int64_t i = 0; i < count; ++i) {
    // Unravel the batch index, and clamp it to 0 along each operand's broadcast dims.
    int64_t rest = i, ia = 0, ib = 0, scale_a = 1, scale_b = 1;
    for (int64_t d = static_cast<int64_t>(batch_rank) - 1; d >= 0; --d) {
      const int64_t index = rest % batch[d];
      rest /= batch[d];
      ia += (ba[d] == 1 ? 0 : index) * scale_a;
      ib += (bb[d] == 1 ? 0 : index) * scale_b;
      scale_a *= ba[d];
      scale_b *= bb[d];
    }
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t c = 0; c < n; ++c) {
        double total = 0;
        for (int64_t j = 0; j < k; ++j) total += va[(ia * m + r) * k + j] * vb[(ib * k + j) * n + c];
        out[(i * m + r) * n + c] = total;
      }
    }
  }
  Shape out_shape = batch;
  if (a.dim() > 1) out_shape.push_back(m);
  if (b.dim() > 1) out_shape.push_back(n);
  return tensor(out, out_shape, kFloat64);
}

struct Case {
  const char* name;
  Shape a, b;
};

// Every shape rule of torch.matmul, plus the empty cases.
const Case kCases[] = {
    {"vector . vector", {5}, {5}},
    {"matrix x matrix", {3, 4}, {4, 5}},
    {"vector x matrix", {4}, {4, 5}},
    {"matrix x vector", {3, 4}, {4}},
    {"batch x batch", {2, 3, 4}, {2, 4, 5}},
    {"broadcast batch dims", {2, 1, 3, 4}, {5, 4, 2}},
    {"batch x matrix", {2, 3, 4}, {4, 5}},
    {"matrix x batch", {3, 4}, {2, 4, 5}},
    {"batch x vector", {2, 3, 4}, {4}},
    {"vector x batch", {4}, {2, 4, 5}},
    {"size-1 batch on the right", {3, 2, 4}, {1, 4, 3}},
    {"empty rows", {0, 3}, {3, 4}},
    {"empty inner dim", {2, 0}, {0, 3}},
};

// A tensor of `shape` and `dtype` whose data is laid out transposed in its last two dims.
Tensor transposed_randn(Shape shape, DType dtype) {
  if (shape.size() < 2) return randn(shape, dtype);
  std::swap(shape[shape.size() - 1], shape[shape.size() - 2]);
  return randn(shape, dtype).transpose(-1, -2);
}

// A tensor of `shape` whose last dim is every other column of a wider tensor: neither row-
// nor column-contiguous, so it must be copied before BLAS sees it.
Tensor strided_randn(Shape shape, DType dtype) {
  shape.back() *= 2;
  return randn(shape, dtype).slice(-1, 0, std::nullopt, 2);
}

// A tensor of `shape` cut out of a wider one: row-contiguous with a leading dim > cols.
Tensor narrowed_randn(Shape shape, DType dtype) {
  shape.back() += 3;
  return randn(shape, dtype).narrow(-1, 1, shape.back() - 3);
}

}  // namespace

TEST_CASE("matmul matches a naive triple loop for every shape rule, float32 and float64") {
  for (DType dtype : {kFloat32, kFloat64}) {
    const double tolerance = dtype == kFloat32 ? 1e-4 : 1e-12;
    for (const Case& c : kCases) {
      CAPTURE(c.name);
      CAPTURE(dtype);
      const Tensor a = randn(c.a, dtype), b = randn(c.b, dtype);
      const Tensor out = matmul(a, b);
      CHECK(out.dtype() == dtype);
      CHECK(out.is_contiguous());
      check_close(out, naive_matmul(a, b), tolerance, tolerance);
      check_close(a.matmul(b), naive_matmul(a, b), tolerance, tolerance);
    }
  }
}

TEST_CASE("matmul reads transposed, narrowed and strided operands correctly") {
  for (DType dtype : {kFloat32, kFloat64}) {
    const double tolerance = dtype == kFloat32 ? 1e-4 : 1e-12;
    for (const Case& c : kCases) {
      CAPTURE(c.name);
      CAPTURE(dtype);
      const Tensor inputs_a[] = {transposed_randn(c.a, dtype), narrowed_randn(c.a, dtype), strided_randn(c.a, dtype)};
      const Tensor inputs_b[] = {transposed_randn(c.b, dtype), strided_randn(c.b, dtype), narrowed_randn(c.b, dtype)};
      for (const Tensor& a : inputs_a) {
        for (const Tensor& b : inputs_b) {
          check_close(matmul(a, b), naive_matmul(a, b), tolerance, tolerance);
        }
      }
    }
  }
}

TEST_CASE("matmul of a batch whose rows cannot be folded into one matrix") {
  // [3, 2, 4] -> transpose(0, 1): batch and row dims are out of order, so each matrix of the
  // batch goes to BLAS on its own while the 2-D right operand is shared.
  const Tensor a = randn({3, 2, 4}, kFloat64).transpose(0, 1);
  const Tensor b = randn({4, 5}, kFloat64);
  check_close(matmul(a, b), naive_matmul(a, b), 1e-12, 1e-12);
  // Many small matrices: the batch is split across threads, one single-threaded gemm each.
  const Tensor many = randn({64, 16, 16}), others = randn({64, 12, 16}).transpose(1, 2);
  check_close(matmul(many, others), naive_matmul(many, others), 1e-4, 1e-4);
  // ... and so is a batch sharing one right operand that cannot be folded.
  const Tensor unfoldable = randn({16, 64, 16}).transpose(0, 1), shared = randn({16, 8});
  check_close(matmul(unfoldable, shared), naive_matmul(unfoldable, shared), 1e-4, 1e-4);
}

TEST_CASE("matmul of larger matrices than one BLAS block, threaded and batched") {
  const Tensor a = randn({4, 130, 70}), b = randn({70, 90});
  check_close(matmul(a, b), naive_matmul(a, b), 1e-3, 1e-4);
  const Tensor c = randn({2, 200, 150}).transpose(1, 2), d = randn({2, 200, 120});
  check_close(matmul(c, d), naive_matmul(c, d), 1e-3, 1e-4);
}

TEST_CASE("matmul gradcheck for every shape rule") {
  for (const Case& c : kCases) {
    CAPTURE(c.name);
    CHECK_GRADCHECK([](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); },
                    std::vector<Tensor>{leaf(c.a), leaf(c.b)});
  }
}

TEST_CASE("matmul gradcheck with non-contiguous operands") {
  auto product = [](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); };
  // Transposed leaves: column-contiguous matrices handed to BLAS as transposes.
  CHECK_GRADCHECK(product, std::vector<Tensor>{as_leaf(randn({4, 3}, kFloat64).t()), as_leaf(randn({5, 4}, kFloat64).t())});
  CHECK_GRADCHECK(product, std::vector<Tensor>{as_leaf(randn({2, 1, 4, 3}, kFloat64).transpose(-1, -2)),
                                               as_leaf(randn({5, 2, 4}, kFloat64).transpose(-1, -2))});
  // Strided slices, transposed inside fn, and a batch that cannot be folded.
  CHECK_GRADCHECK(
      [](const std::vector<Tensor>& in) {
        return matmul(in[0].slice(1, 0, std::nullopt, 2), in[1].transpose(0, 1).slice(0, 1, 5));
      },
      std::vector<Tensor>{leaf({3, 8}), leaf({5, 5})});
  CHECK_GRADCHECK([](const std::vector<Tensor>& in) { return matmul(in[0].transpose(0, 1), in[1]); },
                  std::vector<Tensor>{leaf({3, 2, 4}), leaf({4, 2})});
  // Only one operand requires grad.
  CHECK_GRADCHECK(product, std::vector<Tensor>{leaf({2, 3, 4}), randn({4, 2}, kFloat64)});
  CHECK_GRADCHECK(product, std::vector<Tensor>{randn({3}, kFloat64), leaf({2, 3, 2})});
}

TEST_CASE("bmm matches a naive loop and passes gradcheck") {
  for (DType dtype : {kFloat32, kFloat64}) {
    const double tolerance = dtype == kFloat32 ? 1e-4 : 1e-12;
    const Tensor a = randn({3, 2, 4}, dtype), b = randn({3, 4, 5}, dtype);
    check_close(bmm(a, b), naive_matmul(a, b), tolerance, tolerance);
    const Tensor at = transposed_randn({3, 2, 4}, dtype), bs = strided_randn({3, 4, 5}, dtype);
    check_close(bmm(at, bs), naive_matmul(at, bs), tolerance, tolerance);
  }
  auto product = [](const std::vector<Tensor>& in) { return bmm(in[0], in[1]); };
  CHECK_GRADCHECK(product, std::vector<Tensor>{leaf({2, 3, 4}), leaf({2, 4, 2})});
  CHECK_GRADCHECK(product, std::vector<Tensor>{as_leaf(randn({2, 4, 3}, kFloat64).transpose(1, 2)),
                                               as_leaf(randn({4, 2, 2}, kFloat64).transpose(0, 1))});
}

TEST_CASE("linear matches x W^T + b and passes gradcheck") {
  for (DType dtype : {kFloat32, kFloat64}) {
    const double tolerance = dtype == kFloat32 ? 1e-4 : 1e-12;
    const Tensor weight = randn({5, 4}, dtype), bias = randn({5}, dtype);
    for (const Shape& shape : {Shape{4}, Shape{3, 4}, Shape{2, 3, 4}, Shape{0, 4}}) {
      CAPTURE(shape_str(shape));
      const Tensor x = randn(shape, dtype);
      const Tensor expected = naive_matmul(x, weight.t());
      check_close(linear(x, weight), expected, tolerance, tolerance);
      check_close(linear(x, weight, bias), add(expected, bias.to(kFloat64)), tolerance, tolerance);
    }
    // A transposed weight and a non-contiguous input read without mistakes.
    const Tensor x = randn({4, 3}, dtype).t(), weight_t = randn({4, 5}, dtype).t();
    check_close(linear(x, weight_t, bias), add(naive_matmul(x, weight_t.t()), bias.to(kFloat64)), tolerance,
                tolerance);
    const Tensor x3 = randn({3, 2, 4}, dtype).transpose(0, 1);
    check_close(linear(x3, weight), naive_matmul(x3, weight.t()), tolerance, tolerance);
  }
  CHECK_GRADCHECK([](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); },
                  std::vector<Tensor>{leaf({2, 3, 4}), leaf({5, 4}), leaf({5})});
  CHECK_GRADCHECK([](const std::vector<Tensor>& in) { return linear(in[0], in[1]); },
                  std::vector<Tensor>{leaf({3, 4}), leaf({2, 4})});
  CHECK_GRADCHECK([](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); },
                  std::vector<Tensor>{leaf({4}), leaf({3, 4}), leaf({3})});
  CHECK_GRADCHECK([](const std::vector<Tensor>& in) { return linear(in[0].transpose(0, 1), in[1].t(), in[2]); },
                  std::vector<Tensor>{leaf({3, 2, 4}), leaf({4, 3}), leaf({3})});
  // A frozen weight: only x and the bias get gradients.
  CHECK_GRADCHECK([](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); },
                  std::vector<Tensor>{leaf({2, 4}), randn({3, 4}, kFloat64), leaf({3})});
}

TEST_CASE("matmul, bmm and linear errors") {
  const Tensor a = randn({2, 3});
  CHECK_THROWS_WITH_ALL(matmul(a, randn({4, 5})), "matmul: shapes [2, 3] and [4, 5] cannot be multiplied (3 != 4)");
  CHECK_THROWS_WITH_ALL(matmul(randn({3}), randn({4})), "matmul: shapes [3] and [4] cannot be multiplied (3 != 4)");
  CHECK_THROWS_WITH_ALL(matmul(randn({2, 3, 4}), randn({3, 4, 5})), "matmul", "batch dims [2] and [3]",
                        "[2, 3, 4]", "[3, 4, 5]", "do not broadcast");
  CHECK_THROWS_WITH_ALL(matmul(scalar_tensor(2.0), a), "matmul", "at least one dim", "[]", "[2, 3]");
  CHECK_THROWS_WITH_ALL(matmul(a, scalar_tensor(2.0)), "matmul", "at least one dim");
  CHECK_THROWS_WITH_ALL(matmul(a, randn({3, 2}, kFloat64)), "matmul", "dtype mismatch", "float32", "float64");
  CHECK_THROWS_WITH_ALL(matmul(ones({2, 3}, kInt64), ones({3, 2}, kInt64)), "matmul", "floating point", "int64");
  CHECK_THROWS_WITH_ALL(matmul(Tensor(), a), "matmul", "undefined");
  if (cuda::is_available()) {
    CHECK_THROWS_WITH_ALL(matmul(a, randn({3, 2}).to(Device::cuda(0))), "matmul", "device mismatch");
  }

  CHECK_THROWS_WITH_ALL(bmm(a, randn({3, 2})), "bmm", "3-D", "[2, 3]", "[3, 2]");
  CHECK_THROWS_WITH_ALL(bmm(randn({2, 2, 3}), randn({3, 3, 2})), "bmm", "batch sizes differ", "(2 != 3)");
  CHECK_THROWS_WITH_ALL(bmm(randn({2, 2, 3}), randn({2, 4, 2})),
                        "bmm: shapes [2, 2, 3] and [2, 4, 2] cannot be multiplied (3 != 4)");
  CHECK_THROWS_WITH_ALL(bmm(ones({2, 2, 3}, kInt64), ones({2, 3, 2}, kInt64)), "bmm", "floating point");

  const Tensor weight = randn({5, 4});
  CHECK_THROWS_WITH_ALL(linear(randn({2, 3}), weight), "linear", "[2, 3]", "[5, 4]", "in_features 3 != 4");
  CHECK_THROWS_WITH_ALL(linear(randn({2, 4}), randn({5, 4, 1})), "linear", "weight must be 2-D", "[5, 4, 1]");
  CHECK_THROWS_WITH_ALL(linear(randn({2, 4}), weight, randn({4})), "linear", "bias shape [4]", "[5, 4]",
                        "expected [5]");
  CHECK_THROWS_WITH_ALL(linear(randn({2, 4}), weight, randn({5}, kFloat64)), "linear", "dtype mismatch");
  CHECK_THROWS_WITH_ALL(linear(scalar_tensor(1.0), weight), "linear", "at least one dim", "[]");
  CHECK_THROWS_WITH_ALL(linear(randn({2, 4}), randn({5, 4}, kFloat64)), "linear", "dtype mismatch", "float32",
                        "float64");
}
