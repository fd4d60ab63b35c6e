// nn layers: initialisers, Linear, Embedding, LayerNorm, Dropout, activations, Sequential,
// ModuleList, FeedForward and the positional encodings: names, parameter counts (PyTorch's),
// initial statistics, forward values against naive references, gradients and errors.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "helpers.h"
#include "nn/modules/activation.h"
#include "nn/modules/container.h"
#include "nn/modules/dropout.h"
#include "nn/modules/embedding.h"
#include "nn/modules/feed_forward.h"
#include "nn/modules/init.h"
#include "nn/modules/layer_norm.h"
#include "nn/modules/linear.h"
#include "nn/modules/positional.h"

using namespace ember;
using namespace ember::testing;

namespace {

double mean_of(const std::vector<double>& values) {
  double total = 0;
  for (double v : values) total += v;
  return total / static_cast<double>(values.size());
}

double std_of(const std::vector<double>& values) {
  const double m = mean_of(values);
  double total = 0;
  for (double v : values) total += (v - m) * (v - m);
  return std::sqrt(total / static_cast<double>(values.size()));
}

// x [rows, in] W^T + b by loops, in double.
Tensor naive_linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  const int64_t rows = x.size(0), in = x.size(1), out = weight.size(0);
  std::vector<double> result(static_cast<size_t>(rows * out));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double total = bias.defined() ? bias.at<float>(o) : 0.0;
      for (int64_t i = 0; i < in; ++i) total += x.at<float>(r, i) * weight.at<float>(o, i);
      result[r * out + o] = total;
    }
  }
  return tensor(result, {rows, out});
}

}  // namespace

// --- init --------------------------------------------------------------------------------------

TEST_CASE("init: uniform_ and normal_ fill in place with the asked statistics, repeatably") {
  Tensor t = empty({20000});
  nn::init::uniform_(t, -2.0, 3.0);
  const std::vector<double> u = t.to_vector<double>();
  CHECK(*std::min_element(u.begin(), u.end()) >= -2.0);
  CHECK(*std::max_element(u.begin(), u.end()) < 3.0);
  CHECK(mean_of(u) == doctest::Approx(0.5).epsilon(0.05));
  CHECK(std_of(u) == doctest::Approx(5.0 / std::sqrt(12.0)).epsilon(0.03));

  nn::init::normal_(t, 1.5, 0.5);
  const std::vector<double> n = t.to_vector<double>();
  CHECK(mean_of(n) == doctest::Approx(1.5).epsilon(0.02));
  CHECK(std_of(n) == doctest::Approx(0.5).epsilon(0.03));

  Tensor a = empty({50}), b = empty({50});
  manual_seed(123);
  nn::init::normal_(a);
  manual_seed(123);
  nn::init::normal_(b);
  check_close(a, b, 0, 0);
}

TEST_CASE("init: fills a parameter that requires grad without recording a graph") {
  Tensor w = zeros({3, 4}, TensorOptions().requires_grad(true));
  nn::init::uniform_(w, -1.0, 1.0);
  CHECK(w.is_leaf());
  CHECK(w.requires_grad());
  CHECK(w.grad_fn() == nullptr);
  nn::init::ones_(w);
  check_close(w, ones({3, 4}), 0, 0);
  nn::init::zeros_(w);
  check_close(w, zeros({3, 4}), 0, 0);
}

TEST_CASE("init: fans, kaiming_uniform_ and xavier_uniform_ bounds") {
  CHECK(nn::init::fan_in_and_fan_out(empty({8, 3, 5})) == std::pair<int64_t, int64_t>{15, 40});
  Tensor w = empty({200, 50});
  nn::init::kaiming_uniform_(w);  // a = 0: bound sqrt(6 / fan_in)
  const double kaiming_bound = std::sqrt(6.0 / 50.0);
  CHECK(max_abs(w) <= kaiming_bound);
  CHECK(max_abs(w) > 0.95 * kaiming_bound);
  nn::init::kaiming_uniform_(w, std::sqrt(5.0));
  CHECK(max_abs(w) <= 1.0 / std::sqrt(50.0));
  CHECK(max_abs(w) > 0.95 / std::sqrt(50.0));
  nn::init::kaiming_uniform_(w, 0.0, nn::init::FanMode::FanOut);
  CHECK(max_abs(w) <= std::sqrt(6.0 / 200.0));
  nn::init::xavier_uniform_(w, 2.0);
  const double xavier_bound = 2.0 * std::sqrt(6.0 / 250.0);
  CHECK(max_abs(w) <= xavier_bound);
  CHECK(max_abs(w) > 0.95 * xavier_bound);
}

TEST_CASE("init: errors name the initialiser and the tensor") {
  CHECK_THROWS_WITH_ALL(nn::init::uniform_(empty({2}), 1.0, 0.0), "init::uniform_", "low (1)", "high (0)");
  CHECK_THROWS_WITH_ALL(nn::init::normal_(empty({2}), 0.0, -1.0), "init::normal_", "-1");
  CHECK_THROWS_WITH_ALL(nn::init::ones_(zeros({2}, kInt64)), "init::ones_", "floating point", "int64", "[2]");
  CHECK_THROWS_WITH_ALL(nn::init::kaiming_uniform_(empty({5})), "at least 2 dims", "[5]");
  CHECK_THROWS_WITH_ALL(nn::init::xavier_uniform_(empty({5})), "at least 2 dims", "[5]");
  CHECK_THROWS_WITH_ALL(nn::init::zeros_(Tensor()), "init::zeros_", "undefined");
}

// --- Linear ------------------------------------------------------------------------------------

TEST_CASE("Linear: PyTorch's names, parameter counts and initial bounds") {
  nn::Linear layer(768, 3072);
  CHECK(parameter_names(layer) == std::vector<std::string>{"weight", "bias"});
  CHECK(layer.weight.sizes() == Shape{3072, 768});
  CHECK(layer.bias.sizes() == Shape{3072});
  CHECK(layer.num_parameters() == 2'362'368);
  const double bound = 1.0 / std::sqrt(768.0);
  CHECK(max_abs(layer.weight) <= bound);
  CHECK(max_abs(layer.weight) > 0.99 * bound);
  CHECK(max_abs(layer.bias) <= bound);
  CHECK(max_abs(layer.bias) > 0.9 * bound);
  CHECK(std_of(layer.weight.to_vector<double>()) == doctest::Approx(bound / std::sqrt(3.0)).epsilon(0.01).scale(0));

  nn::Linear no_bias(4, 3, /*bias=*/false);
  CHECK(parameter_names(no_bias) == std::vector<std::string>{"weight"});
  CHECK_FALSE(no_bias.bias.defined());
  CHECK(no_bias.num_parameters() == 12);
}

TEST_CASE("Linear: initialisation is repeatable under manual_seed") {
  manual_seed(5);
  nn::Linear a(6, 4);
  manual_seed(5);
  nn::Linear b(6, 4);
  check_close(a.weight, b.weight, 0, 0);
  check_close(a.bias, b.bias, 0, 0);
  nn::Linear c(6, 4);
  CHECK(max_abs(sub(a.weight, c.weight)) > 0);
}

TEST_CASE("Linear: forward matches a naive loop, for 2-D and batched inputs") {
  nn::Linear layer(5, 3);
  const Tensor x = randn({4, 5});
  check_close(layer.forward(x), naive_linear(x, layer.weight, layer.bias), 1e-5, 1e-5);
  const Tensor batched = randn({2, 4, 5});
  const Tensor y = layer(batched);
  CHECK(y.sizes() == Shape{2, 4, 3});
  check_close(y.select(0, 1), naive_linear(batched.select(0, 1).contiguous(), layer.weight, layer.bias), 1e-5, 1e-5);
  nn::Linear no_bias(5, 3, false);
  check_close(no_bias.forward(x), naive_linear(x, no_bias.weight, Tensor()), 1e-5, 1e-5);
}

TEST_CASE("Linear: gradcheck in float64 (input, weight, bias)") {
  nn::Linear layer(4, 3);
  layer.to(kFloat64);
  const Tensor x = leaf({2, 4});
  CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return layer.forward(in[0]); },
                  (std::vector<Tensor>{x, layer.weight, layer.bias}));
  const Tensor transposed = as_leaf(randn({4, 2}, kFloat64).t());
  CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return layer.forward(in[0]); },
                  (std::vector<Tensor>{transposed, layer.weight}));
}

TEST_CASE("Linear: errors name the layer and the shapes") {
  nn::Linear layer(4, 8);
  CHECK_THROWS_WITH_ALL(layer.forward(zeros({2, 3})), "Linear(in_features=4, out_features=8)",
                        "expected input [..., 4], got [2, 3]");
  CHECK_THROWS_WITH_ALL(layer.forward(Tensor()), "Linear(in_features=4, out_features=8)", "undefined");
  CHECK_THROWS_WITH_ALL(nn::Linear(0, 3), "Linear(in_features=0, out_features=3)", "positive");
}

// --- Embedding ---------------------------------------------------------------------------------

TEST_CASE("Embedding: PyTorch's parameter count, N(0, 1) values and a zero padding row") {
  nn::Embedding bert(30522, 768);
  CHECK(parameter_names(bert) == std::vector<std::string>{"weight"});
  CHECK(bert.num_parameters() == 23'440'896);

  nn::Embedding table(1000, 64, /*padding_idx=*/3);
  CHECK(table.padding_idx() == 3);
  const std::vector<double> values = table.weight.to_vector<double>();
  CHECK(mean_of(values) == doctest::Approx(0.0).epsilon(0.02).scale(1.0));
  CHECK(std_of(values) == doctest::Approx(1.0).epsilon(0.02));
  CHECK(max_abs(table.weight.select(0, 3)) == 0.0);
  CHECK(max_abs(table.weight.select(0, 2)) > 0.0);

  nn::Embedding from_end(10, 4, -1);  // counts from the end, as in PyTorch
  CHECK(from_end.padding_idx() == 9);
  CHECK(max_abs(from_end.weight.select(0, 9)) == 0.0);
}

TEST_CASE("Embedding: forward picks rows; the padding row gets no gradient") {
  nn::Embedding table(6, 3, 0);
  const Tensor ids = tensor<int64_t>({2, 0, 5, 2}, {2, 2});
  const Tensor out = table.forward(ids);
  CHECK(out.sizes() == Shape{2, 2, 3});
  for (int64_t j = 0; j < 3; ++j) {
    CHECK(out.at<float>(0, 0, j) == table.weight.at<float>(2, j));
    CHECK(out.at<float>(0, 1, j) == 0.0f);
    CHECK(out.at<float>(1, 0, j) == table.weight.at<float>(5, j));
  }
  out.sum().backward();
  const Tensor grad = table.weight.grad();
  CHECK(grad.at<float>(2, 0) == 2.0f);  // id 2 used twice
  CHECK(grad.at<float>(5, 1) == 1.0f);
  CHECK(grad.at<float>(0, 0) == 0.0f);  // padding
  CHECK(grad.at<float>(1, 0) == 0.0f);  // unused
}

TEST_CASE("Embedding: errors") {
  CHECK_THROWS_WITH_ALL(nn::Embedding(5, 4, 5), "Embedding(num_embeddings=5, embedding_dim=4)", "padding_idx 5",
                        "[-5, 5)");
  CHECK_THROWS_WITH_ALL(nn::Embedding(0, 4), "Embedding(num_embeddings=0, embedding_dim=4)", "positive");
  nn::Embedding table(5, 4);
  CHECK_THROWS_WITH_ALL(table.forward(zeros({2, 3})), "Embedding(num_embeddings=5, embedding_dim=4)",
                        "expected int64 ids", "float32", "[2, 3]");
  CHECK_THROWS_WITH_ALL(table.forward(tensor<int64_t>({1, 7}, {2})), "7");
}

// --- LayerNorm ---------------------------------------------------------------------------------

TEST_CASE("LayerNorm: names, count, ones and zeros") {
  nn::LayerNorm norm(768);
  CHECK(parameter_names(norm) == std::vector<std::string>{"weight", "bias"});
  CHECK(norm.num_parameters() == 1'536);
  check_close(norm.weight, ones({768}), 0, 0);
  check_close(norm.bias, zeros({768}), 0, 0);
  nn::LayerNorm plain(8, 1e-5, /*elementwise_affine=*/false);
  CHECK(plain.num_parameters() == 0);
  nn::LayerNorm two_dims(Shape{3, 4});
  CHECK(two_dims.weight.sizes() == Shape{3, 4});
}

TEST_CASE("LayerNorm: forward matches a naive normalisation over the last dims") {
  nn::LayerNorm norm(Shape{2, 3}, 1e-5);
  {
    NoGradGuard no_grad;
    norm.weight.copy_(tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3}));
    norm.bias.copy_(tensor<float>({0.5, -0.5, 0, 1, 2, 3}, {2, 3}));
  }
  const Tensor x = randn({4, 2, 3});
  const Tensor y = norm.forward(x);
  std::vector<double> expected;
  const std::vector<float> xs = x.to_vector<float>(), w = norm.weight.to_vector<float>(),
                           b = norm.bias.to_vector<float>();
  for (int row = 0; row < 4; ++row) {
    double mean = 0, var = 0;
    for (int i = 0; i < 6; ++i) mean += xs[row * 6 + i] / 6.0;
    for (int i = 0; i < 6; ++i) var += (xs[row * 6 + i] - mean) * (xs[row * 6 + i] - mean) / 6.0;
    for (int i = 0; i < 6; ++i) expected.push_back((xs[row * 6 + i] - mean) / std::sqrt(var + 1e-5) * w[i] + b[i]);
  }
  check_close(y, tensor(expected, {4, 2, 3}, kFloat32), 1e-5, 1e-4);
}

TEST_CASE("LayerNorm: gradcheck in float64") {
  nn::LayerNorm norm(4);
  norm.to(kFloat64);
  {
    NoGradGuard no_grad;  // away from ones and zeros, so the affine part is exercised
    norm.weight.copy_(randn({4}, kFloat64));
    norm.bias.copy_(randn({4}, kFloat64));
  }
  CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return norm.forward(in[0]); },
                  (std::vector<Tensor>{leaf({3, 4}), norm.weight, norm.bias}));
}

TEST_CASE("LayerNorm: errors") {
  nn::LayerNorm norm(Shape{2, 3});
  CHECK_THROWS_WITH_ALL(norm.forward(zeros({4, 3, 2})), "LayerNorm(normalized_shape=[2, 3])",
                        "expected input [..., 2, 3], got [4, 3, 2]");
  CHECK_THROWS_WITH_ALL(norm.forward(zeros({3})), "expected input [..., 2, 3], got [3]");
  CHECK_THROWS_WITH_ALL(nn::LayerNorm(Shape{}), "LayerNorm(normalized_shape=[])", "non-empty");
  CHECK_THROWS_WITH_ALL(nn::LayerNorm(4, 0.0), "LayerNorm(normalized_shape=[4])", "eps must be positive");
}

// --- Dropout and activations -------------------------------------------------------------------

TEST_CASE("Dropout: the identity in eval mode, active in train mode") {
  nn::Dropout drop(0.5);
  const Tensor x = add(rand({1000}), 1.0);
  drop.eval();
  check_close(drop.forward(x), x, 0, 0);
  drop.train();
  const Tensor y = drop.forward(x);
  const std::vector<float> xs = x.to_vector<float>(), ys = y.to_vector<float>();
  int zeros_count = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (ys[i] == 0.0f) {
      ++zeros_count;
    } else {
      CHECK(ys[i] == doctest::Approx(2.0f * xs[i]));
    }
  }
  CHECK(zeros_count > 400);
  CHECK(zeros_count < 600);

  manual_seed(9);
  const Tensor first = drop.forward(x);
  manual_seed(9);
  check_close(drop.forward(x), first, 0, 0);
  CHECK_THROWS_WITH_ALL(nn::Dropout(1.5), "Dropout", "[0, 1]", "1.5");
}

TEST_CASE("ReLU, GELU (exact and tanh) and Softmax match their formulas") {
  const Tensor x = tensor<float>({-2.0f, -0.5f, 0.0f, 0.7f, 3.0f}, {5});
  const std::vector<float> xs = x.to_vector<float>();
  std::vector<double> relu_ref, gelu_ref, gelu_tanh_ref;
  for (double v : xs) {
    relu_ref.push_back(std::max(v, 0.0));
    gelu_ref.push_back(0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))));
    gelu_tanh_ref.push_back(0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (v + 0.044715 * v * v * v))));
  }
  check_close(nn::ReLU().forward(x), tensor(relu_ref, {5}, kFloat32), 0, 0);
  check_close(nn::GELU().forward(x), tensor(gelu_ref, {5}, kFloat32), 1e-6, 1e-5);
  check_close(nn::GELU(GeluApproximation::Tanh).forward(x), tensor(gelu_tanh_ref, {5}, kFloat32), 1e-6, 1e-5);

  const Tensor logits = tensor<float>({1, 2, 3, 0, 0, 0}, {2, 3});
  nn::Softmax by_row(-1);
  const double denominator = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  check_close(by_row.forward(logits), tensor<double>({std::exp(1.0) / denominator, std::exp(2.0) / denominator,
                                                      std::exp(3.0) / denominator, 1 / 3.0, 1 / 3.0, 1 / 3.0},
                                                     {2, 3}, kFloat32));
  nn::Softmax by_column(0);
  const double e1 = 1 / (1 + std::exp(-1.0));
  CHECK(by_column.forward(logits).at<float>(0, 0) == doctest::Approx(e1));
  CHECK_THROWS_WITH_ALL(nn::Softmax(2).forward(logits), "Softmax(dim=2)", "out of range", "[2, 3]");
}

TEST_CASE("activate picks relu or exact gelu") {
  const Tensor x = randn({7});
  check_close(nn::activate(nn::Activation::ReLU, x), relu(x), 0, 0);
  check_close(nn::activate(nn::Activation::GELU, x), gelu(x), 0, 0);
}

// --- containers --------------------------------------------------------------------------------

TEST_CASE("Sequential: children named by index, forward chains them, train/eval reaches them") {
  auto mlp = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(4, 8), std::make_shared<nn::ReLU>(),
                                              std::make_shared<nn::Linear>(8, 2));
  CHECK(mlp->size() == 3);
  CHECK(parameter_names(*mlp) == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});
  CHECK(mlp->num_parameters() == 4 * 8 + 8 + 8 * 2 + 2);
  const Tensor x = randn({3, 4});
  const auto first = mlp->at<nn::Linear>(0), last = mlp->at<nn::Linear>(2);
  check_close(mlp->forward(x), last->forward(relu(first->forward(x))), 0, 0);
  CHECK((*mlp)[1]->type_name() == "ReLU");

  mlp->push_back(std::make_shared<nn::Dropout>(0.5));
  CHECK(mlp->named_children().back().first == "3");
  mlp->eval();
  CHECK_FALSE(mlp->at<nn::Dropout>(3)->is_training());
  check_close(mlp->forward(x), last->forward(relu(first->forward(x))), 0, 0);

  nn::Sequential empty_chain;
  check_close(empty_chain.forward(x), x, 0, 0);

  int count = 0;
  for (const auto& module : *mlp) count += module != nullptr;
  CHECK(count == 4);
}

TEST_CASE("Sequential: nested names and errors") {
  nn::Sequential outer(std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(2, 2)),
                       std::make_shared<nn::FeedForward>(2, 3));
  const auto names = parameter_names(outer);
  CHECK(names.front() == "0.0.weight");
  CHECK(names.back() == "1.linear2.bias");
  CHECK_THROWS_WITH_ALL(outer[2], "Sequential", "index 2", "2 modules");
  CHECK_THROWS_WITH_ALL(outer.at<nn::Linear>(1), "Sequential", "module 1 is a FeedForward");
  CHECK_THROWS_WITH_ALL(outer.push_back(nullptr), "Sequential", "null");
}

TEST_CASE("ModuleList: index names, typed access and errors") {
  nn::ModuleList layers;
  CHECK(layers.empty());
  layers.push_back(std::make_shared<nn::Linear>(3, 3));
  layers.push_back(std::make_shared<nn::LayerNorm>(3));
  CHECK(layers.size() == 2);
  CHECK(parameter_names(layers) == std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias"});
  CHECK(layers[1]->type_name() == "LayerNorm");
  CHECK(layers.at<nn::LayerNorm>(1)->normalized_shape() == Shape{3});
  CHECK(layers.at<nn::Linear>(0)->in_features() == 3);
  CHECK_THROWS_WITH_ALL(layers.at<nn::Linear>(1), "ModuleList", "module 1 is a LayerNorm");
  CHECK_THROWS_WITH_ALL(layers[5], "ModuleList", "index 5", "2 modules");
  CHECK_THROWS_WITH_ALL(layers.push_back(nullptr), "ModuleList", "null");

  nn::ModuleList built(std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(2, 2));
  CHECK(built.named_children()[1].first == "1");
  layers.eval();
  CHECK_FALSE(layers[0]->is_training());
}

// --- FeedForward -------------------------------------------------------------------------------

TEST_CASE("FeedForward: names as PyTorch's TransformerEncoderLayer, counts, forward") {
  nn::FeedForward block(768, 3072, nn::Activation::GELU, 0.1);
  CHECK(parameter_names(block) ==
        std::vector<std::string>{"linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias"});
  CHECK(block.num_parameters() == 2 * 2'362'368 - 3072 + 768);

  nn::FeedForward small(4, 6, nn::Activation::ReLU, 0.5);
  small.eval();
  const Tensor x = randn({2, 3, 4});
  check_close(small.forward(x), small.linear2->forward(relu(small.linear1->forward(x))), 0, 0);
  nn::FeedForward with_gelu(4, 6, nn::Activation::GELU, 0.0);
  check_close(with_gelu.forward(x), with_gelu.linear2->forward(gelu(with_gelu.linear1->forward(x))), 0, 0);
  small.train();  // dropout now zeroes some outputs
  const std::vector<float> dropped = small.forward(randn({8, 4})).to_vector<float>();
  CHECK(std::count(dropped.begin(), dropped.end(), 0.0f) > 0);
  CHECK_THROWS_WITH_ALL(nn::FeedForward(0, 4), "FeedForward(d_model=0, d_ff=4)", "positive");
  CHECK_THROWS_WITH_ALL(small.forward(zeros({2, 5})), "Linear(in_features=4, out_features=6)", "[2, 5]");
}

TEST_CASE("FeedForward: gradcheck in float64 (dropout 0)") {
  for (const nn::Activation activation : {nn::Activation::ReLU, nn::Activation::GELU}) {
    nn::FeedForward block(3, 4, activation, 0.0);
    block.to(kFloat64);
    std::vector<Tensor> inputs{leaf({2, 3})};
    for (const Tensor& p : block.parameters()) inputs.push_back(p);
    CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return block.forward(in[0]); }, inputs);
  }
}

// --- positions ---------------------------------------------------------------------------------

TEST_CASE("SinusoidalPositionalEncoding: the buffer 'pe' holds the paper's sinusoids") {
  nn::SinusoidalPositionalEncoding encoding(6, 50);
  CHECK(encoding.num_parameters() == 0);
  const auto buffers = encoding.named_buffers();
  REQUIRE(buffers.size() == 1);
  CHECK(buffers[0].first == "pe");
  CHECK(encoding.state_dict().contains("pe"));
  CHECK(encoding.pe.sizes() == Shape{50, 6});
  for (int64_t pos : {0, 1, 7, 49}) {
    for (int64_t i = 0; i < 3; ++i) {
      const double angle = pos / std::pow(10000.0, 2.0 * i / 6.0);
      CHECK(encoding.pe.at<float>(pos, 2 * i) == doctest::Approx(std::sin(angle)).epsilon(1e-6));
      CHECK(encoding.pe.at<float>(pos, 2 * i + 1) == doctest::Approx(std::cos(angle)).epsilon(1e-6));
    }
  }
  nn::SinusoidalPositionalEncoding odd(5, 4);  // the last (even) dim has a sine and no cosine
  CHECK(odd.pe.at<float>(3, 4) == doctest::Approx(std::sin(3.0 / std::pow(10000.0, 4.0 / 5.0))));
}

TEST_CASE("SinusoidalPositionalEncoding: forward adds pe[:seq_len]; errors") {
  nn::SinusoidalPositionalEncoding encoding(4, 10);
  const Tensor x = randn({2, 3, 4});
  const Tensor y = encoding.forward(x);
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t s = 0; s < 3; ++s) {
      for (int64_t d = 0; d < 4; ++d) CHECK(y.at<float>(b, s, d) == x.at<float>(b, s, d) + encoding.pe.at<float>(s, d));
    }
  }
  encoding.to(kFloat64);
  CHECK(encoding.pe.dtype() == kFloat64);
  CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return encoding.forward(in[0]); },
                  (std::vector<Tensor>{leaf({1, 2, 4})}));
  CHECK_THROWS_WITH_ALL(encoding.forward(zeros({1, 11, 4}, kFloat64)),
                        "SinusoidalPositionalEncoding(d_model=4, max_len=10)", "sequence length 11 exceeds max_len 10");
  CHECK_THROWS_WITH_ALL(encoding.forward(zeros({3, 4}, kFloat64)), "SinusoidalPositionalEncoding",
                        "expected input [batch, seq_len, 4], got [3, 4]");
  CHECK_THROWS_WITH_ALL(encoding.forward(zeros({1, 3, 5}, kFloat64)), "expected input [batch, seq_len, 4], got [1, 3, 5]");
}

TEST_CASE("LearnedPositionalEmbedding: a trained 'weight' added by position; errors") {
  nn::LearnedPositionalEmbedding positions(8, 4);
  CHECK(parameter_names(positions) == std::vector<std::string>{"weight"});
  CHECK(positions.num_parameters() == 32);
  const Tensor x = randn({2, 5, 4});
  check_close(positions.forward(x), add(x, positions.weight.narrow(0, 0, 5)), 0, 0);
  positions.forward(x).sum().backward();
  CHECK(positions.weight.grad().at<float>(4, 0) == 2.0f);  // two batch rows
  CHECK(positions.weight.grad().at<float>(5, 0) == 0.0f);  // beyond seq_len
  CHECK_THROWS_WITH_ALL(positions.forward(zeros({1, 9, 4})), "LearnedPositionalEmbedding(max_len=8, d_model=4)",
                        "sequence length 9 exceeds max_len 8");
}

TEST_CASE("TokenEmbedding: scaled by sqrt(d_model) when asked; names 'embedding.weight'") {
  nn::TokenEmbedding scaled(10, 16, true, 0);
  CHECK(parameter_names(scaled) == std::vector<std::string>{"embedding.weight"});
  const Tensor ids = tensor<int64_t>({3, 0, 9}, {1, 3});
  check_close(scaled.forward(ids), mul(scaled.embedding->forward(ids), 4.0), 0, 0);
  CHECK(max_abs(scaled.forward(ids).select(1, 1)) == 0.0);  // padding id
  nn::TokenEmbedding plain(10, 16, false);
  check_close(plain.forward(ids), plain.embedding->forward(ids), 0, 0);
  CHECK_THROWS_WITH_ALL(plain.forward(tensor<int64_t>({10}, {1, 1})), "10");
}
