// Incremental decoding with cached keys and values: attention, decoder stacks, positions and the
// encoder-decoder Transformer give the values and tokens of full re-decoding.
#include "helpers.h"

using namespace ember;
using namespace ember::testing;

namespace {

constexpr int64_t kPad = 0, kBos = 1, kEos = 2;

nn::TransformerLayerOptions layer_options(bool norm_first) {
  return {.d_model = 16, .num_heads = 4, .d_ff = 24, .dropout = 0.0, .norm_first = norm_first};
}

nn::TransformerOptions model_options(bool norm_first, nn::Positions positions) {
  nn::TransformerOptions options;
  options.source_vocab_size = options.target_vocab_size = 20;
  options.share_embeddings = true;
  options.max_len = 24;
  options.num_encoder_layers = options.num_decoder_layers = 2;
  options.layer = layer_options(norm_first);
  options.positions = positions;
  options.final_norm = norm_first;
  return options;
}

// Random token ids in [3, vocab) with the last `padding[b]` positions of row b set to kPad.
Tensor padded_ids(int64_t vocab, int64_t length, const std::vector<int64_t>& padding) {
  const int64_t batch = static_cast<int64_t>(padding.size());
  std::vector<int64_t> ids = randint(3, vocab, {batch, length}).to_vector<int64_t>();
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = length - padding[b]; i < length; ++i) ids[b * length + i] = kPad;
  }
  return tensor(ids, {batch, length});
}

// A bool [batch, length] mask, true where padding[b] marks the last positions of row b.
Tensor trailing_padding(int64_t length, const std::vector<int64_t>& padding) {
  const int64_t batch = static_cast<int64_t>(padding.size());
  std::vector<int64_t> mask(batch * length);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < length; ++i) mask[b * length + i] = i >= length - padding[b];
  }
  return eq(tensor(mask, {batch, length}), 1.0);
}

}  // namespace

TEST_CASE("cached self-attention step by step equals causal attention over the whole sequence") {
  manual_seed(1);
  nn::MultiHeadAttention attention(16, 4);
  const int64_t batch = 3, length = 6;
  const Tensor x = randn({batch, length, 16});
  // Row 1 has padded keys in the middle, so the mask must follow the cache.
  const Tensor padding =
      eq(tensor(std::vector<int64_t>{0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 1}, {batch, length}), 1.0);
  const Tensor full = attention.forward(x, x, x, {.key_padding_mask = padding, .is_causal = true}).output;

  nn::KVCache cache;
  for (int64_t t = 0; t < length; ++t) {
    CAPTURE(t);
    const Tensor step = x.narrow(1, t, 1);
    const Tensor out = attention
                           .forward_cached(step, step, cache, /*append=*/true,
                                           {.key_padding_mask = padding.narrow(1, 0, t + 1), .is_causal = true})
                           .output;
    CHECK(cache.length() == t + 1);
    CHECK(cache.keys.sizes() == Shape{batch, 4, t + 1, 4});
    check_close(out, full.narrow(1, t, 1), 1e-5, 1e-5);
  }

  // Several new positions at once are causal among themselves and see the whole past.
  nn::KVCache chunked;
  const Tensor head = x.narrow(1, 0, 4), tail = x.narrow(1, 4, 2);
  const nn::MultiHeadAttentionOutput first =
      attention.forward_cached(head, head, chunked, true,
                               {.key_padding_mask = padding.narrow(1, 0, 4), .is_causal = true});
  const nn::MultiHeadAttentionOutput rest =
      attention.forward_cached(tail, tail, chunked, true, {.key_padding_mask = padding, .is_causal = true});
  check_close(first.output, full.narrow(1, 0, 4), 1e-5, 1e-5);
  check_close(rest.output, full.narrow(1, 4, 2), 1e-5, 1e-5);
}

TEST_CASE("cached cross-attention projects the memory once and reuses it") {
  manual_seed(2);
  nn::MultiHeadAttention attention(16, 4);
  const Tensor query = randn({2, 3, 16}), memory = randn({2, 5, 16});
  const Tensor padding = trailing_padding(5, {0, 2});
  const Tensor full = attention.forward(query, memory, memory, {.key_padding_mask = padding}).output;
  nn::KVCache cache;
  for (int64_t t = 0; t < 3; ++t) {
    // After the first step the memory is not needed any more.
    const Tensor key_value = t == 0 ? memory : Tensor();
    const Tensor out =
        attention.forward_cached(query.narrow(1, t, 1), key_value, cache, false, {.key_padding_mask = padding}).output;
    CHECK(cache.length() == 5);
    check_close(out, full.narrow(1, t, 1), 1e-5, 1e-5);
  }
}

TEST_CASE("a KV cache reorders its rows with index_select") {
  manual_seed(3);
  nn::MultiHeadAttention attention(8, 2);
  const Tensor x = randn({3, 2, 8});
  nn::KVCache cache;
  attention.forward_cached(x, x, cache, true, {.is_causal = true});
  const Tensor keys = cache.keys, values = cache.values;
  cache.reorder(tensor(std::vector<int64_t>{2, 2, 0}, {3}));
  check_close(cache.keys.select(0, 0), keys.select(0, 2), 0, 0);
  check_close(cache.keys.select(0, 1), keys.select(0, 2), 0, 0);
  check_close(cache.values.select(0, 2), values.select(0, 0), 0, 0);
  cache.clear();
  CHECK(cache.empty());
}

TEST_CASE("forward_cached errors name the module and the shapes") {
  nn::MultiHeadAttention attention(8, 2);
  nn::KVCache cache;
  CHECK_THROWS_WITH_ALL(attention.forward_cached(ones({2, 1, 8}), ones({2, 2, 8}), cache, true),
                        "MultiHeadAttention(d_model=8, num_heads=2)", "[2, 2, 8]", "1 new positions");
  CHECK_THROWS_WITH_ALL(attention.forward_cached(ones({2, 1, 8}), Tensor(), cache, false), "MultiHeadAttention",
                        "key_value", "undefined");
  CHECK_THROWS_WITH_ALL(attention.forward_cached(ones({2, 1, 8}), ones({2, 4, 8}), cache, false, {.is_causal = true}),
                        "is_causal", "self-attention");
  attention.forward_cached(ones({2, 1, 8}), ones({2, 1, 8}), cache, true);
  CHECK_THROWS_WITH_ALL(attention.forward_cached(ones({3, 1, 8}), ones({3, 1, 8}), cache, true), "[3, 1, 8]",
                        "[2, 2, 1, 4]", "batch size");
}

TEST_CASE("positional modules add the encodings of positions offset onwards") {
  manual_seed(4);
  nn::SinusoidalPositionalEncoding sinusoidal(6, 10);
  nn::LearnedPositionalEmbedding learned(10, 6);
  const Tensor x = randn({2, 3, 6});
  check_close(sinusoidal.forward(x, 4), add(x, sinusoidal.pe.narrow(0, 4, 3)), 0, 0);
  check_close(learned.forward(x, 7), add(x, learned.weight.narrow(0, 7, 3)), 0, 0);
  check_close(learned.forward(x), learned.forward(x, 0), 0, 0);
  nn::UnaryModule& unary = learned;  // the one-argument forward still serves as a UnaryModule
  check_close(unary.forward(x), add(x, learned.weight.narrow(0, 0, 3)), 0, 0);
  CHECK_THROWS_WITH_ALL(sinusoidal.forward(x, 8), "SinusoidalPositionalEncoding(d_model=6, max_len=10)",
                        "positions 8 to 10", "exceed max_len 10");
  CHECK_THROWS_WITH_ALL(learned.forward(x, -1), "LearnedPositionalEmbedding", "offset", "-1");
}

TEST_CASE("decoder forward_step over positions 0..T-1 reproduces the full decoder forward") {
  for (bool norm_first : {false, true}) {
    for (uint64_t seed : {10, 11, 12}) {
      CAPTURE(norm_first);
      CAPTURE(seed);
      manual_seed(seed);
      nn::TransformerDecoder decoder(layer_options(norm_first), 3, /*final_norm=*/norm_first);
      decoder.eval();
      const int64_t batch = 3, target_length = 7, source_length = 5;
      const Tensor x = randn({batch, target_length, 16}), memory = randn({batch, source_length, 16});
      nn::DecoderMasks masks;
      masks.memory_key_padding_mask = trailing_padding(source_length, {0, 2, 4});
      masks.target_key_padding_mask = trailing_padding(target_length, {0, 3, 1});
      const Tensor full = decoder.forward(x, memory, masks);

      nn::DecoderCache cache;
      for (int64_t t = 0; t < target_length; ++t) {
        CAPTURE(t);
        nn::DecoderMasks step_masks = masks;
        step_masks.target_key_padding_mask = masks.target_key_padding_mask.narrow(1, 0, t + 1);
        const Tensor out = decoder.forward_step(x.narrow(1, t, 1), memory, cache, step_masks);
        CHECK(cache.length() == t + 1);
        CHECK(cache.layers.size() == 3);
        check_close(out, full.narrow(1, t, 1), 1e-5, 1e-5);
      }
    }
  }
}

TEST_CASE("a decoder layer's forward_step takes a prefix at once, then single positions") {
  manual_seed(13);
  nn::TransformerDecoderLayer layer(layer_options(true));
  const Tensor x = randn({2, 5, 16}), memory = randn({2, 4, 16});
  const Tensor full = layer.forward(x, memory);
  nn::DecoderLayerCache cache;
  check_close(layer.forward_step(x.narrow(1, 0, 3), memory, cache), full.narrow(1, 0, 3), 1e-5, 1e-5);
  check_close(layer.forward_step(x.narrow(1, 3, 1), Tensor(), cache), full.narrow(1, 3, 1), 1e-5, 1e-5);
  check_close(layer.forward_step(x.narrow(1, 4, 1), Tensor(), cache), full.narrow(1, 4, 1), 1e-5, 1e-5);
}

TEST_CASE("Transformer decode_step gives decode's last-position logits, with padded targets and sources") {
  for (auto positions : {nn::Positions::Sinusoidal, nn::Positions::Learned}) {
    for (bool norm_first : {false, true}) {
      CAPTURE(norm_first);
      manual_seed(norm_first ? 20 : 21);
      nn::Transformer model(model_options(norm_first, positions));
      model.eval();
      NoGradGuard no_grad;
      const Tensor source = padded_ids(20, 6, {0, 3, 1});
      // Targets hold padding ids mid-sequence too: decode masks them, so the cache must as well.
      std::vector<int64_t> target_ids = randint(0, 20, {3, 8}).to_vector<int64_t>();
      for (int64_t b = 0; b < 3; ++b) target_ids[b * 8] = kBos;
      target_ids[1 * 8 + 3] = kPad;
      const Tensor target = tensor(target_ids, {3, 8});
      const Tensor memory = model.encode(source);
      const Tensor full = model.decode(target, memory, source);
      nn::DecoderCache cache;
      for (int64_t t = 0; t < 8; ++t) {
        CAPTURE(t);
        const Tensor tokens = t % 2 == 0 ? target.select(1, t) : target.narrow(1, t, 1);  // [B] or [B, 1]
        const Tensor logits = model.decode_step(tokens, t, memory, source, cache);
        CHECK(logits.sizes() == Shape{3, 20});
        check_close(logits, full.select(1, t), 1e-5, 1e-5);
      }
      CHECK_THROWS_WITH_ALL(model.decode_step(target.select(1, 0), 3, memory, source, cache), "decode_step",
                            "step 3", "8 positions");
    }
  }
}

TEST_CASE("greedy decoding with the cache gives the tokens of full re-decoding") {
  size_t generated = 0;
  for (bool norm_first : {false, true}) {
    for (uint64_t seed : {30, 31, 32}) {
      CAPTURE(norm_first);
      CAPTURE(seed);
      manual_seed(seed);
      nn::Transformer model(model_options(norm_first, seed == 31 ? nn::Positions::Learned : nn::Positions::Sinusoidal));
      const Tensor source = padded_ids(20, 7, {0, 4, 2, 1});
      nn::DecodeOptions options{.bos_id = kBos, .eos_id = kEos, .max_length = 15};
      const auto cached = model.greedy_decode(source, options);
      options.use_cache = false;
      const auto uncached = model.greedy_decode(source, options);
      CHECK(cached == uncached);
      for (const auto& tokens : cached) generated += tokens.size();
    }
  }
  CHECK(generated > 50);  // the comparisons cover many steps
}

TEST_CASE("beam search with the cache gives the tokens of full re-decoding") {
  size_t generated = 0;
  for (bool norm_first : {false, true}) {
    for (uint64_t seed : {40, 41, 42}) {
      for (double length_penalty : {0.0, 1.0}) {
        CAPTURE(norm_first);
        CAPTURE(seed);
        CAPTURE(length_penalty);
        manual_seed(seed);
        nn::Transformer model(model_options(norm_first, nn::Positions::Sinusoidal));
        const Tensor source = padded_ids(20, 6, {0, 3, 1});
        nn::DecodeOptions options{.bos_id = kBos, .eos_id = kEos, .max_length = 12, .beam_size = 3,
                                  .length_penalty = length_penalty};
        const auto cached = model.beam_search(source, options);
        options.use_cache = false;
        CHECK(cached == model.beam_search(source, options));
        for (const auto& tokens : cached) generated += tokens.size();
      }
    }
  }
  CHECK(generated > 50);
}
