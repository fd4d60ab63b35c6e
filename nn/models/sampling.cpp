// Greedy decoding and sampling with temperature, top-k and top-p.
#include "nn/models/sampling.h"

#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/factory.h"
#include "core/ops/indexing.h"
#include "core/ops/reduce.h"
#include "core/ops/softmax.h"
#include "core/ops/sort.h"
#include "core/ops/unary.h"
#include "core/ops/views.h"

namespace ember::nn {

namespace {

constexpr double kMinusInfinity = -std::numeric_limits<double>::infinity();

// Each row's logits below its top_k-th largest set to -inf: they can never win the draw.
Tensor keep_top_k(const Tensor& logits, int64_t top_k) {
  const Tensor kth_largest = topk(logits, top_k, -1).values.narrow(-1, top_k - 1, 1);
  return masked_fill(logits, lt(logits, kth_largest), kMinusInfinity);
}

// Each row's logits outside its nucleus set to -inf. The nucleus is the shortest run of most
// likely tokens whose probabilities add up to top_p: a token stays while the probability of the
// tokens ranked above it is below top_p. The cut is found on the host, one row at a time (a
// vocabulary's worth of numbers per row, once per generated token), as a threshold logit.
Tensor keep_top_p(const Tensor& logits, double top_p) {
  const Tensor sorted = sort(logits, -1, /*descending=*/true).values;
  const Tensor probabilities = contiguous(softmax(sorted, -1).to(kFloat64).to(Device::cpu()));
  const Tensor sorted_host = contiguous(sorted.to(kFloat64).to(Device::cpu()));
  const int64_t rows = logits.size(0), vocab = logits.size(1);
  const double* p = probabilities.data_ptr<double>();
  const double* value = sorted_host.data_ptr<double>();
  std::vector<double> thresholds(rows);
  for (int64_t r = 0; r < rows; ++r) {
    double above = 0.0;
    int64_t kept = 0;
    while (kept < vocab && above < top_p) above += p[r * vocab + kept++];
    thresholds[r] = value[r * vocab + kept - 1];
  }
  const Tensor threshold = tensor(thresholds, {rows, 1}).to(logits.dtype()).to(logits.device());
  return masked_fill(logits, lt(logits, threshold), kMinusInfinity);
}

}  // namespace

void check_sampling(const SamplingOptions& sampling, int64_t vocab_size, const std::string& who) {
  EMBER_CHECK(sampling.temperature >= 0.0 && std::isfinite(sampling.temperature),
              "{}: temperature must be finite and >= 0 (0 = greedy), got {}", who, sampling.temperature);
  EMBER_CHECK(sampling.top_k >= 0 && sampling.top_k <= vocab_size,
              "{}: top_k must lie in [0, vocab_size {}] (0 = off), got {}", who, vocab_size, sampling.top_k);
  EMBER_CHECK(sampling.top_p > 0.0 && sampling.top_p <= 1.0, "{}: top_p must lie in (0, 1] (1 = off), got {}", who,
              sampling.top_p);
}

void check_generation_request(const Tensor& prompt, int64_t max_new_tokens, const SamplingOptions& sampling,
                              int64_t vocab_size, const std::string& who) {
  EMBER_CHECK(prompt.defined() && prompt.dtype() == kInt64 && (prompt.dim() == 1 || prompt.dim() == 2),
              "{}: expected prompt ids int64 of shape [batch, length] or [length], got {} {}", who,
              prompt.defined() ? dtype_name(prompt.dtype()) : "undefined",
              prompt.defined() ? shape_str(prompt.sizes()) : "");
  EMBER_CHECK(prompt.numel() > 0, "{}: the prompt is empty ({})", who, shape_str(prompt.sizes()));
  EMBER_CHECK(max_new_tokens >= 0, "{}: max_new_tokens must be >= 0, got {}", who, max_new_tokens);
  check_sampling(sampling, vocab_size, who);
  const int64_t low = min(prompt).item<int64_t>(), high = max(prompt).item<int64_t>();
  EMBER_CHECK(low >= 0 && high < vocab_size, "{}: prompt ids must lie in [0, {}), got ids from {} to {}", who,
              vocab_size, low, high);
}

Tensor sample_next_token(const Tensor& logits, const SamplingOptions& sampling) {
  if (sampling.temperature == 0.0) return argmax(logits, -1);
  Tensor scaled = div(logits, sampling.temperature);
  if (sampling.top_k > 0 && sampling.top_k < logits.size(-1)) scaled = keep_top_k(scaled, sampling.top_k);
  if (sampling.top_p < 1.0) scaled = keep_top_p(scaled, sampling.top_p);
  // The Gumbel-max trick: argmax(logits + g) with g = -log(-log(u)), u uniform, picks token i
  // with probability softmax(logits)[i]. u is kept off 0, where g would be -inf.
  const Tensor u = clamp(rand_like(scaled), std::numeric_limits<float>::min(), std::nullopt);
  return argmax(sub(scaled, log(neg(log(u)))), -1);
}

}  // namespace ember::nn
