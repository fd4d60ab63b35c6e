// The encoder-decoder transformer: sizes, training on a fixed batch, greedy and beam decoding.
#include "helpers.h"

using namespace ember;
using namespace ember::testing;

namespace {

constexpr int64_t kPad = 0, kBos = 1, kEos = 2;

nn::TransformerOptions tiny() {
  nn::TransformerOptions options;
  options.source_vocab_size = options.target_vocab_size = 12;
  options.share_embeddings = true;
  options.max_len = 16;
  options.num_encoder_layers = options.num_decoder_layers = 2;
  options.layer = {.d_model = 16, .num_heads = 2, .d_ff = 32, .dropout = 0.0, .norm_first = true};
  return options;
}

// A copy task: the target is the source. Sequences of different lengths, padded with 0.
struct CopyBatch {
  Tensor source, target_in, target_out;
};
CopyBatch copy_batch() {
  const std::vector<std::vector<int64_t>> sequences = {{3, 4, 5, 6}, {7, 8, 9}, {10, 3, 11, 4}, {5, 5, 9}};
  std::vector<int64_t> source, target_in, target_out;
  for (const auto& s : sequences) {
    for (int64_t i = 0; i < 4; ++i) source.push_back(i < static_cast<int64_t>(s.size()) ? s[i] : kPad);
    target_in.push_back(kBos);
    for (int64_t i = 0; i < 4; ++i) target_in.push_back(i < static_cast<int64_t>(s.size()) ? s[i] : kPad);
    for (int64_t i = 0; i < 5; ++i) {
      const int64_t n = static_cast<int64_t>(s.size());
      target_out.push_back(i < n ? s[i] : (i == n ? kEos : kPad));
    }
  }
  return {tensor(source, {4, 4}), tensor(target_in, {4, 5}), tensor(target_out, {4, 5})};
}

double train_copy(nn::Transformer& model, int max_steps) {
  const CopyBatch batch = copy_batch();
  nn::AdamW optimizer(model.parameters(), {.lr = 3e-3, .weight_decay = 0.0});
  double loss_value = 1e9;
  for (int step = 0; step < max_steps && loss_value >= 0.01; ++step) {
    optimizer.zero_grad();
    const Tensor logits = model.forward(batch.source, batch.target_in);
    const Tensor loss = nn::cross_entropy(logits, batch.target_out, {.ignore_index = kPad});
    loss.backward();
    optimizer.step();
    loss_value = loss.item();
  }
  return loss_value;
}

}  // namespace

TEST_CASE("the benchmark encoder-decoder has PyTorch's parameter count") {
  // Shared embedding (vocabulary 8000) with sinusoidal positions, d_model 256, 4 heads, 3 + 3
  // pre-LN layers with final norms, d_ff 1024, ReLU, untied output projection: 9,634,624 in
  // torch.nn.Transformer form.
  nn::TransformerOptions options;
  options.source_vocab_size = options.target_vocab_size = 8000;
  options.share_embeddings = true;
  options.num_encoder_layers = options.num_decoder_layers = 3;
  options.layer = {.d_model = 256, .num_heads = 4, .d_ff = 1024, .dropout = 0.1, .norm_first = true};
  nn::Transformer model(options);
  CHECK(model.num_parameters() == 9634624);
  // The shared table is in the state dict under both names, once among the parameters.
  const nn::StateDict state = model.state_dict();
  CHECK(state.contains("source_embedding.embedding.weight"));
  CHECK(state.contains("target_embedding.embedding.weight"));
}

TEST_CASE("tying the output projection to the embedding removes its weight and bias") {
  nn::TransformerOptions options = tiny();
  const int64_t untied = nn::Transformer(options).num_parameters();
  options.tie_output = true;
  nn::Transformer tied(options);
  CHECK(tied.num_parameters() == untied - (16 * 12 + 12));
  CHECK(tied.output_projection == nullptr);
}

TEST_CASE("logits have shape [batch, target length, vocabulary]") {
  nn::Transformer model(tiny());
  const CopyBatch batch = copy_batch();
  CHECK(model.forward(batch.source, batch.target_in).sizes() == Shape{4, 5, 12});
}

TEST_CASE("a tiny encoder-decoder overfits a fixed batch, then greedy and beam search copy it") {
  manual_seed(7);
  nn::Transformer model(tiny());
  CHECK(train_copy(model, 400) < 0.01);
  const CopyBatch batch = copy_batch();
  const std::vector<std::vector<int64_t>> expected = {{3, 4, 5, 6}, {7, 8, 9}, {10, 3, 11, 4}, {5, 5, 9}};
  const nn::DecodeOptions options{.bos_id = kBos, .eos_id = kEos, .max_length = 8, .beam_size = 3};
  CHECK(model.greedy_decode(batch.source, options) == expected);
  const auto beam = model.beam_search(batch.source, options);
  for (size_t b = 0; b < beam.size(); ++b) {
    CAPTURE(b);
    CHECK(fmt::format("{}", fmt::join(beam[b], " ")) == fmt::format("{}", fmt::join(expected[b], " ")));
  }
  CHECK(model.is_training());  // decoding restores the mode it found
}

TEST_CASE("beam search with one beam equals greedy search") {
  for (uint64_t seed : {11, 12, 13}) {
    manual_seed(seed);
    nn::Transformer model(tiny());  // untrained: long, varied outputs
    const Tensor source = randint(3, 12, {3, 5});
    for (double length_penalty : {0.0, 1.0}) {
      const nn::DecodeOptions options{.bos_id = kBos, .eos_id = kEos, .max_length = 10, .beam_size = 1,
                                      .length_penalty = length_penalty};
      CHECK(model.beam_search(source, options) == model.greedy_decode(source, options));
    }
  }
}

TEST_CASE("beam search finds a sequence at least as likely as greedy search's") {
  manual_seed(21);
  nn::Transformer model(tiny());
  model.eval();
  const Tensor source = randint(3, 12, {2, 5});
  // Score a decoded sequence (with EOS appended when it ended) by its total log-probability.
  auto log_probability = [&](int64_t b, const std::vector<int64_t>& tokens, int64_t max_length) {
    NoGradGuard no_grad;
    std::vector<int64_t> input{kBos}, output;
    for (int64_t t : tokens) input.push_back(t), output.push_back(t);
    const bool ended = static_cast<int64_t>(tokens.size()) < max_length;
    if (ended) output.push_back(kEos);
    input.resize(output.size());
    const Tensor ids = tensor(input, {1, static_cast<int64_t>(input.size())});
    const Tensor log_probs = log_softmax(model.forward(source.narrow(0, b, 1), ids), -1);
    double total = 0;
    for (size_t i = 0; i < output.size(); ++i) total += log_probs.at<float>(0, i, output[i]);
    return total;
  };
  const nn::DecodeOptions options{.bos_id = kBos, .eos_id = kEos, .max_length = 6, .beam_size = 4,
                                  .length_penalty = 0.0};
  const auto greedy = model.greedy_decode(source, options);
  const auto beam = model.beam_search(source, options);
  for (int64_t b = 0; b < 2; ++b) {
    CHECK(log_probability(b, beam[b], 6) >= log_probability(b, greedy[b], 6) - 1e-4);
  }
}

TEST_CASE("transformer errors name the module and what is wrong") {
  nn::TransformerOptions options = tiny();
  options.share_embeddings = true;
  options.target_vocab_size = 13;
  CHECK_THROWS_WITH_ALL(nn::Transformer(options), "Transformer", "equal vocabularies", "12", "13");
  nn::Transformer model(tiny());
  CHECK_THROWS_WITH_ALL(model.forward(ones({2, 3}), ones({2, 3}, kInt64)), "Transformer", "source ids",
                        "float32 [2, 3]");
  CHECK_THROWS_WITH_ALL(model.beam_search(ones({1, 3}, kInt64), {.max_length = 8, .beam_size = 0}), "beam_size");
  CHECK_THROWS_WITH_ALL(model.greedy_decode(ones({1, 3}, kInt64), {.eos_id = 99, .max_length = 8}), "99", "target vocabulary");
  CHECK_THROWS(model.forward(full({1, 3}, 12, kInt64), ones({1, 3}, kInt64)));  // id outside the vocabulary
}
