// Printing: the PyTorch-like text form of tensors, through to_string, operator<< and fmt.
#include <limits>
#include <sstream>

#include "helpers.h"

using namespace ember;
using namespace ember::testing;

TEST_CASE("a 1-D float32 tensor prints four decimals and its shape, without dtype") {
  CHECK(to_string(tensor({0.1f, 2.0f, 3.0f})) == "tensor([0.1000, 2.0000, 3.0000], shape=[3])");
}

TEST_CASE("a 2-D tensor prints one row per line, aligned under the first") {
  CHECK(to_string(tensor({0.1f, 2.0f, 3.0f, 4.0f}, {2, 2})) ==
        "tensor([[0.1000, 2.0000],\n"
        "        [3.0000, 4.0000]], shape=[2, 2])");
}

TEST_CASE("a 3-D tensor separates its matrices by a blank line") {
  CHECK(to_string(arange(8.0, kInt64).reshape({2, 2, 2})) ==
        "tensor([[[0, 1],\n"
        "         [2, 3]],\n"
        "\n"
        "        [[4, 5],\n"
        "         [6, 7]]], shape=[2, 2, 2], dtype=int64)");
}

TEST_CASE("negative numbers widen every column to the widest value") {
  CHECK(to_string(tensor({-1.5f, 2.25f, -300.0f, 0.0f}, {2, 2})) ==
        "tensor([[  -1.5000,    2.2500],\n"
        "        [-300.0000,    0.0000]], shape=[2, 2])");
}

TEST_CASE("int64 tensors print integers, right-aligned") {
  CHECK(to_string(tensor<int64_t>({-3, 10, 7}, {3})) == "tensor([-3, 10,  7], shape=[3], dtype=int64)");
}

TEST_CASE("bool tensors print True and False") {
  CHECK(to_string(tensor({true, false, true})) == "tensor([ True, False,  True], shape=[3], dtype=bool)");
}

TEST_CASE("a 0-d tensor prints its value alone") {
  CHECK(to_string(scalar_tensor(3.5)) == "tensor(3.5000)");
  CHECK(to_string(scalar_tensor(-2.0, kFloat64)) == "tensor(-2.0000, dtype=float64)");
  CHECK(to_string(scalar_tensor(4, kInt64)) == "tensor(4, dtype=int64)");
}

TEST_CASE("empty and undefined tensors") {
  CHECK(to_string(zeros({0, 3})) == "tensor([], shape=[0, 3])");
  CHECK(to_string(zeros({0}, kInt64)) == "tensor([], shape=[0], dtype=int64)");
  CHECK(to_string(Tensor()) == "tensor(undefined)");
}

TEST_CASE("float64 tensors name their dtype") {
  CHECK(to_string(tensor({1.0, -0.25}, {2})) == "tensor([ 1.0000, -0.2500], shape=[2], dtype=float64)");
}

TEST_CASE("magnitudes spanning more than three decades switch to scientific notation") {
  CHECK(to_string(tensor({1e-5, 1.0, 123.0}, {3})) ==
        "tensor([1.0000e-05, 1.0000e+00, 1.2300e+02], shape=[3], dtype=float64)");
  CHECK(to_string(tensor({2e9f, 3e9f})) == "tensor([2.0000e+09, 3.0000e+09], shape=[2])");
  // Zeros and non-finite values do not decide the format.
  CHECK(to_string(tensor({0.0f, 1.0f, std::numeric_limits<float>::infinity(), std::nanf("")})) ==
        "tensor([0.0000, 1.0000,    inf,    nan], shape=[4])");
}

TEST_CASE("long rows wrap at 80 columns") {
  CHECK(to_string(arange(12.0)) ==
        "tensor([ 0.0000,  1.0000,  2.0000,  3.0000,  4.0000,  5.0000,  6.0000,  7.0000,\n"
        "         8.0000,  9.0000, 10.0000, 11.0000], shape=[12])");
}

TEST_CASE("tensors of more than 1000 elements are summarised with the first and last three per dim") {
  CHECK(to_string(arange(2000.0, kInt64).reshape({40, 50})) ==
        "tensor([[   0,    1,    2,  ...,   47,   48,   49],\n"
        "        [  50,   51,   52,  ...,   97,   98,   99],\n"
        "        [ 100,  101,  102,  ...,  147,  148,  149],\n"
        "        ...,\n"
        "        [1850, 1851, 1852,  ..., 1897, 1898, 1899],\n"
        "        [1900, 1901, 1902,  ..., 1947, 1948, 1949],\n"
        "        [1950, 1951, 1952,  ..., 1997, 1998, 1999]], shape=[40, 50],\n"
        "       dtype=int64)");
  // The format is chosen from the shown values only.
  CHECK(to_string(arange(1001.0)) ==
        "tensor([   0.0000,    1.0000,    2.0000,  ...,  998.0000,  999.0000,\n"
        "        1000.0000], shape=[1001])");
  // 1000 elements exactly are printed in full.
  CHECK(to_string(zeros({1000})).find("...") == std::string::npos);
}

TEST_CASE("a leaf that requires grad says so; a computed tensor names its grad_fn") {
  Tensor w = ones({2}, TensorOptions(kFloat64).requires_grad(true));
  CHECK(to_string(w) == "tensor([1.0000, 1.0000], shape=[2], dtype=float64, requires_grad=True)");
  Tensor x = tensor({0.1f, 2.0f, 3.0f, 4.0f}, {2, 2}).requires_grad_();
  CHECK(to_string(mul(x, 1.0)) ==
        "tensor([[0.1000, 2.0000],\n"
        "        [3.0000, 4.0000]], shape=[2, 2], grad_fn=<MulBackward>)");
  CHECK(to_string(x.sum()) == "tensor(9.1000, grad_fn=<SumBackward>)");
  CHECK(to_string(x.detach()) ==
        "tensor([[0.1000, 2.0000],\n"
        "        [3.0000, 4.0000]], shape=[2, 2])");
}

TEST_CASE("non-contiguous tensors print their logical order") {
  Tensor x = arange(6.0, kInt64).reshape({2, 3});
  CHECK(to_string(x.t()) ==
        "tensor([[0, 3],\n"
        "        [1, 4],\n"
        "        [2, 5]], shape=[3, 2], dtype=int64)");
  CHECK(to_string(x.slice(1, 0, 3, 2)) ==
        "tensor([[0, 2],\n"
        "        [3, 5]], shape=[2, 2], dtype=int64)");
  CHECK(to_string(x.select(1, 1)) == "tensor([1, 4], shape=[2], dtype=int64)");
}

TEST_CASE("operator<< and fmt::format give to_string's text") {
  Tensor x = tensor({0.1f, 2.0f, 3.0f, 4.0f}, {2, 2});
  std::ostringstream stream;
  stream << x;
  CHECK(stream.str() == to_string(x));
  CHECK(fmt::format("{}", x) == to_string(x));
  CHECK(fmt::format("{}", Tensor()) == "tensor(undefined)");
}
