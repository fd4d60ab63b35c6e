// Attention, step by step: the walk through self-attention of "NLP with Transformers",
// chapter 3, in ember. It starts from the words of a sentence and builds, one piece at a
// time, everything up to a whole BERT-sized encoder with a classifier head, printing the
// shape (and a few values) of what each step produces.
//
//   bash scripts/fetch_data.sh bert-vocab
//   ./build/examples/attention_step_by_step                  # "time flies like an arrow"
//   ./build/examples/attention_step_by_step --text "the bark of a palm tree is very rough" --layer 3 --head 7
//   ./build/examples/attention_step_by_step --weights models/bert-base-uncased   # step 14: the trained model
//
// The sizes are bert-base-uncased's: hidden size 768, 12 heads of 64, feed-forward 3072,
// 12 layers, 30,522 word pieces, 512 positions. The weights are random, as in the chapter:
// the point is what each step computes and the shapes it gives, not a trained model. With
// --weights DIR (a bert-base-uncased folder, config.json + model.safetensors, downloaded by you
// from wherever you get models), step 14 runs the chapter's own trained model on the sentence
// (nn::BertModel, nn/models/bert/bert.h) and draws where its tokens look.
#include <ember.h>

#include <algorithm>
#include <cmath>

#include "common/options.h"
#include "common/run_main.h"

using namespace ember;

namespace {

// bert-base-uncased's configuration.
constexpr int64_t kVocabSize = 30522;
constexpr int64_t kHiddenSize = 768;
constexpr int64_t kNumHeads = 12;
constexpr int64_t kIntermediateSize = 3072;
constexpr int64_t kNumLayers = 12;
constexpr int64_t kMaxPositions = 512;
constexpr double kDropout = 0.1;

void heading(const std::string& title) { fmt::print("\n=== {} ===\n", title); }

void show(const std::string& name, const Tensor& t) { fmt::print("{} {}\n", name, shape_str(t.sizes())); }

// The first `count` numbers of the first row of x: enough to see that something changed.
std::string first_values(const Tensor& x, int64_t count = 4) {
  const std::vector<float> values = x.reshape({-1}).narrow(0, 0, count).contiguous().to_vector<float>();
  return fmt::format("[{:.4f}, ...]", fmt::join(values, ", "));
}

// Scaled dot-product attention written out: scores = Q K^T / sqrt(d_k), weights =
// softmax(scores) over the keys, output = weights V.
Tensor scaled_dot_product(const Tensor& query, const Tensor& key, const Tensor& value) {
  const double dim_k = static_cast<double>(key.size(-1));
  const Tensor scores = div(bmm(query, key.transpose(1, 2)), std::sqrt(dim_k));
  return bmm(softmax(scores, -1), value);
}

// One attention head: its own query, key and value projections from the hidden size to
// head_dim, then scaled dot-product attention.
struct AttentionHead : nn::Module {
  std::shared_ptr<nn::Linear> q, k, v;
  AttentionHead(int64_t embed_dim, int64_t head_dim) : nn::Module("AttentionHead") {
    q = register_module("q", std::make_shared<nn::Linear>(embed_dim, head_dim));
    k = register_module("k", std::make_shared<nn::Linear>(embed_dim, head_dim));
    v = register_module("v", std::make_shared<nn::Linear>(embed_dim, head_dim));
  }
  Tensor forward(const Tensor& hidden) { return scaled_dot_product(q->forward(hidden), k->forward(hidden), v->forward(hidden)); }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Self-attention step by step, from word pieces to a BERT-sized encoder and classifier"};
  examples::CommonOptions common{.out_dir = "out/attention_step_by_step"};
  examples::add_common_options(app, common);
  std::string sentence = "time flies like an arrow", weights_dir;
  int64_t layer = 0, head = 8;
  app.add_option("--weights", weights_dir,
                 "a BERT checkpoint folder (config.json + model.safetensors, e.g. bert-base-uncased): step 14 "
                 "runs that trained model on the sentence");
  app.add_option("--text", sentence, "the sentence to follow through the model")->capture_default_str();
  app.add_option("--layer", layer, "the encoder layer whose attention the heatmap draws")
      ->check(examples::between(0, kNumLayers - 1))
      ->capture_default_str();
  app.add_option("--head", head, "the attention head the heatmap draws")
      ->check(examples::between(0, kNumHeads - 1))
      ->capture_default_str();

  return examples::run_main(app, argc, argv, common, [&] {
    const Device device = examples::setup_run(common);
    NoGradGuard no_grad;  // nothing is trained here: no graph to record

    heading("1. Word pieces");
    // BERT's uncased WordPiece: lower-case, split off punctuation, then cut each word into
    // the longest pieces of the 30,522-entry vocabulary.
    const auto tokenizer = text::WordPieceTokenizer::from_bert_vocab_json(
        datasets::data_path(common.data_dir, "bert-vocab", "bert/vocab.json"));
    const std::vector<int64_t> ids_list = tokenizer.encode(sentence);
    EMBER_CHECK(!ids_list.empty(), "--text: \"{}\" has no word pieces to follow", sentence);
    EMBER_CHECK(static_cast<int64_t>(ids_list.size()) <= kMaxPositions,
                "--text: {} word pieces; BERT has {} positions", ids_list.size(), kMaxPositions);
    const std::vector<std::string> tokens = tokenizer.ids_to_tokens(ids_list);
    const int64_t seq_len = static_cast<int64_t>(ids_list.size());
    const Tensor input_ids = tensor(ids_list, {1, seq_len}).to(device);  // a batch of one sentence
    fmt::print("text: \"{}\"\ntokens: {}\n", sentence, fmt::join(tokens, " "));
    fmt::print("input_ids: {}\n", input_ids);

    heading("2. Token embeddings");
    // One learned vector of 768 numbers per vocabulary entry; the ids pick rows.
    nn::Embedding token_embedding(kVocabSize, kHiddenSize);
    token_embedding.to(device);
    const Tensor inputs_embeds = token_embedding.forward(input_ids);
    fmt::print("token_embedding: Embedding({}, {})\n", kVocabSize, kHiddenSize);
    show("inputs_embeds", inputs_embeds);  // [1, 5, 768]: batch, tokens, hidden size

    heading("3. Attention scores");
    // For now queries, keys and values are the embeddings themselves. Each score is the dot
    // product of a query with a key, divided by sqrt(d_k) so the scores do not grow with the
    // vector size (which would push softmax into saturation).
    const Tensor& query = inputs_embeds;
    const Tensor& key = inputs_embeds;
    const Tensor& value = inputs_embeds;
    const double dim_k = static_cast<double>(key.size(-1));
    const Tensor scores = div(bmm(query, key.transpose(1, 2)), std::sqrt(dim_k));
    show("query", query);
    show("key^T", key.transpose(1, 2));
    show("scores", scores);  // [1, 5, 5]: one score per (query token, key token)
    fmt::print("{}\n", scores);

    heading("4. Attention weights");
    // softmax over the keys turns each row of scores into weights that are positive and sum
    // to 1. A token's score with itself (|x|^2 / sqrt(d)) dwarfs the others here, so each
    // token attends almost only to itself: learned projections (step 6) change that.
    const Tensor weights = softmax(scores, -1);
    show("weights", weights);
    fmt::print("{}\n", weights);
    fmt::print("row sums: {}\n", sum(weights, {-1}));

    heading("5. Weighted values");
    // Each token's output is the weighted average of the value vectors.
    const Tensor attn_outputs = bmm(weights, value);
    show("attn_outputs", attn_outputs);  // [1, 5, 768]
    fmt::print("first values: {} (the token's own embedding, since it attends to itself)\n", first_values(attn_outputs));

    heading("6. One attention head");
    // Learned projections give each head its own queries, keys and values of head_dim =
    // 768 / 12 = 64 numbers: what a token looks for, what it offers, what it passes on.
    const int64_t head_dim = kHiddenSize / kNumHeads;
    AttentionHead attention_head(kHiddenSize, head_dim);
    attention_head.to(device);
    const Tensor head_output = attention_head.forward(inputs_embeds);
    fmt::print("head_dim: {} / {} = {}\n", kHiddenSize, kNumHeads, head_dim);
    show("head output", head_output);  // [1, 5, 64]

    heading("7. Multi-head attention");
    // Twelve heads side by side, their outputs concatenated back to 768 and mixed by an
    // output projection. nn::MultiHeadAttention does the twelve heads in one batched product.
    nn::MultiHeadAttention multihead_attn(kHiddenSize, kNumHeads);
    multihead_attn.to(device);
    const auto attention = multihead_attn.forward(inputs_embeds, inputs_embeds, inputs_embeds, {.need_weights = true});
    show("attn_output", attention.output);  // [1, 5, 768]
    show("attention weights (batch, heads, queries, keys)", attention.weights);
    fmt::print("first values: {}\n", first_values(attention.output));

    heading("8. The feed-forward layer");
    // Two linear layers applied to each token on its own: 768 -> 3072, GELU, 3072 -> 768.
    nn::FeedForward feed_forward(kHiddenSize, kIntermediateSize, nn::Activation::GELU, kDropout);
    feed_forward.to(device);
    const Tensor ff_outputs = feed_forward.forward(attention.output);
    show("ff_outputs", ff_outputs);  // [1, 5, 768]

    heading("9. An encoder layer");
    // Attention then feed-forward, each inside a residual connection, with layer
    // normalisation before each (pre-LN, as the chapter's version; BERT itself normalises
    // after, post-LN: norm_first = false).
    const nn::TransformerLayerOptions layer_options{.d_model = kHiddenSize, .num_heads = kNumHeads,
                                                    .d_ff = kIntermediateSize, .dropout = kDropout,
                                                    .activation = nn::Activation::GELU, .norm_first = true};
    nn::TransformerEncoderLayer encoder_layer(layer_options);
    encoder_layer.to(device);
    encoder_layer.eval();
    show("input", inputs_embeds);
    show("output", encoder_layer.forward(inputs_embeds));  // the same shape: layers stack
    fmt::print("parameters in one layer: {}\n", encoder_layer.num_parameters());

    heading("10. Positional embeddings");
    // Attention by itself ignores word order: "arrow flies like an time" would give the same
    // outputs, permuted. A learned vector per position (0 .. 511) is added to each token's
    // embedding, then LayerNorm and dropout, as BERT's embeddings do.
    nn::LearnedPositionalEmbedding position_embedding(kMaxPositions, kHiddenSize);
    nn::LayerNorm embedding_norm(kHiddenSize, 1e-12);
    nn::Dropout embedding_dropout(kDropout);
    position_embedding.to(device);
    embedding_norm.to(device);
    embedding_dropout.eval();
    fmt::print("position ids: {}\n", arange(seq_len, TensorOptions().dtype(kInt64)).unsqueeze(0));
    const Tensor embeddings =
        embedding_dropout.forward(embedding_norm.forward(position_embedding.forward(token_embedding.forward(input_ids))));
    show("embeddings", embeddings);  // [1, 5, 768]

    heading("11. The whole encoder");
    // Twelve encoder layers, one after the other, on the embeddings. (nn::TransformerEncoder
    // builds the stack; final_norm adds the LayerNorm a pre-LN stack needs at its end.)
    nn::TransformerEncoder encoder(layer_options, kNumLayers, /*final_norm=*/true);
    encoder.to(device);
    encoder.eval();
    const Tensor hidden_states = encoder.forward(embeddings);
    show("encoder output", hidden_states);  // [1, 5, 768]
    fmt::print("parameters: embeddings {}, encoder {}\n",
               token_embedding.num_parameters() + position_embedding.num_parameters() + embedding_norm.num_parameters(),
               encoder.num_parameters());

    heading("12. A classifier head");
    // The state of the first token stands for the whole sentence (BERT puts [CLS] there); a
    // dropout and a linear layer map it to one score per class (3 here, as in the chapter).
    const int64_t num_labels = 3;
    nn::Linear classifier(kHiddenSize, num_labels);
    classifier.to(device);
    const Tensor first_token = hidden_states.select(1, 0);
    show("classifier input", first_token);  // [1, 768]
    const Tensor logits = classifier.forward(first_token);
    show("logits", logits);  // [1, 3]
    fmt::print("{}\n", logits);

    heading("13. Where each token looks");
    // The attention weights of one head of one layer, as a heatmap: row i shows how much
    // token i takes from each token. (Random weights: the pattern means nothing yet; train a
    // model, e.g. text_classifier --predict, to see one that does.)
    const std::vector<Tensor> maps = encoder.attention_weights(embeddings);
    const Tensor map = maps[layer].select(0, 0).select(0, head).cpu();  // [5, 5]
    fmt::print("layer {}, head {}:\n{}\n", layer, head, map);
    const std::string heatmap = common.out_path("attention.svg");
    train::write_heatmap_svg(heatmap, map, tokens, tokens,
                             fmt::format("\"{}\": layer {}, head {} (rows: queries, columns: keys)", sentence, layer, head));
    fmt::print("heatmap: {}\n", heatmap);

    if (weights_dir.empty()) {
      fmt::print("\n(step 14 runs a trained BERT when given one: --weights DIR)\n");
      return;
    }
    heading("14. The trained model");
    // The same architecture, post-LN as published, with the weights BERT learned from 3.3
    // billion words: nn::BertModel under Hugging Face's parameter names, so the downloaded
    // files load unchanged.
    const nn::BertConfig config = nn::BertConfig::from_json_file(weights_dir + "/config.json");
    nn::BertModel bert(config, /*add_pooling_layer=*/false);  // the states and attention only
    const nn::BertLoadReport report = nn::load_bert_weights(bert, weights_dir);
    fmt::print("loaded {}: {} layers, hidden size {}, {} heads, {} parameters ({} keys of the file unused)\n",
               weights_dir, config.num_hidden_layers, config.hidden_size, config.num_attention_heads,
               bert.num_parameters(), report.unexpected.size());
    const int64_t largest_id = *std::max_element(ids_list.begin(), ids_list.end());
    EMBER_CHECK(largest_id < config.vocab_size, "--weights: the sentence has word piece id {}, but {} has a "
                "vocabulary of {}: the chapter's model is bert-base-uncased, whose vocabulary the tokenizer uses",
                largest_id, weights_dir, config.vocab_size);
    EMBER_CHECK(layer < config.num_hidden_layers && head < config.num_attention_heads,
                "--layer {} --head {}: {} has {} layers of {} heads", layer, head, weights_dir,
                config.num_hidden_layers, config.num_attention_heads);
    bert.to(device);
    bert.eval();
    const Tensor trained_states = bert.forward(input_ids);
    show("last hidden state", trained_states);
    fmt::print("first values: {}\n", first_values(trained_states));
    const Tensor trained_map = bert.attention_weights(input_ids)[layer].select(0, 0).select(0, head).cpu();
    fmt::print("layer {}, head {} of the trained model:\n{}\n", layer, head, trained_map);
    const std::string trained_heatmap = common.out_path("attention-trained.svg");
    train::write_heatmap_svg(trained_heatmap, trained_map, tokens, tokens,
                             fmt::format("\"{}\": the trained model's layer {}, head {}", sentence, layer, head));
    fmt::print("heatmap: {}\n", trained_heatmap);
  });
}
