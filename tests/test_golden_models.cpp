// Whole models against PyTorch: the golden files in tests/golden (written once by
// tests/golden/make_golden.py from nn.TransformerEncoderLayer and nn.Transformer) hold weights
// under ember's names, inputs, logits, loss and every parameter's gradient; ember loads the
// weights and must give the same numbers in float64. Two files hold a classifier PyTorch saved in
// bfloat16 and float16: ember must round the same way and load them.
#include <map>
#include <string>

#include "helpers.h"

using namespace ember;
using namespace ember::testing;

namespace {

// Both sides compute in float64 with the same formulas; what is left is rounding.
constexpr double kTolerance = 1e-9;

struct Golden {
  std::string name;
  nn::StateDict tensors;
  std::map<std::string, std::string> metadata;

  const Tensor& tensor(const std::string& key) const {
    const auto found = tensors.find(key);
    if (found == tensors.end()) FAIL("golden file " << name << " has no tensor '" << key << "'");
    return found->second;
  }
  const std::string& text(const std::string& key) const {
    const auto found = metadata.find(key);
    if (found == metadata.end()) FAIL("golden file " << name << " has no metadata '" << key << "'");
    return found->second;
  }
  int64_t number(const std::string& key) const { return std::stoll(text(key)); }
};

Golden read_golden(const std::string& name) {
  Golden golden;
  golden.name = name;
  golden.tensors = nn::load_safetensors(std::string(EMBER_SOURCE_DIR) + "/tests/golden/" + name + ".safetensors", &golden.metadata);
  return golden;
}

nn::TransformerLayerOptions layer_options(const Golden& golden) {
  return {.d_model = golden.number("d_model"),
          .num_heads = golden.number("num_heads"),
          .d_ff = golden.number("d_ff"),
          .dropout = 0.0,
          .activation = golden.text("activation") == "gelu" ? nn::Activation::GELU : nn::Activation::ReLU,
          .norm_first = golden.number("norm_first") == 1};
}

// Every parameter of the model comes from the file, and every weight in the file is a parameter:
// a renamed parameter cannot pass by keeping its random initial value. Buffers (the sinusoidal
// positions) stay ember's own.
void load_weights(nn::Module& model, const Golden& golden) {
  nn::StateDict weights;
  for (const auto& [name, parameter] : model.named_parameters()) weights[name] = golden.tensor(name);
  for (const auto& [key, value] : golden.tensors) {
    const bool is_weight = !key.starts_with("input.") && !key.starts_with("output.") && !key.starts_with("grad.") &&
                           !key.starts_with("float32.");
    CHECK_MESSAGE((!is_weight || weights.contains(key)), golden.name << ": '" << key << "' is no parameter of the model");
  }
  model.to(kFloat64);
  model.load_state_dict(weights, /*strict=*/false);
}

// The largest absolute difference; fails naming the tensor when it passes kTolerance.
double compare(const Golden& golden, const std::string& what, const Tensor& actual, const Tensor& expected) {
  REQUIRE_MESSAGE(actual.defined(), golden.name << ": " << what << " is undefined");
  REQUIRE_MESSAGE(actual.sizes() == expected.sizes(), golden.name << ": " << what << " has shape "
                                                                  << shape_str(actual.sizes()) << ", PyTorch's is "
                                                                  << shape_str(expected.sizes()));
  CHECK_MESSAGE(actual.dtype() == kFloat64, golden.name << ": " << what << " is not float64");
  const double error = max_abs(sub(actual.to(kFloat64), expected));
  CHECK_MESSAGE(error <= kTolerance, golden.name << ": " << what << " differs from PyTorch's by " << error);
  return error;
}

// Logits, loss and every parameter's gradient against the file; prints the worst differences.
void compare_all(const Golden& golden, const nn::Module& model, const Tensor& logits, const Tensor& loss) {
  const double logits_error = compare(golden, "logits", logits, golden.tensor("output.logits"));
  const double loss_error = compare(golden, "loss", loss.reshape({1}), golden.tensor("output.loss"));
  double worst_gradient = 0;
  std::string worst_name;
  for (const auto& [name, parameter] : model.named_parameters()) {
    const double error = compare(golden, "gradient of " + name, parameter.grad(), golden.tensor("grad." + name));
    if (error >= worst_gradient) worst_gradient = error, worst_name = name;
  }
  MESSAGE(golden.name << ": largest differences from PyTorch: logits " << logits_error << ", loss " << loss_error
                      << ", gradients " << worst_gradient << " (" << worst_name << ")");
}

nn::TransformerClassifierOptions classifier_options(const Golden& golden) {
  nn::TransformerClassifierOptions options;
  options.vocab_size = golden.number("vocab");
  options.max_len = golden.number("max_len");
  options.num_classes = golden.number("num_classes");
  options.num_layers = golden.number("num_layers");
  options.layer = layer_options(golden);
  options.pooling = golden.text("pooling") == "mean" ? nn::Pooling::Mean : nn::Pooling::Cls;
  options.final_norm = golden.number("final_norm") == 1;
  return options;
}

void check_classifier(const std::string& name) {
  const Golden golden = read_golden(name);
  REQUIRE(golden.text("model") == "classifier");
  nn::TransformerClassifier model(classifier_options(golden));
  load_weights(model, golden);

  const Tensor& ids = golden.tensor("input.ids");
  const Tensor logits = model.forward(ids, eq(ids, 0.0));
  const Tensor loss = nn::cross_entropy(logits, golden.tensor("input.labels"));
  loss.backward();
  compare_all(golden, model, logits, loss);
}

void check_encoder_decoder(const std::string& name) {
  const Golden golden = read_golden(name);
  REQUIRE(golden.text("model") == "encoder_decoder");
  nn::TransformerOptions options;
  options.source_vocab_size = options.target_vocab_size = golden.number("vocab");
  options.max_len = golden.number("max_len");
  options.num_encoder_layers = options.num_decoder_layers = golden.number("num_layers");
  options.layer = layer_options(golden);
  options.pad_id = golden.number("ignore_index");
  nn::Transformer model(options);
  load_weights(model, golden);

  // forward() masks padded source and target tokens itself, and the target causally.
  const Tensor logits = model.forward(golden.tensor("input.source"), golden.tensor("input.target"));
  const Tensor loss =
      nn::cross_entropy(logits, golden.tensor("input.labels"),
                        {.ignore_index = options.pad_id, .label_smoothing = std::stod(golden.text("label_smoothing"))});
  loss.backward();
  compare_all(golden, model, logits, loss);
}

}  // namespace

TEST_CASE("golden: pre-LN classifier (GELU, CLS pooling, final LayerNorm, padding) matches PyTorch") {
  check_classifier("classifier_pre_ln");
}

TEST_CASE("golden: post-LN classifier (ReLU, mean pooling over real tokens, padding) matches PyTorch") {
  check_classifier("classifier_post_ln");
}

TEST_CASE("golden: pre-LN encoder-decoder (ReLU, source padding, causal padded target) matches PyTorch") {
  check_encoder_decoder("encoder_decoder_pre_ln");
}

TEST_CASE("golden: post-LN encoder-decoder (GELU, source padding, causal padded target) matches PyTorch") {
  check_encoder_decoder("encoder_decoder_post_ln");
}

// A classifier PyTorch saved in a 16-bit dtype: every weight PyTorch rounded from float32 is
// the value ember's own rounding gives (bit for bit), and the model built from the file gives
// the logits PyTorch computed from the rounded weights.
void check_16_bit_classifier(const std::string& name, DType dtype) {
  const Golden golden = read_golden(name);
  REQUIRE(golden.text("model") == "classifier");
  nn::TransformerClassifier model(classifier_options(golden));
  for (const auto& [key, parameter] : model.named_parameters()) {
    const Tensor& saved = golden.tensor(key);
    CHECK_MESSAGE(saved.dtype() == dtype, name << ": " << key << " is " << saved.dtype());
    const Tensor rounded_by_ember = golden.tensor("float32." + key).to(dtype);
    CHECK_MESSAGE(max_abs(sub(saved.to(kFloat64), rounded_by_ember.to(kFloat64))) == 0.0,
                  name << ": PyTorch's rounding of " << key << " differs from ember's");
  }
  load_weights(model, golden);
  const Tensor& ids = golden.tensor("input.ids");
  compare(golden, "logits", model.forward(ids, eq(ids, 0.0)), golden.tensor("output.logits"));
}

TEST_CASE("golden: a classifier PyTorch saved in bfloat16 and in float16 loads into ember and matches") {
  check_16_bit_classifier("classifier_pre_ln_bf16", kBFloat16);
  check_16_bit_classifier("classifier_pre_ln_f16", kFloat16);
}

TEST_CASE("golden: a changed weight is caught, by name") {
  // The comparison can fail: one perturbed weight moves the logits past the tolerance.
  const Golden golden = read_golden("classifier_post_ln");
  nn::TransformerClassifier model(classifier_options(golden));
  load_weights(model, golden);
  {
    NoGradGuard no_grad;
    Tensor weight = (*model.encoder->layers)[1]->named_parameters().front().second;
    weight.view({-1}).narrow(0, 0, 1).add_(1e-6);
  }
  const Tensor& ids = golden.tensor("input.ids");
  const Tensor logits = model.forward(ids, eq(ids, 0.0));
  CHECK(max_abs(sub(logits, golden.tensor("output.logits"))) > kTolerance);
}
