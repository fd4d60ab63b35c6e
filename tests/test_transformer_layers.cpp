// Encoder and decoder layers and stacks: parameter counts, names, gradients, masks, errors.
#include "helpers.h"
#include "nn/models/transformer_layers.h"

using namespace ember;
using namespace ember::testing;

namespace {

nn::TransformerLayerOptions tiny(bool norm_first) {
  nn::TransformerLayerOptions options;
  options.d_model = 4;
  options.num_heads = 2;
  options.d_ff = 6;
  options.dropout = 0.0;
  options.norm_first = norm_first;
  return options;
}

// The module's own parameters follow the input in gradcheck's list, so every one is checked.
std::vector<Tensor> with_parameters(const Tensor& input, const nn::Module& module) {
  std::vector<Tensor> inputs{input};
  for (const Tensor& p : module.parameters()) inputs.push_back(p);
  return inputs;
}

}  // namespace

TEST_CASE("a BERT-base sized encoder layer has PyTorch's parameter count") {
  nn::TransformerLayerOptions options;
  options.d_model = 768;
  options.num_heads = 12;
  options.d_ff = 3072;
  nn::TransformerEncoderLayer layer(options);
  CHECK(layer.num_parameters() == 7087872);
}

TEST_CASE("stacks name their parameters with PyTorch-style dotted paths") {
  nn::TransformerEncoder encoder(tiny(true), 2, /*final_norm=*/true);
  const auto named = encoder.named_parameters();
  std::vector<std::string> names;
  for (const auto& entry : named) names.push_back(entry.first);
  CHECK(names.front() == "layers.0.self_attn.q_proj.weight");
  CHECK(std::find(names.begin(), names.end(), "layers.1.feed_forward.linear2.bias") != names.end());
  CHECK(names.back() == "norm.bias");
  nn::TransformerDecoder decoder(tiny(false), 1, /*final_norm=*/false);
  CHECK(decoder.named_parameters()[8].first == "layers.0.cross_attn.q_proj.weight");
  CHECK(decoder.norm == nullptr);
}

TEST_CASE("a whole encoder layer passes gradcheck, post-LN and pre-LN, with a padding mask") {
  for (bool norm_first : {false, true}) {
    CAPTURE(norm_first);
    nn::TransformerEncoderLayer layer(tiny(norm_first));
    layer.to(kFloat64);
    const Tensor padding = tensor({false, false, true}, {1, 3});
    auto fn = [&](const std::vector<Tensor>& in) { return layer.forward(in[0], {.key_padding_mask = padding}); };
    CHECK_GRADCHECK(fn, with_parameters(leaf({1, 3, 4}), layer));
  }
}

TEST_CASE("a whole decoder layer passes gradcheck, post-LN and pre-LN, causal and with memory padding") {
  for (bool norm_first : {false, true}) {
    CAPTURE(norm_first);
    nn::TransformerDecoderLayer layer(tiny(norm_first));
    layer.to(kFloat64);
    const Tensor memory = leaf({1, 2, 4});
    nn::DecoderMasks masks;
    masks.memory_key_padding_mask = tensor({false, true}, {1, 2});
    auto fn = [&](const std::vector<Tensor>& in) { return layer.forward(in[0], in[1], masks); };
    std::vector<Tensor> inputs = with_parameters(leaf({1, 3, 4}), layer);
    inputs.insert(inputs.begin() + 1, memory);
    CHECK_GRADCHECK(fn, inputs);
  }
}

TEST_CASE("a padded token does not change the other tokens' outputs") {
  manual_seed(3);
  nn::TransformerEncoder encoder(tiny(true), 2, true);
  Tensor x = randn({1, 4, 4});
  const Tensor padding = tensor({false, false, false, true}, {1, 4});
  const Tensor before = encoder.forward(x, {.key_padding_mask = padding});
  Tensor changed = x.clone();
  changed.select(1, 3).copy_(randn({1, 4}));
  const Tensor after = encoder.forward(changed, {.key_padding_mask = padding});
  check_close(after.narrow(1, 0, 3), before.narrow(1, 0, 3), 0, 0);
}

TEST_CASE("the decoder is causal: a later target token does not change earlier outputs") {
  manual_seed(4);
  nn::TransformerDecoder decoder(tiny(false), 2, false);
  const Tensor memory = randn({2, 3, 4});
  Tensor target = randn({2, 5, 4});
  const Tensor before = decoder.forward(target, memory);
  Tensor changed = target.clone();
  changed.select(1, 4).copy_(randn({2, 4}));
  check_close(decoder.forward(changed, memory).narrow(1, 0, 4), before.narrow(1, 0, 4), 0, 0);
}

TEST_CASE("dropout is inactive in eval mode") {
  nn::TransformerLayerOptions options = tiny(false);
  options.dropout = 0.5;
  nn::TransformerEncoderLayer layer(options);
  layer.eval();
  const Tensor x = randn({2, 3, 4});
  check_close(layer.forward(x), layer.forward(x), 0, 0);
  layer.train();
  CHECK(max(abs(sub(layer.forward(x), layer.forward(x)))).item() > 0);
}

TEST_CASE("bad configurations and inputs name the module and the shapes") {
  nn::TransformerLayerOptions options = tiny(false);
  options.num_heads = 3;
  CHECK_THROWS_WITH_ALL(nn::TransformerEncoderLayer(options), "TransformerEncoderLayer",
                        "d_model 4 is not divisible by num_heads 3");
  nn::TransformerEncoderLayer encoder_layer(tiny(false));
  CHECK_THROWS_WITH_ALL(encoder_layer.forward(randn({2, 3, 5})), "TransformerEncoderLayer", "[batch, length, 4]",
                        "[2, 3, 5]");
  nn::TransformerDecoderLayer decoder_layer(tiny(false));
  CHECK_THROWS_WITH_ALL(decoder_layer.forward(randn({2, 3, 4}), randn({3, 3, 4})), "target batch 2",
                        "memory batch 3");
  CHECK_THROWS_WITH_ALL(nn::TransformerEncoder(tiny(false), 0, false), "num_layers must be positive");
}
