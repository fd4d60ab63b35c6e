#include "nn/models/bert/bert_neighbour_heads.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>

#include <fmt/format.h>

#include "core/error.h"
#include "core/autograd/grad_mode.h"
#include "core/ops/factory.h"

namespace ember::nn {

namespace {

Tensor parameter(const BertModel& bert, const std::string& name) {
  for (const auto& [key, p] : bert.named_parameters()) {
    if (key == name) return p;
  }
  throw Error(fmt::format("init_neighbour_heads: the model has no parameter {}", name));
}

// A parameter's values on the host, in double, and back.
std::vector<double> host_values(const Tensor& p) { return p.to(kFloat64).cpu().to_vector<double>(); }

void assign(const Tensor& p, const std::vector<double>& values) {
  Tensor(p).copy_(tensor(values, p.sizes(), TensorOptions(p.dtype()).device(p.device())));
}

// Columns [from, to) of a [rows, columns] table set to zero.
void zero_columns(const Tensor& table, int64_t from, int64_t to) {
  std::vector<double> values = host_values(table);
  const int64_t columns = table.size(1);
  for (int64_t row = 0; row < table.size(0); ++row) {
    for (int64_t column = from; column < to; ++column) values[row * columns + column] = 0.0;
  }
  assign(table, values);
}

// splitmix64: a fixed stream of draws, the same on every platform.
double next_uniform(uint64_t& state) {
  state += 0x9E3779B97F4A7C15ull;
  uint64_t z = state;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) / 9007199254740992.0;  // [0, 1)
}

// `pairs` frequencies in (0, pi), one drawn in each band of width pi / pairs. A head whose query
// is the key moved by d positions scores position offset e by the sum of cos(frequency * (e - d)):
// `pairs` at e = d, and elsewhere a sum that evenly spaced frequencies would bring back to `pairs`
// every 2 * pairs positions. Of 64 draws, the one whose largest score at any other offset below
// `length` is smallest.
std::vector<double> position_frequencies(int64_t pairs, int64_t length) {
  uint64_t state = 0;
  std::vector<double> best;
  double best_worst = 0;
  for (int draw = 0; draw < 64; ++draw) {
    std::vector<double> frequency(pairs);
    for (int64_t k = 0; k < pairs; ++k) {
      frequency[k] = std::numbers::pi * (static_cast<double>(k) + next_uniform(state)) / static_cast<double>(pairs);
    }
    double worst = -static_cast<double>(pairs);
    for (int64_t offset = 1; offset < length; ++offset) {
      double score = 0;
      for (const double f : frequency) score += std::cos(f * static_cast<double>(offset));
      worst = std::max(worst, score);
    }
    if (best.empty() || worst < best_worst) {
      best = std::move(frequency);
      best_worst = worst;
    }
  }
  return best;
}

}  // namespace

void init_neighbour_heads(BertModel& bert, const NeighbourHeadsOptions& options) {
  const BertConfig& config = bert.config();
  const int64_t hidden = config.hidden_size, heads = config.num_attention_heads;
  EMBER_CHECK(heads >= 2 && !bert.layers.empty(), "init_neighbour_heads: needs a layer with at least 2 attention "
              "heads, the model has {} layers of {} heads", bert.layers.size(), heads);
  const int64_t head_size = hidden / heads;
  EMBER_CHECK(head_size % 2 == 0, "init_neighbour_heads: the head size (hidden_size {} / {} heads = {}) must be even: "
              "positions are sinusoid pairs", hidden, heads, head_size);
  EMBER_CHECK(std::isfinite(options.sharpness) && options.sharpness > 0,
              "init_neighbour_heads: sharpness must be positive, got {}", options.sharpness);
  NoGradGuard no_grad;

  // The position dimensions: the last head_size of the hidden state.
  const int64_t first = hidden - head_size, pairs = head_size / 2;
  zero_columns(bert.embeddings->word_embeddings->weight, first, hidden);
  zero_columns(bert.embeddings->token_type_embeddings->weight, first, hidden);

  const std::vector<double> frequency = position_frequencies(pairs, bert.embeddings->position_embeddings->num_embeddings());
  // Amplitude sqrt(2) * initializer_range: the same root mean square as the words' dimensions.
  const Tensor& position = bert.embeddings->position_embeddings->weight;
  std::vector<double> table(position.numel(), 0.0);
  const double amplitude = std::sqrt(2.0) * config.initializer_range;
  for (int64_t i = 0; i < position.size(0); ++i) {
    for (int64_t k = 0; k < pairs; ++k) {
      table[i * hidden + first + 2 * k] = amplitude * std::cos(frequency[k] * static_cast<double>(i));
      table[i * hidden + first + 2 * k + 1] = amplitude * std::sin(frequency[k] * static_cast<double>(i));
    }
  }
  assign(position, table);

  // Layer 0, heads 0 and 1 (rows [h * head_size, (h + 1) * head_size) of the query and key
  // weights, [out, in]): the key copies the position pairs, the query rotates each pair by one
  // position's angle, back for head 0 and ahead for head 1. Their biases are left as they are:
  // zero in a fresh BERT, which is what this is for.
  const Tensor query = parameter(bert, "encoder.layer.0.attention.self.query.weight");
  const Tensor key = parameter(bert, "encoder.layer.0.attention.self.key.weight");
  std::vector<double> q = host_values(query), k_values = host_values(key);
  const double scale = std::sqrt(options.sharpness);
  for (int64_t head = 0; head < 2; ++head) {
    const double direction = head == 0 ? 1.0 : -1.0;
    for (int64_t row = head * head_size; row < (head + 1) * head_size; ++row) {
      for (int64_t column = 0; column < hidden; ++column) q[row * hidden + column] = k_values[row * hidden + column] = 0.0;
    }
    for (int64_t k = 0; k < pairs; ++k) {
      const int64_t row = head * head_size + 2 * k, column = first + 2 * k;
      const double c = std::cos(frequency[k]), s = direction * std::sin(frequency[k]);
      // [cos a(i), sin a(i)] -> [cos a(i - 1), sin a(i - 1)] for head 0 (a = frequency * position).
      q[row * hidden + column] = scale * c;
      q[row * hidden + column + 1] = scale * s;
      q[(row + 1) * hidden + column] = -scale * s;
      q[(row + 1) * hidden + column + 1] = scale * c;
      k_values[row * hidden + column] = scale;
      k_values[(row + 1) * hidden + column + 1] = scale;
    }
  }
  assign(query, q);
  assign(key, k_values);
}

}  // namespace ember::nn
