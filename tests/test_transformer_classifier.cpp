// The transformer classifier: sizes, pooling, padding, errors.
#include "helpers.h"

using namespace ember;
using namespace ember::testing;

namespace {

nn::TransformerClassifierOptions tiny(nn::Pooling pooling) {
  nn::TransformerClassifierOptions options;
  options.vocab_size = 11;
  options.max_len = 8;
  options.num_classes = 3;
  options.num_layers = 2;
  options.layer.d_model = 8;
  options.layer.num_heads = 2;
  options.layer.d_ff = 16;
  options.layer.dropout = 0.0;
  options.layer.norm_first = true;
  options.pooling = pooling;
  return options;
}

}  // namespace

TEST_CASE("the benchmark classifier has PyTorch's parameter count") {
  // vocabulary 8192, d_model 256, 4 heads, 4 pre-LN layers, d_ff 1024, GELU, learned positions
  // for 128 tokens with LayerNorm, 4 classes: 5,290,500 parameters in nn.TransformerEncoder form.
  nn::TransformerClassifierOptions options;
  options.vocab_size = 8192;
  options.max_len = 128;
  options.num_classes = 4;
  options.num_layers = 4;
  options.layer = {.d_model = 256, .num_heads = 4, .d_ff = 1024, .dropout = 0.1,
                   .activation = nn::Activation::GELU, .norm_first = true};
  nn::TransformerClassifier model(options);
  CHECK(model.num_parameters() == 5290500);
}

TEST_CASE("logits have shape [batch, classes]; CLS pooling reads the first token") {
  manual_seed(1);
  nn::TransformerClassifier model(tiny(nn::Pooling::Cls));
  const Tensor ids = tensor({1, 4, 5, 6, 1, 7, 8, 0}, {2, 4}, kInt64);
  const Tensor logits = model.forward(ids);
  CHECK(logits.sizes() == Shape{2, 3});
  const Tensor features = model.features(ids);
  CHECK(features.sizes() == Shape{2, 8});
}

TEST_CASE("mean pooling ignores padding: padded ids and their count do not change the result") {
  manual_seed(2);
  nn::TransformerClassifier model(tiny(nn::Pooling::Mean));
  model.eval();
  const Tensor short_ids = tensor({3, 4, 5}, {1, 3}, kInt64);
  const Tensor padded_ids = tensor({3, 4, 5, 9, 2}, {1, 5}, kInt64);
  const Tensor padding = tensor({false, false, false, true, true}, {1, 5});
  check_close(model.forward(padded_ids, padding), model.forward(short_ids), 1e-5, 1e-5);
}

TEST_CASE("attention_weights gives each layer's maps: rows sum to 1, padding keys get none") {
  manual_seed(5);
  nn::TransformerClassifier model(tiny(nn::Pooling::Mean));
  model.eval();
  const Tensor ids = tensor({3, 4, 5, 9, 2}, {1, 5}, kInt64);
  const Tensor padding = tensor({false, false, false, true, true}, {1, 5});
  const std::vector<Tensor> maps = model.attention_weights(ids, padding);
  REQUIRE(maps.size() == 2);
  for (const Tensor& weights : maps) {
    CHECK(weights.sizes() == Shape{1, 2, 5, 5});
    check_close(sum(weights, {-1}), ones({1, 2, 5}), 1e-5, 1e-5);
    CHECK(max_abs(weights.narrow(3, 3, 2)) == 0.0);
  }
  // Layer 0's maps are those its own self-attention computes from the embedded input, and the
  // second layer's come from the first layer's output: compare with a run by hand.
  auto& layer0 = *model.encoder->layers->at<nn::TransformerEncoderLayer>(0);
  auto& layer1 = *model.encoder->layers->at<nn::TransformerEncoderLayer>(1);
  Tensor x = model.position_embedding->forward(model.token_embedding->forward(ids));
  x = model.embedding_norm->forward(x);
  const nn::EncoderMasks masks{.key_padding_mask = padding};
  const Tensor h0 = layer0.norm1->forward(x);
  check_close(maps[0], layer0.self_attn->forward(h0, h0, h0, {.key_padding_mask = padding, .need_weights = true}).weights,
              1e-6, 1e-6);
  check_close(maps[1], layer1.attention_weights(layer0.forward(x, masks), masks), 1e-6, 1e-6);
  CHECK_THROWS_WITH_ALL(model.attention_weights(ids, tensor({false, true}, {1, 2})),
                        "TransformerClassifier", "padding_mask", "[1, 5]");
}

TEST_CASE("a tiny classifier's gradients reach every parameter") {
  nn::TransformerClassifier model(tiny(nn::Pooling::Mean));
  const Tensor ids = tensor({1, 2, 3, 4}, {1, 4}, kInt64);
  sum(model.forward(ids)).backward();
  for (const auto& [name, p] : model.named_parameters()) {
    CAPTURE(name);
    CHECK(p.grad().defined());
  }
}

TEST_CASE("classifier errors name the module and the shapes") {
  nn::TransformerClassifier model(tiny(nn::Pooling::Cls));
  CHECK_THROWS_WITH_ALL(model.forward(ones({2, 3})), "TransformerClassifier", "int64 ids", "float32 [2, 3]");
  CHECK_THROWS_WITH_ALL(model.forward(ones({2, 3}, kInt64), ones({2, 4}, kBool)), "padding_mask", "[2, 3]",
                        "[2, 4]");
  CHECK_THROWS_WITH_ALL(model.forward(ones({1, 9}, kInt64)), "9");  // longer than max_len 8
  CHECK_THROWS(model.forward(full({1, 2}, 11, kInt64)));             // id outside the vocabulary
}

TEST_CASE("a tiny classifier overfits a fixed batch (loss under 0.01)") {
  manual_seed(5);
  nn::TransformerClassifier model(tiny(nn::Pooling::Mean));
  const Tensor ids = tensor({1, 2, 3, 0, 4, 5, 6, 7, 8, 9, 0, 0, 10, 3, 2, 1}, {4, 4}, kInt64);
  const Tensor padding = eq(ids, 0.0);
  const Tensor labels = tensor({0, 1, 2, 1}, {4}, kInt64);
  nn::AdamW optimizer(model.parameters(), {.lr = 1e-2, .weight_decay = 0.0});
  double loss_value = 0;
  for (int step = 0; step < 200 && (step == 0 || loss_value >= 0.01); ++step) {
    optimizer.zero_grad();
    const Tensor loss = nn::cross_entropy(model.forward(ids, padding), labels);
    loss.backward();
    optimizer.step();
    loss_value = loss.item();
  }
  CHECK(loss_value < 0.01);
}
