// The reference workloads, written the way an ember user writes them. Their PyTorch twins are in
// torch_workloads.py; parameter counts match PyTorch's (5,290,500 and 9,634,624 at the issue's
// sizes), which train_step prints so a reader can check.
#include "side_by_side/workloads.h"

namespace ember::bench {

Tensor Workload::train_step(nn::Optimizer& optimizer, Device device, const std::function<Tensor()>& loss_of) {
  optimizer.zero_grad();
  Tensor loss;
  {
    const AutocastGuard autocast = train::autocast_scope(precision_, device.type);
    loss = loss_of();
  }
  scaler_.scale(loss).backward();
  scaler_.step(optimizer);
  scaler_.update();
  return loss;
}

namespace {

// Token ids drawn uniformly from the vocabulary, away from the ids tokenizers reserve.
Tensor random_ids(int64_t batch, int64_t length, int64_t vocab, Device device) {
  return randint(4, vocab, {batch, length}, TensorOptions(kInt64).device(device));
}

// Token + learned position embeddings, LayerNorm, dropout; 4 pre-LN GELU encoder layers; the
// first token's state, dropout and a 4-way linear head.
class ClassifierWorkload final : public Workload {
 public:
  ClassifierWorkload(const WorkloadSizes& sizes, Device device, train::Precision precision)
      : Workload(precision), device_(device) {
    const int64_t seq_len = sizes.seq_len > 0 ? sizes.seq_len : 128;
    nn::TransformerClassifierOptions options;
    options.vocab_size = sizes.vocab > 0 ? sizes.vocab : 8192;
    options.max_len = seq_len;
    options.num_classes = 4;
    options.num_layers = 4;
    options.layer = {.d_model = sizes.d_model, .num_heads = sizes.heads, .d_ff = 4 * sizes.d_model,
                     .dropout = 0.1, .activation = nn::Activation::GELU, .norm_first = true};
    options.pooling = nn::Pooling::Cls;
    options.embedding_norm = true;
    options.final_norm = false;
    options.padding_idx = std::nullopt;
    model_ = std::make_shared<nn::TransformerClassifier>(options);
    model_->to(device);
    optimizer_ = std::make_unique<nn::AdamW>(model_->parameters(), nn::AdamWOptions{.lr = 1e-4});
    ids_ = random_ids(sizes.batch, seq_len, options.vocab_size, device);
    labels_ = randint(0, 4, {sizes.batch}, TensorOptions(kInt64).device(device));
  }

  Tensor queue_step() override {
    return train_step(*optimizer_, device_, [&] { return nn::cross_entropy(model_->forward(ids_), labels_); });
  }
  nn::Module& model() override { return *model_; }
  int64_t tokens_per_step() const override { return ids_.numel(); }

 private:
  Device device_;
  std::shared_ptr<nn::TransformerClassifier> model_;
  std::unique_ptr<nn::AdamW> optimizer_;
  Tensor ids_, labels_;
};

// One embedding table for source and target, scaled by sqrt(d_model), sinusoidal positions;
// 3 + 3 pre-LN ReLU layers with final LayerNorms; an untied output projection; a causal target
// mask; cross-entropy with label smoothing 0.1. No padding: every sequence is full length.
class EncoderDecoderWorkload final : public Workload {
 public:
  EncoderDecoderWorkload(const WorkloadSizes& sizes, Device device, train::Precision precision)
      : Workload(precision), device_(device) {
    const int64_t seq_len = sizes.seq_len > 0 ? sizes.seq_len : 64;
    const int64_t vocab = sizes.vocab > 0 ? sizes.vocab : 8000;
    nn::TransformerOptions options;
    options.source_vocab_size = vocab;
    options.target_vocab_size = vocab;
    options.share_embeddings = true;
    options.tie_output = false;
    options.max_len = seq_len;
    options.num_encoder_layers = 3;
    options.num_decoder_layers = 3;
    options.layer = {.d_model = sizes.d_model, .num_heads = sizes.heads, .d_ff = 4 * sizes.d_model,
                     .dropout = 0.1, .activation = nn::Activation::ReLU, .norm_first = true};
    options.positions = nn::Positions::Sinusoidal;
    options.scale_embeddings = true;
    options.final_norm = true;
    options.pad_id = -1;
    model_ = std::make_shared<nn::Transformer>(options);
    model_->to(device);
    optimizer_ = std::make_unique<nn::AdamW>(model_->parameters(), nn::AdamWOptions{.lr = 1e-4});
    source_ = random_ids(sizes.batch, seq_len, vocab, device);
    target_in_ = random_ids(sizes.batch, seq_len, vocab, device);
    target_out_ = random_ids(sizes.batch, seq_len, vocab, device).reshape({-1});
  }

  Tensor queue_step() override {
    return train_step(*optimizer_, device_, [&] {
      const Tensor logits = model_->forward(source_, target_in_);
      return nn::cross_entropy(logits.reshape({-1, logits.sizes().back()}), target_out_, {.label_smoothing = 0.1});
    });
  }
  nn::Module& model() override { return *model_; }
  int64_t tokens_per_step() const override { return source_.numel() + target_in_.numel(); }

 private:
  Device device_;
  std::shared_ptr<nn::Transformer> model_;
  std::unique_ptr<nn::AdamW> optimizer_;
  Tensor source_, target_in_, target_out_;
};

// GPT-2's architecture at a size two cores train (nn::GPT2LMHeadModel): learned positions, 4
// pre-LN blocks with tanh GELU, the output layer tied to the 50,257-token embedding, dropout 0.1
// on the embeddings, attention weights and residual branches. One fixed batch of seq_len + 1
// tokens per row: the model reads the first seq_len and predicts the last seq_len, with the
// output layer and the loss run in chunks (GPT2LMHeadModel::loss).
class GptWorkload final : public Workload {
 public:
  GptWorkload(const WorkloadSizes& sizes, Device device, train::Precision precision)
      : Workload(precision), device_(device) {
    nn::GPT2Config config;
    config.n_positions = sizes.seq_len > 0 ? sizes.seq_len : 128;
    config.vocab_size = sizes.vocab > 0 ? sizes.vocab : 50257;
    config.n_embd = sizes.d_model;
    config.n_head = sizes.heads;
    config.n_layer = sizes.layers > 0 ? sizes.layers : 4;
    model_ = std::make_shared<nn::GPT2LMHeadModel>(config);
    model_->to(device);
    optimizer_ = std::make_unique<nn::AdamW>(model_->parameters(), nn::AdamWOptions{.lr = 1e-4});
    const Tensor window = random_ids(sizes.batch, config.n_positions + 1, config.vocab_size, device);
    inputs_ = window.slice(1, std::nullopt, -1).contiguous();
    targets_ = window.slice(1, 1, std::nullopt).contiguous();
  }

  Tensor queue_step() override {
    return train_step(*optimizer_, device_, [&] { return model_->loss(inputs_, targets_); });
  }
  nn::Module& model() override { return *model_; }
  int64_t tokens_per_step() const override { return inputs_.numel(); }

 private:
  Device device_;
  std::shared_ptr<nn::GPT2LMHeadModel> model_;
  std::unique_ptr<nn::AdamW> optimizer_;
  Tensor inputs_, targets_;
};

}  // namespace

std::unique_ptr<Workload> make_workload(const std::string& name, const WorkloadSizes& sizes, Device device,
                                        train::Precision precision) {
  if (name == "classifier") return std::make_unique<ClassifierWorkload>(sizes, device, precision);
  if (name == "encoder-decoder") return std::make_unique<EncoderDecoderWorkload>(sizes, device, precision);
  if (name == "gpt") return std::make_unique<GptWorkload>(sizes, device, precision);
  fail("make_workload: unknown workload '{}' (classifier, encoder-decoder, gpt)", name);
}

}  // namespace ember::bench
