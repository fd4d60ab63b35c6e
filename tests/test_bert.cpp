// nn::Bert* against BERT written out in PyTorch (tests/golden/make_bert_golden.py, float64, dropout
// off): two checkpoint folders as a user downloads them (config.json + model.safetensors), one a
// masked-LM checkpoint with the old LayerNorm names and the tied decoder left out, one a sequence
// classifier. ember loads both unchanged and must give the reference's masked-LM logits, and its
// classification logits, loss and every gradient, to 1e-9. Then the loader's renamings and what it
// reports or refuses, the config reader's errors, the activation by name, the masked-LM loss at
// the batcher's positions and checkpointed layers.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "golden_files.h"
#include "helpers.h"
#include "nn/data/masked_lm.h"
#include "nn/models/bert/bert.h"
#include "scratch_files.h"

using namespace ember;
using namespace ember::testing;

namespace {

constexpr double kTolerance = 1e-9;

const GoldenTensors& golden() {
  static const GoldenTensors tensors("bert_tiny_golden.safetensors");
  return tensors;
}

const Tensor& expected(const std::string& key) { return golden().at(key); }

nn::BertInputs inputs() {
  return {.token_type_ids = expected("token_type_ids"), .attention_mask = expected("attention_mask")};
}

// A model in float64, eval mode, with the checkpoint's weights.
template <class Model>
std::shared_ptr<Model> float64_model(const std::string& folder, const std::vector<std::string>& may_be_missing = {}) {
  auto model = std::make_shared<Model>(nn::BertConfig::from_json_file(golden_path(folder) + "/config.json"));
  model->to(kFloat64);
  nn::load_bert_weights(*model, golden_path(folder), may_be_missing);
  model->eval();
  return model;
}

}  // namespace

TEST_CASE("BertForMaskedLM from a checkpoint with old LayerNorm names and a tied decoder gives the reference's logits") {
  auto model = float64_model<nn::BertForMaskedLM>("bert_tiny_mlm");
  const Tensor logits = model->forward(expected("input_ids"), inputs());
  CHECK(logits.sizes() == expected("mlm_logits").sizes());
  CHECK(max_abs(sub(logits, expected("mlm_logits"))) < kTolerance);
  // The decoder is the word table itself: one tensor, trained once.
  const nn::StateDict state = model->state_dict();
  CHECK(state.at("cls.predictions.decoder.weight").data_ptr<double>() ==
        model->bert->embeddings->word_embeddings->weight.data_ptr<double>());
  int64_t listed = 0;
  for (const Tensor& p : model->parameters()) listed += p.numel();
  CHECK(listed == model->num_parameters());
  CHECK(state.size() > model->parameters().size());  // the tied names appear in state_dict too
}

TEST_CASE("BertForSequenceClassification gives the reference's logits, loss and every gradient") {
  auto model = float64_model<nn::BertForSequenceClassification>("bert_tiny_cls");
  const Tensor logits = model->forward(expected("input_ids"), inputs());
  CHECK(max_abs(sub(logits, expected("cls_logits"))) < kTolerance);
  const Tensor loss = cross_entropy(logits, expected("labels"));
  CHECK(std::abs(loss.item<double>() - expected("cls_loss").item<double>()) < kTolerance);
  loss.backward();
  int checked = 0;
  for (const auto& [name, parameter] : model->named_parameters()) {
    CAPTURE(name);
    REQUIRE(parameter.grad().defined());
    CHECK(max_abs(sub(parameter.grad(), expected("grad." + name))) < kTolerance);
    ++checked;
  }
  CHECK(checked == 41);  // every parameter of the reference has its gradient compared
}

TEST_CASE("a sequence whose attention_mask is all zeros gives finite states and gradients") {
  // Hugging Face's additive mask keeps such a row finite; in ember each of its queries attends to
  // nothing (core/ops/attention.h), so an empty sequence does not turn a batch's loss into NaN.
  auto model = float64_model<nn::BertForMaskedLM>("bert_tiny_mlm");
  const Tensor ids = expected("input_ids");
  Tensor mask = expected("attention_mask").clone();
  mask.narrow(0, 0, 1).zero_();
  const Tensor logits = model->forward(ids, {.attention_mask = mask});
  CHECK(std::isfinite(max_abs(logits)));
  sum(logits).backward();
  for (const auto& [name, parameter] : model->named_parameters()) {
    INFO(name);
    if (parameter.grad().defined()) CHECK(std::isfinite(max_abs(parameter.grad())));
  }
  // The other sequences are untouched by the empty one.
  const Tensor alone = model->forward(ids.narrow(0, 1, 1), {.attention_mask = mask.narrow(0, 1, 1)});
  CHECK(max_abs(sub(logits.narrow(0, 1, 1), alone)) < kTolerance);
}

TEST_CASE("a padded position changes nothing of the real tokens' outputs") {
  auto model = float64_model<nn::BertForMaskedLM>("bert_tiny_mlm");
  const Tensor ids = expected("input_ids").narrow(0, 1, 1);  // 5 real tokens, then 3 of padding
  const Tensor mask = expected("attention_mask").narrow(0, 1, 1);
  const Tensor with_padding = model->forward(ids, {.attention_mask = mask}).narrow(1, 0, 5);
  const Tensor without = model->forward(ids.narrow(1, 0, 5).contiguous());
  CHECK(max_abs(sub(with_padding, without)) < kTolerance);
}

TEST_CASE("load_bert_weights: base and head checkpoints cross, and what is missing or unexpected is reported") {
  // A masked-LM checkpoint into a classifier: pooler and classifier start fresh, the masked-LM head is unused.
  nn::BertForSequenceClassification classifier(nn::BertConfig::from_json_file(golden_path("bert_tiny_mlm/config.json")));
  const nn::BertLoadReport report =
      nn::load_bert_weights(classifier, golden_path("bert_tiny_mlm"), {"bert.pooler.", "classifier."});
  CHECK(report.missing == std::vector<std::string>{"bert.pooler.dense.bias", "bert.pooler.dense.weight", "classifier.bias",
                                                   "classifier.weight"});
  CHECK(std::find(report.unexpected.begin(), report.unexpected.end(), "cls.predictions.transform.dense.weight") !=
        report.unexpected.end());
  CHECK(max_abs(sub(classifier.bert->embeddings->word_embeddings->weight.to(kFloat64),
                    nn::load_safetensors(golden_path("bert_tiny_cls/model.safetensors"))
                        .at("bert.embeddings.word_embeddings.weight"))) < 1e-6);  // float32 model: rounded

  // A classifier's checkpoint into a base model: the "bert." prefix is stripped.
  nn::BertModel base(nn::BertConfig::from_json_file(golden_path("bert_tiny_cls/config.json")));
  const nn::BertLoadReport base_report = nn::load_bert_weights(base, golden_path("bert_tiny_cls"));
  CHECK(base_report.missing.empty());
  CHECK(base_report.unexpected == std::vector<std::string>{"classifier.bias", "classifier.weight"});

  // A masked-LM model from a classifier's checkpoint lacks its head: refused, the keys named.
  nn::BertForMaskedLM masked_lm(nn::BertConfig::from_json_file(golden_path("bert_tiny_cls/config.json")));
  CHECK_THROWS_WITH_AS(nn::load_bert_weights(masked_lm, golden_path("bert_tiny_cls")),
                       doctest::Contains("lacks 6 of BertForMaskedLM's parameters: cls.predictions.bias"), Error);
}

TEST_CASE("load_bert_weights: a checkpoint of other sizes is refused, naming the key and both shapes") {
  nn::BertConfig config = nn::BertConfig::from_json_file(golden_path("bert_tiny_cls/config.json"));
  config.intermediate_size = 20;
  nn::BertForSequenceClassification model(config);
  CHECK_THROWS_WITH_AS(nn::load_bert_weights(model, golden_path("bert_tiny_cls")),
                       doctest::Contains("layer.0.intermediate.dense"), Error);
  CHECK_THROWS_WITH_AS(nn::load_bert_weights(model, golden_path("no_such_model")), doctest::Contains("no_such_model"),
                       Error);
}

TEST_CASE("BertConfig reads Hugging Face's keys, and refuses what it cannot build, naming the key") {
  const nn::BertConfig config = nn::BertConfig::from_json_file(golden_path("bert_tiny_cls/config.json"));
  CHECK(config.hidden_size == 16);
  CHECK(config.num_hidden_layers == 2);
  CHECK(config.num_attention_heads == 4);
  CHECK(config.num_labels == 3);  // the size of id2label
  CHECK(config.layer_norm_eps == 1e-12);
  CHECK(config.hidden_act == "gelu");
  CHECK_FALSE(config.classifier_dropout.has_value());

  ScratchDir scratch("bert_config");
  const auto refused = [&](const std::string& json, const std::string& message) {
    CAPTURE(json);
    CHECK_THROWS_WITH_AS(nn::BertConfig::from_json_file(scratch.write("config.json", json)), doctest::Contains(message.c_str()),
                         Error);
  };
  refused(R"({"hidden_act": "swish"})", "hidden_act 'swish'");
  refused(R"({"hidden_size": 100, "num_attention_heads": 12})", "hidden_size 100 is not a multiple of");
  refused(R"({"position_embedding_type": "relative_key"})", "'position_embedding_type' is 'relative_key'");
  refused(R"({"vocab_size": "big"})", "'vocab_size'");
  refused(R"({"hidden_dropout_prob": 1.5})", "hidden_dropout_prob 1.5 is not a probability");
  // Hugging Face would take -0.5 and fail later; ember names the key.
  refused(R"({"classifier_dropout": -0.5})", "classifier_dropout -0.5 is not a probability");
  // id2label's three labels and num_labels 5 disagree: refused rather than a head of either size.
  refused(R"({"id2label": {"0": "a", "1": "b", "2": "c"}, "num_labels": 5})", "'num_labels' is 5, but id2label names 3");
  refused(R"({"pad_token_id": null})", "'pad_token_id' is null");
  refused("[1, 2]", "not an object");
  refused("{", "not valid JSON");
  CHECK_THROWS_WITH_AS(nn::BertConfig::from_json_file(scratch.file("absent.json")), doctest::Contains("cannot open"),
                       Error);
  const nn::BertConfig nulls = nn::BertConfig::from_json_file(
      scratch.write("config.json", R"({"classifier_dropout": null, "num_labels": 5, "hidden_act": "gelu_new"})"));
  CHECK(nulls.num_labels == 5);
  CHECK_FALSE(nulls.classifier_dropout.has_value());
}

TEST_CASE("BertModel: bad inputs are errors naming the model and the shapes") {
  nn::BertModel model(nn::BertConfig::from_json_file(golden_path("bert_tiny_cls/config.json")));
  CHECK_THROWS_WITH_AS(model.forward(zeros({2, 13}, kInt64)), doctest::Contains("longer than max_position_embeddings 12"),
                       Error);
  CHECK_THROWS_WITH_AS(model.forward(zeros({2, 4})), doctest::Contains("ids must be int64"), Error);
  CHECK_THROWS_WITH_AS(model.forward(zeros({2, 4}, kInt64), {.token_type_ids = zeros({2, 3}, kInt64)}),
                       doctest::Contains("token_type_ids [2, 3] and ids [2, 4]"), Error);
  CHECK_THROWS_WITH_AS(model.forward(zeros({2, 4}, kInt64), {.attention_mask = ones({4})}),
                       doctest::Contains("attention_mask [4] and ids [2, 4]"), Error);
  nn::BertModel no_pooler(nn::BertConfig::from_json_file(golden_path("bert_tiny_cls/config.json")), false);
  CHECK_THROWS_WITH_AS(no_pooler.pool(zeros({1, 2, 16})), doctest::Contains("without its pooling layer"), Error);
}

TEST_CASE("a BertForMaskedLM built from a config trains: the masked-token loss falls on a fixed batch") {
  manual_seed(3);
  nn::BertConfig config;
  config.vocab_size = 30;
  config.hidden_size = 16;
  config.num_hidden_layers = 1;
  config.num_attention_heads = 2;
  config.intermediate_size = 32;
  config.max_position_embeddings = 16;
  nn::BertForMaskedLM model(config);
  const Tensor ids = randint(4, 30, {4, 10});
  Tensor labels = full({4, 10}, static_cast<double>(kIgnoreIndex), kInt64);
  labels.narrow(1, 3, 2).copy_(ids.narrow(1, 3, 2));
  Tensor masked = ids.clone();
  masked.narrow(1, 3, 2).fill_(3.0);  // the [MASK] id of this toy vocabulary
  nn::AdamW optimizer(model.parameters(), {.lr = 5e-3});
  double first = 0, last = 0;
  for (int step = 0; step < 100; ++step) {
    optimizer.zero_grad();
    const Tensor loss = model.loss(masked, labels);
    loss.backward();
    optimizer.step();
    (step == 0 ? first : last) = loss.item<double>();
  }
  CHECK(last < 0.5 * first);
}

TEST_CASE("BertModel::attention_weights: rows of weights over the real tokens, and the same states") {
  auto model = float64_model<nn::BertForSequenceClassification>("bert_tiny_cls");
  nn::BertModel& bert = *model->bert;
  const std::vector<Tensor> weights = bert.attention_weights(expected("input_ids"), inputs());
  REQUIRE(weights.size() == 2);
  for (const Tensor& w : weights) {
    CHECK(w.sizes() == Shape{2, 4, 8, 8});
    CHECK(max_abs(sub(sum(w, {-1}), 1.0)) < 1e-12);
    CHECK(max_abs(w.select(0, 1).narrow(-1, 5, 3)) == 0.0);  // the padded keys of sequence 1
  }
  // The composed form of the layers gives the fused form's logits.
  const Tensor logits = model->forward(expected("input_ids"), inputs());
  CHECK(max_abs(sub(logits, expected("cls_logits"))) < kTolerance);
}

TEST_CASE("BertConfig::to_json_file writes what from_json_file reads back") {
  ScratchDir scratch("bert_config_round_trip");
  nn::BertConfig config;
  config.vocab_size = 123;
  config.hidden_size = 24;
  config.num_attention_heads = 3;
  config.hidden_act = "gelu_new";
  config.layer_norm_eps = 1e-7;
  config.classifier_dropout = 0.25;
  config.num_labels = 4;
  config.to_json_file(scratch.file("config.json"));
  const nn::BertConfig read = nn::BertConfig::from_json_file(scratch.file("config.json"));
  CHECK(read.vocab_size == 123);
  CHECK(read.hidden_size == 24);
  CHECK(read.num_attention_heads == 3);
  CHECK(read.hidden_act == "gelu_new");
  CHECK(read.layer_norm_eps == 1e-7);
  CHECK(read.classifier_dropout == 0.25);
  CHECK(read.num_labels == 4);
  CHECK(read.intermediate_size == config.intermediate_size);
}

TEST_CASE("BertForMaskedLM::loss, the head at the chosen positions only, is the cross-entropy of the full logits") {
  auto model = float64_model<nn::BertForMaskedLM>("bert_tiny_mlm");
  const Tensor ids = expected("input_ids");
  Tensor labels = full(ids.sizes(), static_cast<double>(kIgnoreIndex), kInt64);
  labels.narrow(1, 1, 3).copy_(ids.narrow(1, 1, 3));
  const Tensor full_loss = cross_entropy(model->forward(ids).reshape({-1, 40}), labels.reshape({-1}));
  CHECK(std::abs(model->loss(ids, labels).item<double>() - full_loss.item<double>()) < 1e-12);
  CHECK_THROWS_WITH_AS(model->loss(ids, full(ids.sizes(), static_cast<double>(kIgnoreIndex), kInt64)), doctest::Contains("no position is chosen"),
                       Error);
  CHECK_THROWS_WITH_AS(model->loss(ids, labels.narrow(1, 0, 2)), doctest::Contains("labels must be int64"), Error);
  // From the encoder's states, for a caller that reads them too: the same loss, the same head.
  const Tensor states = model->bert->forward(ids);
  CHECK(std::abs(model->loss_from_states(states, labels).item<double>() - full_loss.item<double>()) < 1e-12);
  CHECK(max_abs(sub(model->predictions(states), model->forward(ids))) == 0.0);
  CHECK_THROWS_WITH_AS(model->loss_from_states(states.narrow(2, 0, 4), labels),
                       doctest::Contains("loss_from_states: states must be [batch, T, 16]"), Error);
  CHECK_THROWS_WITH_AS(model->loss_from_states(states, labels.narrow(1, 0, 2)),
                       doctest::Contains("labels int64 [batch, T]"), Error);
}

TEST_CASE("BertConfig takes only JSON integers for sizes: 1e300, 12.7, 1.5 and 20.0 are refused, naming the key") {
  ScratchDir scratch("bert_config_integers");
  const auto refused = [&](const std::string& json, const std::string& key, const std::string& value) {
    CAPTURE(json);
    const std::string path = scratch.write("config.json", json);
    CHECK_THROWS_WITH_ALL(nn::BertConfig::from_json_file(path), "BertConfig", path.c_str(), key.c_str(),
                          value.c_str());
  };
  // 1e300 as int64_t would be an out-of-range float-to-int cast (undefined behaviour), 12.7 would
  // silently become 12: neither is cast.
  refused(R"({"hidden_size": 1e300})", "'hidden_size'", "1e+300");
  refused(R"({"hidden_size": 1e30})", "'hidden_size'", "1e+30");
  refused(R"({"hidden_size": 12.7})", "'hidden_size'", "12.7");
  refused(R"({"intermediate_size": 8.5})", "'intermediate_size'", "8.5");
  refused(R"({"num_hidden_layers": 1.5})", "'num_hidden_layers'", "1.5");
  // Python's json module reads 20.0 as a float, which Hugging Face's BertConfig keeps and torch's
  // Embedding then refuses as a size: a size written so is refused here, at the key.
  refused(R"({"vocab_size": 20.0})", "'vocab_size'", "20.0");
  refused(R"({"vocab_size": 9223372036854775808})", "'vocab_size'", "within int64");
  refused(R"({"num_labels": "3"})", "'num_labels'", "\"3\"");
  refused(R"({"pad_token_id": [0]})", "'pad_token_id'", "a JSON array");
  refused(R"({"hidden_dropout_prob": "0.1"})", "'hidden_dropout_prob'", "should be a number");
  refused(R"({"hidden_act": 3})", "'hidden_act'", "should be a string");
  refused(R"({"position_embedding_type": 1})", "'position_embedding_type'", "should be a string");
  const nn::BertConfig exact = nn::BertConfig::from_json_file(scratch.write(
      "config.json", R"({"vocab_size": 20, "hidden_size": 8, "num_attention_heads": 2, "pad_token_id": 3})"));
  CHECK(exact.vocab_size == 20);
  CHECK(exact.hidden_size == 8);
  CHECK(exact.pad_token_id == 3);
  const nn::BertConfig labelled = nn::BertConfig::from_json_file(
      scratch.write("config.json", R"({"id2label": {"0": "neg", "1": "pos"}, "num_labels": 2})"));
  CHECK(labelled.num_labels == 2);
}

TEST_CASE("BERT's loader refuses a config.json or model.safetensors that is not a regular file") {
  ScratchDir scratch("bert_not_regular");
  std::filesystem::create_directories(scratch.dir() / "directory/config.json");
  CHECK_THROWS_WITH_ALL(nn::BertConfig::from_json_file(scratch.file("directory/config.json")), "BertConfig",
                        "config.json", "is not a regular file");
  // A FIFO would wait for a writer that never comes: refused before it is opened.
  std::filesystem::create_directories(scratch.dir() / "fifo");
  REQUIRE(::mkfifo(scratch.file("fifo/config.json").c_str(), 0600) == 0);
  CHECK_THROWS_WITH_ALL(nn::BertForMaskedLM::from_pretrained(scratch.file("fifo")), "BertConfig", "config.json",
                        "is not a regular file");
  // A folder whose config.json is fine and whose model.safetensors is a FIFO, then a directory.
  std::filesystem::create_directories(scratch.dir() / "weights");
  std::filesystem::copy_file(golden_path("bert_tiny_mlm/config.json"), scratch.dir() / "weights/config.json");
  REQUIRE(::mkfifo(scratch.file("weights/model.safetensors").c_str(), 0600) == 0);
  CHECK_THROWS_WITH_ALL(nn::BertForMaskedLM::from_pretrained(scratch.file("weights")), "load_bert_weights",
                        "model.safetensors", "is not a regular file");
  std::filesystem::remove(scratch.dir() / "weights/model.safetensors");
  std::filesystem::create_directories(scratch.dir() / "weights/model.safetensors");
  nn::BertModel base(nn::BertConfig::from_json_file(scratch.file("weights/config.json")));
  CHECK_THROWS_WITH_ALL(nn::load_bert_weights(base, scratch.file("weights")), "load_bert_weights",
                        "model.safetensors", "is not a regular file");
}

TEST_CASE("hidden_act names an nn::Activation, parsed once; the config writes back the name it read") {
  CHECK(nn::activation_from_name("relu") == nn::Activation::ReLU);
  CHECK(nn::activation_from_name("gelu") == nn::Activation::GELU);
  CHECK(nn::activation_from_name("gelu_new") == nn::Activation::GELUTanh);
  CHECK(nn::activation_from_name("gelu_pytorch_tanh") == nn::Activation::GELUTanh);
  CHECK_THROWS_WITH_ALL(nn::activation_from_name("swish", "hidden_act"), "hidden_act 'swish'", "gelu_pytorch_tanh");
  CHECK_THROWS_WITH_ALL(nn::activation_from_name("Gelu"), "activation 'Gelu'");
  const Tensor x = tensor<double>({-3.0, -0.5, 0.0, 0.7, 2.5}, {5});
  check_close(nn::activate(nn::Activation::GELUTanh, x), gelu(x, GeluApproximation::Tanh), 0, 0);
  check_close(nn::activate(nn::Activation::GELU, x), gelu(x), 0, 0);

  // The tanh form in the model: the two names of it give one network, the exact form another.
  nn::BertConfig config = nn::BertConfig::from_json_file(golden_path("bert_tiny_mlm/config.json"));
  const auto logits_with = [&](const std::string& name) {
    config.hidden_act = name;
    CHECK(config.activation() == nn::activation_from_name(name));
    auto model = std::make_shared<nn::BertForMaskedLM>(config);
    model->to(kFloat64);
    nn::load_bert_weights(*model, golden_path("bert_tiny_mlm"));
    model->eval();
    return model->forward(expected("input_ids"), inputs());
  };
  const Tensor tanh_new = logits_with("gelu_new"), tanh_pytorch = logits_with("gelu_pytorch_tanh");
  const Tensor exact = logits_with("gelu");
  CHECK(max_abs(sub(tanh_new, tanh_pytorch)) == 0.0);
  CHECK(max_abs(sub(exact, expected("mlm_logits"))) < kTolerance);
  CHECK(max_abs(sub(tanh_new, exact)) > 1e-6);

  ScratchDir scratch("bert_hidden_act");
  config.hidden_act = "gelu_pytorch_tanh";
  config.to_json_file(scratch.file("config.json"));
  std::ifstream written(scratch.file("config.json"));
  std::stringstream text;
  text << written.rdbuf();
  CHECK(text.str().find("\"hidden_act\": \"gelu_pytorch_tanh\"") != std::string::npos);
  CHECK(nn::BertConfig::from_json_file(scratch.file("config.json")).hidden_act == "gelu_pytorch_tanh");
}

TEST_CASE("BertForMaskedLM::loss_from_states at the batcher's positions equals the loss found from the labels") {
  auto model = float64_model<nn::BertForMaskedLM>("bert_tiny_mlm");
  const Tensor ids = expected("input_ids");  // [2, 8]
  const std::vector<int64_t> id_values = ids.to_vector<int64_t>();
  // Two masked rows as the batcher builds them: labels where chosen, kIgnoreIndex elsewhere.
  datasets::MaskedBatch batch;
  for (int64_t row = 0; row < 2; ++row) {
    datasets::MaskedSequence masked{std::vector<int64_t>(id_values.begin() + row * 8, id_values.begin() + row * 8 + 8),
                                    std::vector<int64_t>(8, kIgnoreIndex)};
    for (const int64_t t : {row + 1, 6 - row}) masked.labels[t] = masked.inputs[t];
    batch.append(masked);
  }
  CHECK(batch.rows == 2);
  CHECK(batch.positions == std::vector<int64_t>{1, 6, 10, 13});
  const Tensor labels = tensor(batch.labels, {2, 8});
  const Tensor positions = tensor(batch.positions, {4});
  CHECK(nn::BertForMaskedLM::chosen_positions(labels).to_vector<int64_t>() == batch.positions);

  const Tensor states = model->bert->forward(ids);
  const Tensor full_loss = cross_entropy(model->forward(ids).reshape({-1, 40}), labels.reshape({-1}));
  const Tensor at_positions = model->loss_from_states(states, labels, positions);
  CHECK(std::abs(at_positions.item<double>() - full_loss.item<double>()) < 1e-12);
  CHECK(std::abs(at_positions.item<double>() - model->loss_from_states(states, labels).item<double>()) < 1e-12);
  CHECK(std::abs(at_positions.item<double>() - model->loss(ids, labels).item<double>()) < 1e-12);

  CHECK_THROWS_WITH_ALL(model->loss_from_states(states, labels, positions.to(kFloat64)),
                        "loss_from_states: positions must be int64 [n]", "float64");
  CHECK_THROWS_WITH_ALL(model->loss_from_states(states, labels, Tensor()), "positions must be int64 [n]",
                        "undefined");
  CHECK_THROWS_WITH_ALL(model->loss_from_states(states, labels, positions.view({2, 2})), "positions must be int64 [n]");
  CHECK_THROWS_WITH_ALL(model->loss_from_states(states, labels, zeros({0}, kInt64)), "no position is chosen");
  CHECK_THROWS_WITH_ALL(model->loss_from_states(states, labels.to(kFloat64)), "labels must be int64");
}

TEST_CASE("BertModel::checkpoint_layers: the same loss and every gradient, dropout included, to 1e-12") {
  manual_seed(5);
  nn::BertConfig config;
  config.vocab_size = 30;
  config.hidden_size = 16;
  config.num_hidden_layers = 3;
  config.num_attention_heads = 2;
  config.intermediate_size = 32;
  config.max_position_embeddings = 16;
  nn::BertForMaskedLM model(config);  // dropout 0.1 on the states and the attention
  model.to(kFloat64);
  model.train();
  const Tensor ids = randint(5, 30, {3, 9});
  Tensor labels = full({3, 9}, static_cast<double>(kIgnoreIndex), kInt64);
  labels.narrow(1, 2, 3).copy_(ids.narrow(1, 2, 3));
  const auto run = [&](bool checkpointed) {
    model.bert->checkpoint_layers = checkpointed;
    model.zero_grad();
    manual_seed(11);  // the same dropout masks in both runs
    const Tensor loss = model.loss(ids, labels);
    loss.backward();
    std::vector<Tensor> results{loss.detach()};
    for (const Tensor& p : model.parameters()) results.push_back(p.grad().clone());
    return results;
  };
  const std::vector<Tensor> plain = run(false);
  const std::vector<Tensor> checkpointed = run(true);
  REQUIRE(plain.size() == checkpointed.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    CAPTURE(i);
    check_close(checkpointed[i], plain[i], 1e-12, 0);
  }
  // Each layer is one node that keeps its input; without grad mode the layers simply run.
  model.bert->checkpoint_layers = true;
  const Tensor states = model.bert->forward(ids);
  REQUIRE(states.grad_fn());
  CHECK(states.grad_fn()->name() == "CheckpointBackward");
  NoGradGuard no_grad;
  CHECK_FALSE(model.bert->forward(ids).requires_grad());
}
