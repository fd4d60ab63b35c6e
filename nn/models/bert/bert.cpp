// BERT's modules under Hugging Face's names (nn/models/bert/bert.h).
#include "nn/models/bert/bert.h"

#include <cmath>

#include "core/autograd/activation_checkpoint.h"
#include "core/autograd/grad_mode.h"
#include "core/error.h"
#include "core/ops/attention.h"
#include "core/ops/elementwise.h"
#include "core/ops/factory.h"
#include "core/ops/indexing.h"
#include "core/ops/matmul.h"
#include "core/ops/unary.h"
#include "core/ops/views.h"
#include "nn/modules/attention.h"
#include "nn/modules/container.h"
#include "nn/modules/init.h"
#include "nn/modules/losses.h"

namespace ember::nn {

namespace {

// A module that only groups others under a name, so that parameters read as Hugging Face's do
// ("attention.self.query.weight").
class Group : public Module {
 public:
  Group() : Module("Group") {}
  using Module::register_module;
  using Module::register_parameter;
};

// Hugging Face's initialisation: N(0, initializer_range) for products and tables, zero biases,
// LayerNorm at the identity, the padding row zero.
void init_bert_parameters(Module& module, const BertConfig& config) {
  NoGradGuard no_grad;
  for (auto& [name, p] : module.named_parameters()) {
    if (name.ends_with("LayerNorm.weight")) {
      init::ones_(p);
    } else if (name.ends_with("bias")) {
      init::zeros_(p);
    } else {
      init::normal_(p, 0.0, config.initializer_range);
    }
  }
}

}  // namespace

BertEmbeddings::BertEmbeddings(const BertConfig& config) : Module("BertEmbeddings") {
  word_embeddings = register_module("word_embeddings",
                                    std::make_shared<Embedding>(config.vocab_size, config.hidden_size, config.pad_token_id));
  position_embeddings = register_module(
      "position_embeddings", std::make_shared<Embedding>(config.max_position_embeddings, config.hidden_size));
  token_type_embeddings =
      register_module("token_type_embeddings", std::make_shared<Embedding>(config.type_vocab_size, config.hidden_size));
  norm = register_module("LayerNorm", std::make_shared<LayerNorm>(config.hidden_size, config.layer_norm_eps));
  dropout = register_module("dropout", std::make_shared<Dropout>(config.hidden_dropout_prob));
}

Tensor BertEmbeddings::forward(const Tensor& ids, const Tensor& token_type_ids) {
  EMBER_CHECK(ids.dim() == 2 && ids.dtype() == kInt64, "BertModel: ids must be int64 [batch, T], got {} {}",
              ids.dtype(), shape_str(ids.sizes()));
  const int64_t length = ids.size(1);
  EMBER_CHECK(length <= position_embeddings->num_embeddings(),
              "BertModel: a sequence of {} tokens is longer than max_position_embeddings {}", length,
              position_embeddings->num_embeddings());
  Tensor types = token_type_ids;
  if (!types.defined()) types = zeros(ids.sizes(), TensorOptions(kInt64).device(ids.device()));
  EMBER_CHECK(types.sizes() == ids.sizes(), "BertModel: token_type_ids {} and ids {} differ in shape",
              shape_str(types.sizes()), shape_str(ids.sizes()));
  const Tensor positions = arange(static_cast<double>(length), TensorOptions(kInt64).device(ids.device()));
  Tensor x = add(add(word_embeddings->forward(ids), token_type_embeddings->forward(types)),
                 position_embeddings->forward(positions));
  return dropout->forward(norm->forward(x));
}

BertLayer::BertLayer(const BertConfig& config)
    : Module("BertLayer"), config_(config), activation_(config.activation()) {
  const int64_t h = config.hidden_size;
  auto attention = register_module("attention", std::make_shared<Group>());
  auto self = attention->register_module("self", std::make_shared<Group>());
  query_ = self->register_module("query", std::make_shared<Linear>(h, h));
  key_ = self->register_module("key", std::make_shared<Linear>(h, h));
  value_ = self->register_module("value", std::make_shared<Linear>(h, h));
  auto attention_output = attention->register_module("output", std::make_shared<Group>());
  attention_dense_ = attention_output->register_module("dense", std::make_shared<Linear>(h, h));
  attention_norm_ = attention_output->register_module("LayerNorm", std::make_shared<LayerNorm>(h, config.layer_norm_eps));
  attention_dropout_ = attention_output->register_module("dropout", std::make_shared<Dropout>(config.hidden_dropout_prob));
  auto intermediate = register_module("intermediate", std::make_shared<Group>());
  intermediate_dense_ = intermediate->register_module("dense", std::make_shared<Linear>(h, config.intermediate_size));
  auto output = register_module("output", std::make_shared<Group>());
  output_dense_ = output->register_module("dense", std::make_shared<Linear>(config.intermediate_size, h));
  output_norm_ = output->register_module("LayerNorm", std::make_shared<LayerNorm>(h, config.layer_norm_eps));
  output_dropout_ = output->register_module("dropout", std::make_shared<Dropout>(config.hidden_dropout_prob));
}

Tensor BertLayer::forward(const Tensor& h, const Tensor& mask, Tensor* weights) {
  const int64_t heads = config_.num_attention_heads;
  const AttentionOptions options{.attn_mask = mask,
                                 .dropout_p = is_training() ? config_.attention_probs_dropout_prob : 0.0};
  const Tensor merged = attend_heads(split_heads(query_->forward(h), heads), split_heads(key_->forward(h), heads),
                                     split_heads(value_->forward(h), heads), options, weights);
  const Tensor attended = attention_norm_->forward(add(h, attention_dropout_->forward(attention_dense_->forward(merged))));
  const Tensor inner = activate(activation_, intermediate_dense_->forward(attended));
  return output_norm_->forward(add(attended, output_dropout_->forward(output_dense_->forward(inner))));
}

BertModel::BertModel(const BertConfig& config, bool add_pooling_layer) : Module("BertModel"), config_(config) {
  config.check();
  embeddings = register_module("embeddings", std::make_shared<BertEmbeddings>(config));
  auto encoder = register_module("encoder", std::make_shared<Group>());
  auto layer_list = encoder->register_module("layer", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    layers.push_back(std::make_shared<BertLayer>(config));
    layer_list->push_back(layers.back());
  }
  if (add_pooling_layer) {
    auto pooler_group = register_module("pooler", std::make_shared<Group>());
    pooler = pooler_group->register_module("dense", std::make_shared<Linear>(config.hidden_size, config.hidden_size));
  }
  init_bert_parameters(*this, config);
  NoGradGuard no_grad;
  embeddings->word_embeddings->weight.narrow(0, config.pad_token_id, 1).fill_(0.0);  // the padding row
}

namespace {

// [batch, 1, 1, T] bool: every query row may see the real tokens of its sequence; undefined
// without an attention mask.
Tensor padding_mask(const Tensor& ids, const Tensor& attention_mask) {
  if (!attention_mask.defined()) return Tensor();
  EMBER_CHECK(attention_mask.sizes() == ids.sizes(), "BertModel: attention_mask {} and ids {} differ in shape",
              shape_str(attention_mask.sizes()), shape_str(ids.sizes()));
  const Tensor real = attention_mask.dtype() == kBool ? attention_mask : ne(attention_mask, 0.0);
  return real.view({ids.size(0), 1, 1, ids.size(1)});
}

}  // namespace

Tensor BertModel::forward(const Tensor& ids, const BertInputs& inputs) {
  Tensor h = embeddings->forward(ids, inputs.token_type_ids);
  const Tensor mask = padding_mask(ids, inputs.attention_mask);
  for (const auto& layer : layers) {
    if (checkpoint_layers && GradMode::is_enabled()) {
      h = autograd::checkpoint([layer, mask](const std::vector<Tensor>& in) { return layer->forward(in[0], mask); }, {h});
    } else {
      h = layer->forward(h, mask);
    }
  }
  return h;
}

std::vector<Tensor> BertModel::attention_weights(const Tensor& ids, const BertInputs& inputs) {
  std::vector<Tensor> weights(layers.size());
  Tensor h = embeddings->forward(ids, inputs.token_type_ids);
  const Tensor mask = padding_mask(ids, inputs.attention_mask);
  for (size_t i = 0; i < layers.size(); ++i) h = layers[i]->forward(h, mask, &weights[i]);
  return weights;
}

Tensor BertModel::pool(const Tensor& states) {
  EMBER_CHECK(pooler != nullptr, "BertModel::pool: this model was built without its pooling layer");
  return tanh(pooler->forward(states.select(1, 0)));
}

BertForMaskedLM::BertForMaskedLM(const BertConfig& config)
    : Module("BertForMaskedLM"), config_(config), activation_(config.activation()) {
  bert = register_module("bert", std::make_shared<BertModel>(config, /*add_pooling_layer=*/false));
  auto cls = register_module("cls", std::make_shared<Group>());
  auto predictions = cls->register_module("predictions", std::make_shared<Group>());
  auto transform = predictions->register_module("transform", std::make_shared<Group>());
  transform_dense_ = transform->register_module("dense", std::make_shared<Linear>(config.hidden_size, config.hidden_size));
  transform_norm_ =
      transform->register_module("LayerNorm", std::make_shared<LayerNorm>(config.hidden_size, config.layer_norm_eps));
  bias_ = predictions->register_parameter("bias", zeros({config.vocab_size}));
  // The decoder is the word embeddings' table and the bias above, registered again under the
  // decoder's names (the same tensors: they train once and load from either name).
  auto decoder = predictions->register_module("decoder", std::make_shared<Group>());
  decoder->register_parameter("weight", bert->embeddings->word_embeddings->weight);
  decoder->register_parameter("bias", bias_);
  init_bert_parameters(*transform, config);
}

Tensor BertForMaskedLM::predictions(const Tensor& states) {
  const Tensor t = transform_norm_->forward(activate(activation_, transform_dense_->forward(states)));
  return linear(t, bert->embeddings->word_embeddings->weight, bias_);
}

Tensor BertForMaskedLM::forward(const Tensor& ids, const BertInputs& inputs) {
  return predictions(bert->forward(ids, inputs));
}

// The head runs at the chosen positions only: with a vocabulary of 30,522 its product is most of
// a small model's work, and 85% of the positions would be thrown away.
Tensor BertForMaskedLM::loss(const Tensor& ids, const Tensor& labels, const BertInputs& inputs) {
  EMBER_CHECK(labels.sizes() == ids.sizes() && labels.dtype() == kInt64,
              "BertForMaskedLM::loss: labels must be int64 of ids' shape {}, got {} {}", shape_str(ids.sizes()),
              labels.dtype(), shape_str(labels.sizes()));
  return loss_from_states(bert->forward(ids, inputs), labels);
}

Tensor BertForMaskedLM::chosen_positions(const Tensor& labels) {
  const std::vector<int64_t> values = labels.reshape({-1}).to_vector<int64_t>();
  std::vector<int64_t> chosen;
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] != kIgnoreIndex) chosen.push_back(static_cast<int64_t>(i));
  }
  return tensor(chosen, {static_cast<int64_t>(chosen.size())}).to(labels.device());
}

Tensor BertForMaskedLM::loss_from_states(const Tensor& states, const Tensor& labels) {
  EMBER_CHECK(labels.defined() && labels.dtype() == kInt64, "BertForMaskedLM::loss_from_states: labels must be int64 "
              "[batch, T], got {}", labels.defined() ? fmt::format("{} {}", labels.dtype(), shape_str(labels.sizes()))
                                                   : std::string("an undefined tensor"));
  return loss_from_states(states, labels, chosen_positions(labels));
}

Tensor BertForMaskedLM::loss_from_states(const Tensor& states, const Tensor& labels, const Tensor& positions) {
  EMBER_CHECK(states.dim() == 3 && states.size(2) == config_.hidden_size && labels.dtype() == kInt64 &&
                  labels.dim() == 2 && labels.size(0) == states.size(0) && labels.size(1) == states.size(1),
              "BertForMaskedLM::loss_from_states: states must be [batch, T, {}] and labels int64 [batch, T], got "
              "states {} and labels {} {}",
              config_.hidden_size, shape_str(states.sizes()), labels.dtype(), shape_str(labels.sizes()));
  EMBER_CHECK(positions.defined() && positions.dtype() == kInt64 && positions.dim() == 1,
              "BertForMaskedLM::loss_from_states: positions must be int64 [n], got {}",
              positions.defined() ? fmt::format("{} {}", positions.dtype(), shape_str(positions.sizes()))
                                  : std::string("an undefined tensor"));
  EMBER_CHECK(positions.numel() > 0, "BertForMaskedLM::loss: no position is chosen (every label is {})", kIgnoreIndex);
  const Tensor flat_states = states.reshape({-1, config_.hidden_size});
  return ember::cross_entropy(predictions(index_select(flat_states, 0, positions)),
                              index_select(labels.reshape({-1}), 0, positions));
}

std::shared_ptr<BertForMaskedLM> BertForMaskedLM::from_pretrained(const std::string& folder) {
  auto model = std::make_shared<BertForMaskedLM>(BertConfig::from_json_file(folder + "/config.json"));
  load_bert_weights(*model, folder);
  return model;
}

BertForSequenceClassification::BertForSequenceClassification(const BertConfig& config)
    : Module("BertForSequenceClassification") {
  bert = register_module("bert", std::make_shared<BertModel>(config));
  dropout = register_module("dropout", std::make_shared<Dropout>(config.classifier_dropout.value_or(config.hidden_dropout_prob)));
  classifier = register_module("classifier", std::make_shared<Linear>(config.hidden_size, config.num_labels));
  init_bert_parameters(*classifier, config);
}

Tensor BertForSequenceClassification::forward(const Tensor& ids, const BertInputs& inputs) {
  return classifier->forward(dropout->forward(bert->pool(bert->forward(ids, inputs))));
}

std::shared_ptr<BertForSequenceClassification> BertForSequenceClassification::from_pretrained(
    const std::string& folder, std::optional<int64_t> num_labels) {
  BertConfig config = BertConfig::from_json_file(folder + "/config.json");
  if (num_labels) config.num_labels = *num_labels;
  auto model = std::make_shared<BertForSequenceClassification>(config);
  // A masked-LM checkpoint has no pooler and no classifier: both start fresh, as in Hugging Face.
  load_bert_weights(*model, folder, {"bert.pooler.", "classifier."});
  return model;
}

}  // namespace ember::nn
