// autograd::checkpoint: the same values and gradients as without it (dropout included), fewer
// activations kept, and the errors of what it cannot do.
#include "helpers.h"
#include "nn/models/transformer_layers.h"

using namespace ember;
using namespace ember::testing;

namespace {

nn::TransformerLayerOptions small_layer() {
  nn::TransformerLayerOptions options;
  options.d_model = 8;
  options.num_heads = 2;
  options.d_ff = 16;
  options.dropout = 0.25;  // dropout on: the recomputation must draw the same masks
  return options;
}

// Loss and gradients (input first, then every parameter) of two encoder layers in training
// mode, each through checkpoint or not.
std::vector<Tensor> loss_and_gradients(nn::TransformerEncoderLayer& first, nn::TransformerEncoderLayer& second,
                                       const Tensor& x, bool checkpointed) {
  for (nn::Module* layer : {static_cast<nn::Module*>(&first), static_cast<nn::Module*>(&second)}) {
    layer->zero_grad();
  }
  Tensor input = x.detach();
  input.requires_grad_();
  manual_seed(42);
  auto block = [](nn::TransformerEncoderLayer& layer) {
    return [&layer](const std::vector<Tensor>& in) { return layer.forward(in[0]); };
  };
  Tensor h = checkpointed ? autograd::checkpoint(block(first), {input}) : first.forward(input);
  h = checkpointed ? autograd::checkpoint(block(second), {h}) : second.forward(h);
  const Tensor loss = sum(mul(h, h));
  loss.backward();
  std::vector<Tensor> results{loss.detach(), input.grad()};
  for (nn::Module* layer : {static_cast<nn::Module*>(&first), static_cast<nn::Module*>(&second)}) {
    for (const Tensor& p : layer->parameters()) results.push_back(p.grad().clone());
  }
  return results;
}

}  // namespace

TEST_CASE("checkpoint: two encoder layers with dropout give the same loss and gradients, to 1e-12") {
  manual_seed(1);
  nn::TransformerEncoderLayer first(small_layer()), second(small_layer());
  first.to(kFloat64);
  second.to(kFloat64);
  const Tensor x = randn({2, 5, 8}, kFloat64);
  const std::vector<Tensor> plain = loss_and_gradients(first, second, x, false);
  const std::vector<Tensor> checkpointed = loss_and_gradients(first, second, x, true);
  REQUIRE(plain.size() == checkpointed.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    CAPTURE(i);
    check_close(checkpointed[i], plain[i], 1e-12, 0);
  }
  // The random state after the step is the one a plain step leaves: the recomputation restores it.
  manual_seed(7);
  Tensor input = x.detach();
  input.requires_grad_();
  sum(autograd::checkpoint([&](const std::vector<Tensor>& in) { return first.forward(in[0]); }, {input})).backward();
  const Tensor after_checkpoint = randn({4}, kFloat64);
  manual_seed(7);
  sum(first.forward(input)).backward();
  check_close(randn({4}, kFloat64), after_checkpoint, 0, 0);
}

TEST_CASE("checkpoint: gradcheck through it, inputs that need no grad, and one node in the graph") {
  manual_seed(2);
  const Tensor w = leaf({3, 3});
  const Tensor mask = gt(randn({2, 3}, kFloat64), 0.0);
  auto block = [&](const std::vector<Tensor>& in) {
    manual_seed(3);
    return dropout(masked_fill(tanh(matmul(in[0], in[1])), in[2], 0.0), 0.5);
  };
  CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return autograd::checkpoint(block, {in[0], in[1], mask}); },
                  (std::vector<Tensor>{leaf({2, 3}), w}));
  const Tensor y = autograd::checkpoint(block, {leaf({2, 3}), w, mask});
  REQUIRE(y.grad_fn());
  CHECK(y.grad_fn()->name() == "CheckpointBackward");
  CHECK(y.grad_fn()->inputs[0].leaf != nullptr);  // straight to the input: nothing of fn was kept
}

TEST_CASE("checkpoint_layers: an encoder-decoder's stacks give the same loss and gradients, to 1e-12") {
  manual_seed(4);
  nn::TransformerEncoder encoder(small_layer(), 2, /*final_norm=*/true);
  nn::TransformerDecoder decoder(small_layer(), 2, /*final_norm=*/true);
  encoder.to(kFloat64);
  decoder.to(kFloat64);
  const Tensor source = randn({2, 5, 8}, kFloat64), target = randn({2, 4, 8}, kFloat64);
  nn::DecoderMasks masks;
  masks.memory_key_padding_mask = tensor({false, false, false, true, true, false, false, false, false, false}, {2, 5});
  auto run = [&](bool checkpointed) {
    encoder.checkpoint_layers = decoder.checkpoint_layers = checkpointed;
    encoder.zero_grad();
    decoder.zero_grad();
    Tensor source_leaf = source.detach(), target_leaf = target.detach();
    source_leaf.requires_grad_();
    target_leaf.requires_grad_();
    manual_seed(9);
    const Tensor memory = encoder.forward(source_leaf, {.key_padding_mask = masks.memory_key_padding_mask});
    const Tensor out = decoder.forward(target_leaf, memory, masks);
    const Tensor loss = sum(mul(out, out));
    loss.backward();
    std::vector<Tensor> results{loss.detach(), source_leaf.grad(), target_leaf.grad()};
    for (const Tensor& p : encoder.parameters()) results.push_back(p.grad().clone());
    for (const Tensor& p : decoder.parameters()) results.push_back(p.grad().clone());
    return results;
  };
  const std::vector<Tensor> plain = run(false);
  const std::vector<Tensor> checkpointed = run(true);
  REQUIRE(plain.size() == checkpointed.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    CAPTURE(i);
    check_close(checkpointed[i], plain[i], 1e-12, 0);
  }
}

TEST_CASE("checkpoint: create_graph and autograd::grad throw, naming it") {
  const Tensor x = leaf({3});
  auto square = [](const std::vector<Tensor>& in) { return mul(in[0], in[0]); };
  CHECK_THROWS_WITH_ALL(autograd::grad({sum(autograd::checkpoint(square, {x}))}, {x}, {}, {.create_graph = true}),
                        "CheckpointBackward", "no second derivative");
  CHECK_THROWS_WITH_ALL(autograd::grad({sum(autograd::checkpoint(square, {x}))}, {x}), "CheckpointBackward",
                        "autograd::grad");
  CHECK_THROWS_WITH_ALL(autograd::checkpoint([](const std::vector<Tensor>&) { return Tensor(); }, {x}), "checkpoint",
                        "undefined");
  // Without anything requiring grad it is fn itself.
  CHECK_FALSE(autograd::checkpoint(square, {x.detach()}).requires_grad());
}
