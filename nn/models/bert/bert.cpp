// BERT under Hugging Face's names (nn/models/bert/bert.h): the modules, the config.json reader and the
// checkpoint loader with the renamings real checkpoint files need.
#include "nn/models/bert/bert.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "core/autograd/grad_mode.h"
#include "core/error.h"
#include "core/ops/attention.h"
#include "core/ops/elementwise.h"
#include "core/ops/factory.h"
#include "core/ops/indexing.h"
#include "core/ops/matmul.h"
#include "core/ops/unary.h"
#include "core/ops/views.h"
#include "nn/modules/container.h"
#include "nn/modules/init.h"
#include "nn/modules/losses.h"
#include "nn/io/safetensors.h"
#include "nn/train/run_files.h"

namespace ember::nn {

// --- config.json --------------------------------------------------------------------------------

namespace {

using nlohmann::json;

template <class T>
void read_key(const json& config, const std::string& path, const char* key, T& into) {
  const auto found = config.find(key);
  if (found == config.end() || found->is_null()) return;
  try {
    into = found->get<T>();
  } catch (const json::exception&) {
    fail("BertConfig: '{}' in {} is {}, not a {}", key, path, found->dump(),
         std::is_same_v<T, std::string> ? "string" : "number");
  }
}

}  // namespace

BertConfig BertConfig::from_json_file(const std::string& path) {
  std::ifstream file(path);
  EMBER_CHECK(file.good(), "BertConfig: cannot open {} (a checkpoint folder holds config.json beside "
              "model.safetensors)", path);
  json config;
  try {
    config = json::parse(file);
  } catch (const json::exception& error) {
    fail("BertConfig: {} is not valid JSON: {}", path, error.what());
  }
  EMBER_CHECK(config.is_object(), "BertConfig: {} holds {}, not a JSON object", path, config.type_name());
  BertConfig c;
  read_key(config, path, "vocab_size", c.vocab_size);
  read_key(config, path, "hidden_size", c.hidden_size);
  read_key(config, path, "num_hidden_layers", c.num_hidden_layers);
  read_key(config, path, "num_attention_heads", c.num_attention_heads);
  read_key(config, path, "intermediate_size", c.intermediate_size);
  read_key(config, path, "hidden_act", c.hidden_act);
  read_key(config, path, "hidden_dropout_prob", c.hidden_dropout_prob);
  read_key(config, path, "attention_probs_dropout_prob", c.attention_probs_dropout_prob);
  read_key(config, path, "max_position_embeddings", c.max_position_embeddings);
  read_key(config, path, "type_vocab_size", c.type_vocab_size);
  read_key(config, path, "layer_norm_eps", c.layer_norm_eps);
  read_key(config, path, "pad_token_id", c.pad_token_id);
  read_key(config, path, "initializer_range", c.initializer_range);
  double classifier_dropout = -1;
  read_key(config, path, "classifier_dropout", classifier_dropout);
  if (classifier_dropout >= 0) c.classifier_dropout = classifier_dropout;
  if (const auto labels = config.find("id2label"); labels != config.end() && labels->is_object()) {
    c.num_labels = static_cast<int64_t>(labels->size());
  }
  read_key(config, path, "num_labels", c.num_labels);
  std::string position_type = "absolute";
  read_key(config, path, "position_embedding_type", position_type);
  EMBER_CHECK(position_type == "absolute", "BertConfig: position_embedding_type '{}' in {} is not supported (only "
              "\"absolute\")", position_type, path);
  try {
    c.check();
  } catch (const Error& error) {
    fail("{} (in {})", error.what(), path);
  }
  return c;
}

void BertConfig::to_json_file(const std::string& path) const {
  json config = {{"architectures", {"BertForMaskedLM"}},
                 {"model_type", "bert"},
                 {"vocab_size", vocab_size},
                 {"hidden_size", hidden_size},
                 {"num_hidden_layers", num_hidden_layers},
                 {"num_attention_heads", num_attention_heads},
                 {"intermediate_size", intermediate_size},
                 {"hidden_act", hidden_act},
                 {"hidden_dropout_prob", hidden_dropout_prob},
                 {"attention_probs_dropout_prob", attention_probs_dropout_prob},
                 {"max_position_embeddings", max_position_embeddings},
                 {"type_vocab_size", type_vocab_size},
                 {"layer_norm_eps", layer_norm_eps},
                 {"pad_token_id", pad_token_id},
                 {"initializer_range", initializer_range},
                 {"position_embedding_type", "absolute"},
                 {"num_labels", num_labels}};
  config["classifier_dropout"] = classifier_dropout ? json(*classifier_dropout) : json(nullptr);
  train::write_file_atomically(path, config.dump(2) + "\n");
}

void BertConfig::check() const {
  EMBER_CHECK(vocab_size > 0 && hidden_size > 0 && num_hidden_layers >= 0 && num_attention_heads > 0 &&
                  intermediate_size > 0 && max_position_embeddings > 0 && type_vocab_size > 0 && num_labels > 0,
              "BertConfig: sizes must be positive (vocab_size {}, hidden_size {}, num_hidden_layers {}, "
              "num_attention_heads {}, intermediate_size {}, max_position_embeddings {}, type_vocab_size {}, "
              "num_labels {})", vocab_size, hidden_size, num_hidden_layers, num_attention_heads, intermediate_size,
              max_position_embeddings, type_vocab_size, num_labels);
  EMBER_CHECK(hidden_size % num_attention_heads == 0,
              "BertConfig: hidden_size {} is not a multiple of num_attention_heads {}", hidden_size,
              num_attention_heads);
  EMBER_CHECK(hidden_act == "gelu" || hidden_act == "gelu_new" || hidden_act == "gelu_pytorch_tanh" ||
                  hidden_act == "relu",
              "BertConfig: hidden_act '{}' is not one of gelu, gelu_new, gelu_pytorch_tanh, relu", hidden_act);
  EMBER_CHECK(pad_token_id >= 0 && pad_token_id < vocab_size, "BertConfig: pad_token_id {} is not in [0, vocab_size {})",
              pad_token_id, vocab_size);
  for (const double p : {hidden_dropout_prob, attention_probs_dropout_prob, classifier_dropout.value_or(0.0)}) {
    EMBER_CHECK(p >= 0 && p < 1, "BertConfig: a dropout probability of {} is not in [0, 1)", p);
  }
  EMBER_CHECK(layer_norm_eps > 0, "BertConfig: layer_norm_eps {} must be positive", layer_norm_eps);
}

// --- the modules ----------------------------------------------------------------------------------

namespace {

// A module that only groups others under a name, so that parameters read as Hugging Face's do
// ("attention.self.query.weight").
class Group : public Module {
 public:
  Group() : Module("Group") {}
  using Module::register_module;
  using Module::register_parameter;
};

Tensor activate(const std::string& name, const Tensor& x) {
  if (name == "relu") return relu(x);
  if (name == "gelu") return gelu(x);
  return gelu(x, GeluApproximation::Tanh);  // gelu_new, gelu_pytorch_tanh
}

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

BertLayer::BertLayer(const BertConfig& config) : Module("BertLayer"), config_(config) {
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
  const int64_t batch = h.size(0), length = h.size(1), heads = config_.num_attention_heads;
  const int64_t head_dim = config_.hidden_size / heads;
  auto split_heads = [&](const Tensor& x) { return x.view({batch, length, heads, head_dim}).transpose(1, 2); };
  const Tensor q = split_heads(query_->forward(h)), k = split_heads(key_->forward(h)), v = split_heads(value_->forward(h));
  const AttentionOptions options{.attn_mask = mask,
                                 .dropout_p = is_training() ? config_.attention_probs_dropout_prob : 0.0};
  Tensor context;
  if (weights != nullptr) {
    AttentionResult result = scaled_dot_product_attention_with_weights(q, k, v, options);
    context = result.output;
    *weights = result.weights;
  } else {
    context = scaled_dot_product_attention(q, k, v, options);
  }
  const Tensor merged = context.transpose(1, 2).reshape({batch, length, config_.hidden_size});
  const Tensor attended = attention_norm_->forward(add(h, attention_dropout_->forward(attention_dense_->forward(merged))));
  const Tensor inner = activate(config_.hidden_act, intermediate_dense_->forward(attended));
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
  for (const auto& layer : layers) h = layer->forward(h, mask);
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

BertForMaskedLM::BertForMaskedLM(const BertConfig& config) : Module("BertForMaskedLM"), config_(config) {
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
  const Tensor t = transform_norm_->forward(activate(config_.hidden_act, transform_dense_->forward(states)));
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

Tensor BertForMaskedLM::loss_from_states(const Tensor& states, const Tensor& labels) {
  EMBER_CHECK(states.dim() == 3 && states.size(2) == config_.hidden_size && labels.dtype() == kInt64 &&
                  labels.dim() == 2 && labels.size(0) == states.size(0) && labels.size(1) == states.size(1),
              "BertForMaskedLM::loss_from_states: states must be [batch, T, {}] and labels int64 [batch, T], got "
              "states {} and labels {} {}",
              config_.hidden_size, shape_str(states.sizes()), labels.dtype(), shape_str(labels.sizes()));
  const Tensor flat_labels = labels.reshape({-1});
  std::vector<int64_t> chosen;
  const std::vector<int64_t> values = flat_labels.to_vector<int64_t>();
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] != -100) chosen.push_back(static_cast<int64_t>(i));
  }
  EMBER_CHECK(!chosen.empty(), "BertForMaskedLM::loss: no position is chosen (every label is -100)");
  const Tensor positions = tensor(chosen, {static_cast<int64_t>(chosen.size())}).to(states.device());
  const Tensor flat_states = states.reshape({-1, config_.hidden_size});
  return ember::cross_entropy(predictions(index_select(flat_states, 0, positions)), index_select(flat_labels, 0, positions));
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

// --- loading a checkpoint -------------------------------------------------------------------------

namespace {

bool has_prefix(const StateDict& keys, const std::string& prefix) {
  return std::any_of(keys.begin(), keys.end(), [&](const auto& entry) { return entry.first.starts_with(prefix); });
}

// The file's keys under the module's names.
StateDict renamed_for(const StateDict& module_keys, StateDict file) {
  StateDict renamed;
  for (auto& [key, value] : file) {
    std::string name = key;
    // Checkpoints converted from the original TensorFlow release name LayerNorm's parameters so.
    if (name.ends_with(".gamma")) name = name.substr(0, name.size() - 6) + ".weight";
    if (name.ends_with(".beta")) name = name.substr(0, name.size() - 5) + ".bias";
    renamed[name] = value;
  }
  const bool module_prefixed = has_prefix(module_keys, "bert."), file_prefixed = has_prefix(renamed, "bert.");
  if (module_prefixed && !file_prefixed) {  // a base model's file into a model with a head
    StateDict prefixed;
    for (auto& [key, value] : renamed) prefixed["bert." + key] = value;
    renamed = std::move(prefixed);
  } else if (!module_prefixed && file_prefixed) {  // a model with a head's file into a base model
    StateDict stripped;
    for (auto& [key, value] : renamed) stripped[key.starts_with("bert.") ? key.substr(5) : key] = value;
    renamed = std::move(stripped);
  }
  // The tied decoder is saved once, under the embeddings' and the predictions' names.
  const auto tie = [&](const std::string& name, const std::string& source) {
    if (module_keys.contains(name) && !renamed.contains(name) && renamed.contains(source)) renamed[name] = renamed[source];
  };
  tie("cls.predictions.decoder.weight", "bert.embeddings.word_embeddings.weight");
  tie("cls.predictions.decoder.bias", "cls.predictions.bias");
  return renamed;
}

}  // namespace

BertLoadReport load_bert_weights(Module& model, const std::string& folder,
                                 const std::vector<std::string>& may_be_missing) {
  const std::string path = folder + "/model.safetensors";
  const StateDict module_keys = model.state_dict();
  const StateDict file = renamed_for(module_keys, load_safetensors(path));
  BertLoadReport report;
  StateDict present;
  std::vector<std::string> refused;
  for (const auto& entry : module_keys) {
    const std::string& key = entry.first;  // not a structured binding: clang cannot capture one under OpenMP
    const auto found = file.find(key);
    if (found != file.end()) {
      present[key] = found->second;
      continue;
    }
    report.missing.push_back(key);
    const bool allowed = std::any_of(may_be_missing.begin(), may_be_missing.end(),
                                     [&](const std::string& prefix) { return key.starts_with(prefix); });
    if (!allowed) refused.push_back(key);
  }
  for (const auto& [key, value] : file) {
    if (!module_keys.contains(key)) report.unexpected.push_back(key);
  }
  EMBER_CHECK(refused.empty(), "load_bert_weights: {} lacks {} of {}'s parameters: {}", path, refused.size(),
              model.type_name(), fmt::join(refused, ", "));
  try {
    model.load_state_dict(present, /*strict=*/false);
  } catch (const Error& error) {
    fail("load_bert_weights: {}: {}", path, error.what());
  }
  return report;
}

}  // namespace ember::nn
