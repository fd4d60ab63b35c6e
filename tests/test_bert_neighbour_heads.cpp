// nn::init_neighbour_heads: after it, layer 0's head 0 of a fresh BERT puts most of its attention
// on the previous piece and head 1 on the next, for any pieces, where BERT's own initialisation
// spreads every head evenly; what it must leave alone stays as it was; bad sizes are refused.
#include "helpers.h"
#include "nn/models/bert/bert_neighbour_heads.h"

using namespace ember;
using namespace ember::testing;

namespace {

nn::BertConfig small_config() {
  nn::BertConfig config;
  config.vocab_size = 100;
  config.hidden_size = 64;
  config.num_hidden_layers = 2;
  config.num_attention_heads = 4;  // head size 16: 8 position pairs
  config.intermediate_size = 128;
  config.max_position_embeddings = 64;
  return config;
}

Tensor random_ids(int64_t batch, int64_t length, int64_t vocab) {
  return randint(1, vocab, {batch, length}, TensorOptions(kInt64));
}

// The mean weight that `head` of layer 0 puts at offset `offset` from each position that has one.
double mean_weight_at(nn::BertModel& bert, const Tensor& ids, int64_t head, int64_t offset) {
  const Tensor weights = bert.attention_weights(ids)[0].to(kFloat64);  // [batch, heads, T, T]
  const std::vector<double> w = weights.to_vector<double>();
  const int64_t batch = weights.size(0), heads = weights.size(1), length = weights.size(2);
  double sum = 0;
  int64_t count = 0;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < length; ++i) {
      if (i + offset < 0 || i + offset >= length) continue;
      sum += w[((b * heads + head) * length + i) * length + i + offset];
      ++count;
    }
  }
  return sum / static_cast<double>(count);
}

Tensor parameter(const nn::Module& module, const std::string& name) {
  for (const auto& [key, p] : module.named_parameters()) {
    if (key == name) return p;
  }
  FAIL("no parameter " << name);
  return Tensor();
}

}  // namespace

TEST_CASE("init_neighbour_heads: head 0 looks one piece back, head 1 one piece ahead, whatever the pieces") {
  manual_seed(11);
  nn::BertModel bert(small_config());
  bert.eval();
  const Tensor ids = random_ids(3, 60, 100);
  // BERT's own initialisation: every head close to even (1/60 per position).
  CHECK(mean_weight_at(bert, ids, 0, -1) < 0.05);
  CHECK(mean_weight_at(bert, ids, 1, 1) < 0.05);

  nn::init_neighbour_heads(bert);
  CHECK(mean_weight_at(bert, ids, 0, -1) > 0.6);
  CHECK(mean_weight_at(bert, ids, 1, 1) > 0.6);
  // Each looks one way only, not at itself.
  CHECK(mean_weight_at(bert, ids, 0, 1) < 0.05);
  CHECK(mean_weight_at(bert, ids, 0, 0) < 0.05);
  CHECK(mean_weight_at(bert, ids, 1, -1) < 0.05);
  // Heads 2 and 3 keep BERT's even spread.
  CHECK(mean_weight_at(bert, ids, 2, -1) < 0.05);
  CHECK(mean_weight_at(bert, ids, 3, 1) < 0.05);

  // Sharper with a larger sharpness.
  nn::BertModel sharper(small_config());
  sharper.eval();
  nn::init_neighbour_heads(sharper, {.sharpness = 8.0});
  CHECK(mean_weight_at(sharper, ids, 0, -1) > mean_weight_at(bert, ids, 0, -1));
}

TEST_CASE("init_neighbour_heads: the position dimensions are kept for position, the rest is BERT's") {
  manual_seed(12);
  nn::BertModel bert(small_config());
  const Tensor value_before = parameter(bert, "encoder.layer.0.attention.self.value.weight").clone();
  const Tensor layer1_query_before = parameter(bert, "encoder.layer.1.attention.self.query.weight").clone();
  const Tensor query_heads23_before = parameter(bert, "encoder.layer.0.attention.self.query.weight").narrow(0, 32, 32).clone();
  const Tensor words_before = bert.embeddings->word_embeddings->weight.narrow(1, 0, 48).clone();
  nn::init_neighbour_heads(bert);

  // Words and token types: their first 48 dimensions unchanged, the last 16 (one head's) zero.
  check_close(bert.embeddings->word_embeddings->weight.narrow(1, 0, 48), words_before, 0, 0);
  CHECK(max_abs(bert.embeddings->word_embeddings->weight.narrow(1, 48, 16)) == 0.0);
  CHECK(max_abs(bert.embeddings->token_type_embeddings->weight.narrow(1, 48, 16)) == 0.0);
  // Positions: zero in the first 48, sinusoid pairs of root mean square initializer_range after.
  const Tensor position = bert.embeddings->position_embeddings->weight;
  CHECK(max_abs(position.narrow(1, 0, 48)) == 0.0);
  const double rms = std::sqrt(mean(mul(position.narrow(1, 48, 16), position.narrow(1, 48, 16))).item<double>());
  CHECK(rms == doctest::Approx(0.02).epsilon(0.1));
  // Each pair is a point on a circle of radius sqrt(2) * 0.02.
  const std::vector<double> p = position.to(kFloat64).to_vector<double>();
  for (int64_t i : {0, 7, 63}) {
    CHECK(std::hypot(p[i * 64 + 48], p[i * 64 + 49]) == doctest::Approx(std::sqrt(2.0) * 0.02));
  }
  // Untouched: the values, the other heads of layer 0, the later layers.
  check_close(parameter(bert, "encoder.layer.0.attention.self.value.weight"), value_before, 0, 0);
  check_close(parameter(bert, "encoder.layer.0.attention.self.query.weight").narrow(0, 32, 32), query_heads23_before, 0, 0);
  check_close(parameter(bert, "encoder.layer.1.attention.self.query.weight"), layer1_query_before, 0, 0);
}

TEST_CASE("init_neighbour_heads: a masked-LM model keeps its decoder tied, in float64 too") {
  manual_seed(13);
  nn::BertForMaskedLM model(small_config());
  model.to(kFloat64);
  nn::init_neighbour_heads(*model.bert);
  const Tensor decoder = parameter(model, "cls.predictions.decoder.weight");
  CHECK(decoder.dtype() == kFloat64);
  check_close(decoder, model.bert->embeddings->word_embeddings->weight, 0, 0);
  model.eval();
  const Tensor logits = model.forward(random_ids(2, 20, 100));
  CHECK(logits.sizes() == Shape{2, 20, 100});
  CHECK(std::isfinite(sum(logits).item<double>()));
}

TEST_CASE("init_neighbour_heads: sizes it cannot use are refused by name") {
  nn::BertConfig one_head = small_config();
  one_head.num_attention_heads = 1;
  nn::BertModel single(one_head);
  CHECK_THROWS_WITH_AS(nn::init_neighbour_heads(single), doctest::Contains("at least 2 attention heads"), Error);

  nn::BertConfig odd = small_config();
  odd.hidden_size = 6;
  odd.num_attention_heads = 2;  // head size 3
  nn::BertModel odd_heads(odd);
  CHECK_THROWS_WITH_AS(nn::init_neighbour_heads(odd_heads), doctest::Contains("head size (hidden_size 6 / 2 heads = 3)"),
                       Error);

  nn::BertModel bert(small_config());
  CHECK_THROWS_WITH_AS(nn::init_neighbour_heads(bert, {.sharpness = 0.0}), doctest::Contains("sharpness"), Error);
  CHECK_THROWS_WITH_AS(nn::init_neighbour_heads(bert, {.sharpness = std::nan("")}), doctest::Contains("sharpness"),
                       Error);
}
