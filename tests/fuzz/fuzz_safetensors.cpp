// Fuzzes nn::load_safetensors: the length field, the JSON header (dtypes, shapes, offsets,
// metadata) and the data section of a safetensors file.
#include <map>

#include "fuzz_input.h"
#include "nn/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ember;
  const std::string path = fuzzing::write_input(fuzzing::as_text(data, size), "model.safetensors");
  fuzzing::expect_success_or_error([&] {
    std::map<std::string, std::string> metadata;
    const nn::StateDict tensors = nn::load_safetensors(path, &metadata);
    // Read every element back, so that a tensor whose storage is smaller than its shape says
    // shows up under AddressSanitizer.
    for (const auto& [name, tensor] : tensors) {
      if (tensor.numel() > 0) (void)tensor.to(kFloat64).sum().item<double>();
    }
  });
  return 0;
}
