// nn::Module: registration, dotted names, modes, devices and state dicts.
#include "helpers.h"
#include "nn/modules/module.h"

using namespace ember;
using namespace ember::testing;

namespace {

class Affine : public nn::Module {
 public:
  Affine(int64_t in, int64_t out) : Module("Affine") {
    weight = register_parameter("weight", randn({out, in}));
    bias = register_parameter("bias", zeros({out}));
    register_buffer("calls", zeros({1}, kInt64));
  }
  Tensor forward(const Tensor& x) { return add(matmul(x, weight.t()), bias); }
  Tensor weight, bias;
};

class Stack : public nn::Module {
 public:
  Stack() : Module("Stack") {
    first = register_module("first", std::make_shared<Affine>(3, 4));
    second = register_module("second", std::make_shared<Affine>(4, 2));
  }
  std::shared_ptr<Affine> first, second;
};

}  // namespace

TEST_CASE("named_parameters gives dotted names in registration order") {
  Stack model;
  std::vector<std::string> names;
  for (const auto& [name, p] : model.named_parameters()) names.push_back(name);
  CHECK(names == std::vector<std::string>{"first.weight", "first.bias", "second.weight", "second.bias"});
  CHECK(model.parameters().size() == 4);
  CHECK(model.num_parameters() == 3 * 4 + 4 + 4 * 2 + 2);
  CHECK(model.named_buffers().front().first == "first.calls");
  CHECK(model.children().size() == 2);
  CHECK(model.named_modules().size() == 3);
  for (const Tensor& p : model.parameters()) CHECK(p.requires_grad());
}

TEST_CASE("train and eval reach every submodule") {
  Stack model;
  model.eval();
  CHECK_FALSE(model.is_training());
  CHECK_FALSE(model.first->is_training());
  model.train();
  CHECK(model.second->is_training());
}

TEST_CASE("to(dtype) converts in place, so member handles see it; integer buffers keep their dtype") {
  Stack model;
  model.to(kFloat64);
  CHECK(model.first->weight.dtype() == kFloat64);
  CHECK(model.parameters()[0].dtype() == kFloat64);
  CHECK(model.named_buffers()[0].second.dtype() == kInt64);
  CHECK(model.first->weight.requires_grad());
}

TEST_CASE("a state dict saved and loaded gives identical outputs") {
  Stack source, target;
  const Tensor x = randn({5, 3});
  target.load_state_dict(source.state_dict());
  check_close(target.second->forward(target.first->forward(x)), source.second->forward(source.first->forward(x)), 0, 0);
}

TEST_CASE("load_state_dict names missing, unexpected and mis-shaped keys") {
  Stack model;
  nn::StateDict state = model.state_dict();
  state.erase("first.bias");
  state["extra.weight"] = zeros({1});
  CHECK_THROWS_WITH_ALL(model.load_state_dict(state), "Stack.load_state_dict", "missing keys [first.bias]",
                        "unexpected keys [extra.weight]");
  CHECK_NOTHROW(model.load_state_dict(state, /*strict=*/false));
  nn::StateDict wrong = model.state_dict();
  wrong["second.weight"] = zeros({3, 3});
  CHECK_THROWS_WITH_ALL(model.load_state_dict(wrong), "second.weight", "[3, 3]", "[2, 4]");
}

TEST_CASE("zero_grad drops gradients; registration errors name the module") {
  Stack model;
  sum(model.second->forward(model.first->forward(ones({2, 3})))).backward();
  CHECK(model.first->weight.grad().defined());
  model.zero_grad();
  CHECK_FALSE(model.first->weight.grad().defined());

  class Bad : public nn::Module {
   public:
    Bad() : Module("Bad") {
      register_parameter("w", zeros({1}));
      register_parameter("w", zeros({1}));
    }
  };
  CHECK_THROWS_WITH_ALL(Bad(), "Bad", "'w' is already registered");
}
