// The causal language model: sizes and weight tying, causality, overfitting and greedy
// recall, sampling (temperature, top-k, seeds, the drawn distribution), errors.
#include <map>

#include "helpers.h"
#include "nn/models/causal_lm.h"

using namespace ember;
using namespace ember::testing;

namespace {

nn::CausalLanguageModelOptions tiny(bool tie_embeddings = true) {
  nn::CausalLanguageModelOptions options;
  options.vocab_size = 11;
  options.max_len = 8;
  options.num_layers = 2;
  options.layer = {.d_model = 16, .num_heads = 2, .d_ff = 32, .dropout = 0.0,
                   .activation = nn::Activation::GELU, .norm_first = true};
  options.tie_embeddings = tie_embeddings;
  return options;
}

std::vector<int64_t> values(const Tensor& t) { return t.to_vector<int64_t>(); }

// Greedy decoding written out step by step: the reference generate(temperature 0) must match.
Tensor argmax_decode(nn::CausalLanguageModel& model, Tensor ids, int64_t new_tokens) {
  NoGradGuard no_grad;
  const int64_t max_len = model.options().max_len;
  for (int64_t i = 0; i < new_tokens; ++i) {
    const int64_t length = ids.size(1);
    const Tensor context = length > max_len ? ids.narrow(1, length - max_len, max_len) : ids;
    const Tensor logits = model.forward(context).select(1, -1);
    ids = cat({ids, argmax(logits, -1).unsqueeze(1)}, 1);
  }
  return ids;
}

}  // namespace

TEST_CASE("parameter count: embeddings, blocks, final norm, and the head unless tied") {
  const nn::CausalLanguageModelOptions options = tiny(false);
  const int64_t d = 16, ff = 32, vocab = 11, max_len = 8, layers = 2;
  const int64_t per_layer = 4 * (d * d + d)            // q, k, v, out projections
                            + (d * ff + ff) + (ff * d + d)  // feed-forward
                            + 2 * 2 * d;                    // two LayerNorms
  const int64_t untied_expected = vocab * d + max_len * d + layers * per_layer + 2 * d + vocab * d;
  nn::CausalLanguageModel untied(options);
  nn::CausalLanguageModel tied(tiny(true));
  CHECK(untied.num_parameters() == untied_expected);
  CHECK(tied.num_parameters() == untied.num_parameters() - vocab * d);

  nn::CausalLanguageModelOptions no_norm = tiny(true);
  no_norm.final_norm = false;
  CHECK(nn::CausalLanguageModel(no_norm).num_parameters() == tied.num_parameters() - 2 * d);
}

TEST_CASE("the tied head is the token embedding's tensor: named twice, trained, moved and loaded once") {
  manual_seed(3);
  nn::CausalLanguageModel model(tiny(true));
  CHECK(model.lm_head->weight.impl() == model.token_embedding->weight.impl());

  // PyTorch's state_dict lists a tied weight under both names; parameters() lists it once.
  const nn::StateDict state = model.state_dict();
  CHECK(state.contains("token_embedding.weight"));
  CHECK(state.contains("lm_head.weight"));
  CHECK(state.contains("decoder.norm.weight"));
  int64_t named = 0;
  for (const auto& [name, p] : model.named_parameters()) {
    named += name == "lm_head.weight" || name == "token_embedding.weight";
  }
  CHECK(named == 2);
  CHECK(model.parameters().size() == model.named_parameters().size() - 1);

  // The gradient of the shared table collects both uses: the lookup and the output layer.
  model.loss(tensor({1, 2, 3, 4}, {1, 4}, kInt64)).backward();
  const Tensor grad = model.token_embedding->weight.grad();
  REQUIRE(grad.defined());
  // Row 9 is never looked up, so only the head gives it a gradient.
  CHECK(abs(grad.select(0, 9)).sum().item() > 0);

  model.to(kFloat64);
  CHECK(model.lm_head->weight.impl() == model.token_embedding->weight.impl());
  CHECK(model.lm_head->weight.dtype() == kFloat64);

  // Loading writes through both names into the one tensor.
  nn::CausalLanguageModel other(tiny(true));
  other.load_state_dict(model.state_dict());
  CHECK(other.lm_head->weight.impl() == other.token_embedding->weight.impl());
  check_close(other.lm_head->weight, model.token_embedding->weight.to(kFloat32), 0, 0);
  const Tensor ids = tensor({5, 1, 7}, {1, 3}, kInt64);
  other.to(kFloat64);
  check_close(other.forward(ids), model.forward(ids), 1e-12, 1e-12);
}

TEST_CASE("logits have shape [batch, T, vocab]; position t does not see tokens after t") {
  manual_seed(4);
  nn::CausalLanguageModel model(tiny());
  model.eval();
  const std::vector<int64_t> tokens = {1, 4, 5, 6, 2, 7, 3, 1, 0, 9, 8, 2, 4, 4, 10, 6};
  const Tensor ids = tensor(tokens, {2, 8});
  const Tensor logits = model.forward(ids);
  CHECK(logits.sizes() == Shape{2, 8, 11});
  CHECK(model.features(ids).sizes() == Shape{2, 8, 16});
  for (int64_t t = 1; t < 8; ++t) {
    CAPTURE(t);
    std::vector<int64_t> changed = tokens;
    for (int64_t row = 0; row < 2; ++row) changed[row * 8 + t] = (changed[row * 8 + t] + 1) % 11;
    const Tensor changed_logits = model.forward(tensor(changed, {2, 8}));
    // Exactly equal before t (masked attention weights are exact zeros), different at t.
    const std::vector<float> before = logits.narrow(1, 0, t).contiguous().to_vector<float>();
    CHECK(changed_logits.narrow(1, 0, t).contiguous().to_vector<float>() == before);
    CHECK(changed_logits.select(1, t).contiguous().to_vector<float>() !=
          logits.select(1, t).contiguous().to_vector<float>());
  }
}

TEST_CASE("a tiny model memorises a sequence, then greedy generation from its first token recalls it") {
  manual_seed(5);
  nn::CausalLanguageModel model(tiny());
  // "1" is followed by 4 once and by 5 once: the model must use positions, not just the last token.
  const std::vector<int64_t> sequence = {3, 1, 4, 1, 5, 9, 2, 6};
  const Tensor ids = tensor(sequence, {1, 8});
  nn::AdamW optimizer(model.parameters(), {.lr = 1e-2, .weight_decay = 0.0});
  double loss_value = 0;
  int steps = 0;
  for (; steps < 400 && (steps == 0 || loss_value >= 0.05); ++steps) {
    optimizer.zero_grad();
    const Tensor loss = model.loss(ids);
    loss.backward();
    optimizer.step();
    loss_value = loss.item();
  }
  CHECK(loss_value < 0.05);
  CHECK(model.is_training());
  const Tensor generated = model.generate(tensor({3}, {1, 1}, kInt64), 7, {.temperature = 0.0});
  CHECK(values(generated) == sequence);
  CHECK(model.is_training());  // generate restores the mode it found
}

TEST_CASE("temperature 0 is argmax decoding, past max_len too; top_k = 1 is greedy") {
  manual_seed(6);
  nn::CausalLanguageModel model(tiny());
  model.eval();
  const Tensor prompt = tensor({1, 2, 3, 4, 5, 6, 7, 1, 2, 3}, {2, 5}, kInt64);
  const Tensor expected = argmax_decode(model, prompt, 6);  // 11 tokens: the context is cropped to 8
  const Tensor greedy = model.generate(prompt, 6, {.temperature = 0.0});
  CHECK(greedy.sizes() == Shape{2, 11});
  CHECK(values(greedy) == values(expected));
  CHECK(values(model.generate(prompt, 6, {.temperature = 1.0, .top_k = 1})) == values(expected));
  CHECK(values(model.generate(prompt, 6, {.temperature = 0.3, .top_k = 1})) == values(expected));
  CHECK(!model.is_training());  // eval stays eval
}

TEST_CASE("generate keeps the prompt as a prefix, returns [batch, T0 + new], and takes 1-D prompts") {
  manual_seed(7);
  nn::CausalLanguageModel model(tiny());
  const Tensor prompt = tensor({1, 2, 3, 4, 5, 6}, {2, 3}, kInt64);
  const Tensor out = model.generate(prompt, 4);
  CHECK(out.sizes() == Shape{2, 7});
  CHECK(out.dtype() == kInt64);
  CHECK(values(out.narrow(1, 0, 3)) == values(prompt));
  const std::vector<int64_t> all = values(out);
  for (int64_t id : all) CHECK((id >= 0 && id < 11));

  const Tensor one_d = model.generate(tensor({2, 9}, {2}, kInt64), 3, {.top_k = 4});
  CHECK(one_d.sizes() == Shape{5});
  CHECK(values(one_d.narrow(0, 0, 2)) == std::vector<int64_t>{2, 9});

  const Tensor none = model.generate(prompt, 0);
  CHECK(values(none) == values(prompt));
  CHECK(none.impl() != prompt.impl());
  CHECK(GradMode::is_enabled());
}

TEST_CASE("the same seed draws the same sample; different seeds differ") {
  manual_seed(8);
  nn::CausalLanguageModel model(tiny());
  const Tensor prompt = tensor({1, 2}, {1, 2}, kInt64);
  const nn::SamplingOptions flat = {.temperature = 2.0};
  manual_seed(100);
  const Tensor first = model.generate(prompt, 20, flat);
  manual_seed(100);
  const Tensor again = model.generate(prompt, 20, flat);
  manual_seed(101);
  const Tensor other = model.generate(prompt, 20, flat);
  CHECK(values(first) == values(again));
  CHECK(values(first) != values(other));
}

TEST_CASE("sampled tokens follow softmax(logits / temperature), restricted to the top k") {
  manual_seed(9);
  nn::CausalLanguageModel model(tiny(false));
  model.eval();
  {
    // A fresh head gives nearly uniform logits, where temperature hardly matters: spread them.
    NoGradGuard no_grad;
    Tensor head = model.lm_head->weight;
    head.mul_(2.0);
  }
  const int64_t draws = 4000;
  const Tensor prompt = full({draws, 2}, 3.0, kInt64);
  const Tensor logits = [&] {
    NoGradGuard no_grad;
    return model.forward(prompt.narrow(0, 0, 1)).select(1, -1).select(0, 0);  // [vocab]
  }();
  for (const auto& [temperature, top_k] : std::vector<std::pair<double, int64_t>>{{0.7, 0}, {1.5, 4}}) {
    CAPTURE(temperature);
    CAPTURE(top_k);
    Tensor scaled = div(logits, temperature);
    if (top_k > 0) {
      const Tensor kth = topk(scaled, top_k).values.select(0, top_k - 1);
      scaled = masked_fill(scaled, lt(scaled, kth), -INFINITY);
    }
    const std::vector<double> probabilities = softmax(scaled, -1).to_vector<double>();
    const std::vector<int64_t> drawn = values(model.generate(prompt, 1, {temperature, top_k}).select(1, 2));
    std::vector<double> frequency(11, 0.0);
    for (int64_t id : drawn) frequency[id] += 1.0 / draws;
    for (size_t i = 0; i < 11; ++i) {
      CAPTURE(i);
      if (probabilities[i] == 0.0) {
        CHECK(frequency[i] == 0.0);
      } else {
        // A standard error of at most 0.008 with 4000 draws: 0.035 is over four of them.
        CHECK(std::abs(frequency[i] - probabilities[i]) < 0.035);
      }
    }
  }
}

TEST_CASE("causal language model errors name the model and the values") {
  nn::CausalLanguageModel model(tiny());
  CHECK_THROWS_WITH_ALL(model.forward(ones({2, 3})), "CausalLanguageModel", "int64", "float32 [2, 3]");
  CHECK_THROWS_WITH_ALL(model.forward(ones({2, 3, 1}, kInt64)), "CausalLanguageModel", "[batch, length]",
                        "[2, 3, 1]");
  CHECK_THROWS_WITH_ALL(model.forward(ones({3}, kInt64)), "CausalLanguageModel", "[3]");
  CHECK_THROWS_WITH_ALL(model.forward(ones({1, 9}, kInt64)), "CausalLanguageModel", "9", "max_len 8");
  CHECK_THROWS_WITH_ALL(model.forward(full({1, 2}, 11, kInt64)), "CausalLanguageModel", "11");
  CHECK_THROWS_WITH_ALL(model.forward(full({1, 2}, -1, kInt64)), "CausalLanguageModel", "-1");
  CHECK_THROWS_WITH_ALL(model.loss(ones({2, 1}, kInt64)), "CausalLanguageModel", "at least 2 tokens");
  CHECK_THROWS_WITH_ALL(model.loss(ones({2, 10}, kInt64)), "CausalLanguageModel", "9", "max_len 8");

  const Tensor prompt = ones({1, 2}, kInt64);
  CHECK_THROWS_WITH_ALL(model.generate(ones({1, 2}), 3), "CausalLanguageModel", "prompt ids", "float32");
  CHECK_THROWS_WITH_ALL(model.generate(ones({1, 1, 2}, kInt64), 3), "CausalLanguageModel", "[1, 1, 2]");
  CHECK_THROWS_WITH_ALL(model.generate(ones({1, 0}, kInt64), 3), "CausalLanguageModel", "empty", "[1, 0]");
  CHECK_THROWS_WITH_ALL(model.generate(prompt, -1), "CausalLanguageModel", "max_new_tokens", "-1");
  CHECK_THROWS_WITH_ALL(model.generate(prompt, 3, {.temperature = -0.5}), "CausalLanguageModel", "temperature",
                        "-0.5");
  CHECK_THROWS_WITH_ALL(model.generate(prompt, 3, {.top_k = 12}), "CausalLanguageModel", "top_k", "11", "12");
  CHECK_THROWS_WITH_ALL(model.generate(prompt, 3, {.top_k = -1}), "CausalLanguageModel", "top_k", "-1");
  CHECK_THROWS_WITH_ALL(model.generate(tensor({1, 11}, {1, 2}, kInt64), 3), "CausalLanguageModel", "[0, 11)",
                        "11");
  CHECK_THROWS_WITH_ALL(model.generate(tensor({-2, 1}, {1, 2}, kInt64), 3), "CausalLanguageModel", "-2");
  CHECK(model.is_training());  // a refused call leaves the mode alone

  nn::CausalLanguageModelOptions bad = tiny();
  bad.vocab_size = 0;
  CHECK_THROWS_WITH_ALL(nn::CausalLanguageModel{bad}, "CausalLanguageModel", "vocab_size (0)");
}
