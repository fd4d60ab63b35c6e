// Positional encodings and the token embedding.
#include "nn/modules/positional.h"

#include <cmath>
#include <vector>

#include "core/ops/elementwise.h"
#include "core/ops/factory.h"
#include "core/ops/views.h"
#include "nn/modules/init.h"

namespace ember::nn {
namespace {

// Checks that x is [batch, seq_len, d_model] with offset + seq_len <= max_len.
void check_positions_input(const std::string& module, const Tensor& x, int64_t offset, int64_t d_model,
                           int64_t max_len) {
  EMBER_CHECK(x.defined(), "{}: input is undefined", module);
  EMBER_CHECK(x.dim() == 3 && x.size(2) == d_model, "{}: expected input [batch, seq_len, {}], got {}", module,
              d_model, shape_str(x.sizes()));
  EMBER_CHECK(offset >= 0, "{}: position offset must not be negative, got {}", module, offset);
  if (offset == 0) {
    EMBER_CHECK(x.size(1) <= max_len, "{}: sequence length {} exceeds max_len {} (input {})", module, x.size(1),
                max_len, shape_str(x.sizes()));
  } else {
    // Compared without a sum that could overflow: the offset may be anything up to INT64_MAX.
    if (x.size(1) <= max_len && offset <= max_len - x.size(1)) return;
    int64_t last = 0;
    const bool last_fits = !__builtin_add_overflow(offset, x.size(1) - 1, &last);
    fail("{}: positions {} to {} (offset {}, sequence length {}) exceed max_len {} (input {})", module, offset,
         last_fits ? std::to_string(last) : "past int64", offset, x.size(1), max_len, shape_str(x.sizes()));
  }
}

}  // namespace

Tensor PositionalModule::forward(const Tensor& x) { return forward(x, 0); }

SinusoidalPositionalEncoding::SinusoidalPositionalEncoding(int64_t d_model, int64_t max_len)
    : PositionalModule("SinusoidalPositionalEncoding"), d_model_(d_model), max_len_(max_len) {
  EMBER_CHECK(d_model > 0 && max_len > 0,
              "SinusoidalPositionalEncoding(d_model={}, max_len={}): sizes must be positive", d_model, max_len);
  // The table is allocated as a tensor first, so a size past int64 or memory is refused with
  // its shape before anything is written. Each value is computed in double, then stored as
  // float32 like every other default tensor.
  Tensor table;
  try {
    table = empty({max_len, d_model}, kFloat32);
  } catch (const Error& error) {
    fail("SinusoidalPositionalEncoding(d_model={}, max_len={}): its table cannot be made: {}", d_model, max_len,
         error.what());
  }
  float* values = table.data_ptr<float>();
  for (int64_t pos = 0; pos < max_len; ++pos) {
    for (int64_t i = 0; i < d_model; i += 2) {
      const double angle = static_cast<double>(pos) / std::pow(10000.0, static_cast<double>(i) / d_model);
      values[pos * d_model + i] = static_cast<float>(std::sin(angle));
      if (i + 1 < d_model) values[pos * d_model + i + 1] = static_cast<float>(std::cos(angle));
    }
  }
  pe = register_buffer("pe", table);
}

Tensor SinusoidalPositionalEncoding::forward(const Tensor& x, int64_t offset) {
  check_positions_input(fmt::format("SinusoidalPositionalEncoding(d_model={}, max_len={})", d_model_, max_len_), x,
                        offset, d_model_, max_len_);
  return add(x, pe.narrow(0, offset, x.size(1)));
}

LearnedPositionalEmbedding::LearnedPositionalEmbedding(int64_t max_len, int64_t d_model)
    : PositionalModule("LearnedPositionalEmbedding"), max_len_(max_len), d_model_(d_model) {
  EMBER_CHECK(d_model > 0 && max_len > 0,
              "LearnedPositionalEmbedding(max_len={}, d_model={}): sizes must be positive", max_len, d_model);
  weight = register_parameter("weight", empty({max_len, d_model}));
  init::normal_(weight);
}

Tensor LearnedPositionalEmbedding::forward(const Tensor& x, int64_t offset) {
  check_positions_input(fmt::format("LearnedPositionalEmbedding(max_len={}, d_model={})", max_len_, d_model_), x,
                        offset, d_model_, max_len_);
  return add(x, weight.narrow(0, offset, x.size(1)));
}

TokenEmbedding::TokenEmbedding(int64_t vocab_size, int64_t d_model, bool scale_by_sqrt_d_model,
                               std::optional<int64_t> padding_idx)
    : UnaryModule("TokenEmbedding"), d_model_(d_model), scale_by_sqrt_d_model_(scale_by_sqrt_d_model) {
  embedding = register_module("embedding", std::make_shared<Embedding>(vocab_size, d_model, padding_idx));
}

Tensor TokenEmbedding::forward(const Tensor& ids) {
  const Tensor vectors = embedding->forward(ids);
  return scale_by_sqrt_d_model_ ? mul(vectors, std::sqrt(static_cast<double>(d_model_))) : vectors;
}

}  // namespace ember::nn
