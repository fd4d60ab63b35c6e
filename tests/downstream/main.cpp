// The smallest program a downstream project writes: include ember, compute, backpropagate.
#include <ember.h>

#include <iostream>

int main() {
  using namespace ember;
  Tensor w = ones({3}, TensorOptions().requires_grad(true));
  Tensor loss = sum(mul(w, w));
  loss.backward();
  const bool ok = w.grad().to_vector<float>() == std::vector<float>{2, 2, 2};
  std::cout << (ok ? "downstream ok" : "downstream FAILED") << "\n";
  return ok ? 0 : 1;
}
