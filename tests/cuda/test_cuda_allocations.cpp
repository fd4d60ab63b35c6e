// A warm training step asks the CUDA driver for no memory (the caching allocator hands freed
// blocks back out) and never makes the host wait for the GPU before its loss is read. This binary counts the runtime's allocation calls by interposing them:
// libember calls cudaMalloc and friends through the shared CUDA runtime, and the dynamic linker
// binds those calls to the definitions below, which count and forward to the real ones. It needs
// no statistics API from the allocator, only that it allocates through these entry points; the
// cold steps prove the counter sees them (a test that saw nothing there would prove nothing).
#include <dlfcn.h>

#include <atomic>
#include <cstddef>

#include "parity.h"

namespace {

std::atomic<int64_t> device_allocations{0}, device_frees{0};

template <class Fn>
Fn real(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

}  // namespace

// The CUDA runtime's signatures, with cudaError_t (an int-sized enum) as int and cudaStream_t
// as void*: this file includes no CUDA header.
extern "C" int cudaMalloc(void** pointer, size_t size) {
  static const auto forward = real<int (*)(void**, size_t)>("cudaMalloc");
  ++device_allocations;
  return forward(pointer, size);
}
extern "C" int cudaMallocAsync(void** pointer, size_t size, void* stream) {
  static const auto forward = real<int (*)(void**, size_t, void*)>("cudaMallocAsync");
  ++device_allocations;
  return forward(pointer, size, stream);
}
extern "C" int cudaFree(void* pointer) {
  static const auto forward = real<int (*)(void*)>("cudaFree");
  ++device_frees;
  return forward(pointer);
}
extern "C" int cudaFreeAsync(void* pointer, void* stream) {
  static const auto forward = real<int (*)(void*, void*)>("cudaFreeAsync");
  ++device_frees;
  return forward(pointer, stream);
}

namespace ember::testing::cuda {
namespace {

TEST_CASE("a warm training step of an encoder-decoder Transformer makes no cudaMalloc, no cudaFree and no host wait") {
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  manual_seed(seed);
  auto model = std::make_shared<nn::Transformer>(nn::TransformerOptions{
      .source_vocab_size = 40,
      .target_vocab_size = 40,
      .max_len = 16,
      .num_encoder_layers = 2,
      .num_decoder_layers = 2,
      .layer = {.d_model = 32, .num_heads = 4, .d_ff = 64, .dropout = 0.1}});
  model->to(kGPU);
  nn::AdamW optimizer(nn::weight_decay_groups(*model, 0.01), {.lr = 1e-3});
  // The batch goes to the GPU once, as a data loader would have put it there: the step itself
  // must then run without the host waiting for the GPU until the loss is read.
  const Tensor target = randint(3, 40, {4, 9});
  const Tensor source = randint(3, 40, {4, 8}).to(kGPU), input = target.narrow(1, 0, 8).to(kGPU),
               labels = target.narrow(1, 1, 8).contiguous().to(kGPU);
  auto step = [&] {
    optimizer.zero_grad();
    const Tensor logits = model->forward(source, input);
    const Tensor loss = cross_entropy(logits.reshape({-1, 40}), labels.reshape({-1}), {.label_smoothing = 0.1});
    loss.backward();
    nn::clip_grad_norm_(model->parameters(), 1.0);
    optimizer.step();
    return loss;
  };
  const int64_t before = device_allocations.load();
  step().item<double>();  // cold: the allocator, cuBLAS and the optimizer's moments allocate
  step().item<double>();
  const int64_t cold = device_allocations.load() - before;
  if (cold == 0) {
    MESSAGE("the interposed cudaMalloc saw no call during the cold steps: this build allocates some other way, "
            "so the warm-step count below would prove nothing");
    return;
  }
  const int64_t allocations = device_allocations.load(), frees = device_frees.load();
  const int64_t waits = ember::cuda::host_synchronizations();
  const Tensor loss = step();
  const int64_t new_waits = ember::cuda::host_synchronizations() - waits;
  CHECK_MESSAGE(new_waits == 0, "a warm step made the host wait for the GPU " << new_waits << " times");
  CHECK(std::isfinite(loss.item<double>()));
  CHECK(ember::cuda::host_synchronizations() == waits + 1);  // item() waits, and is counted
  const int64_t new_allocations = device_allocations.load() - allocations, new_frees = device_frees.load() - frees;
  CHECK_MESSAGE(new_allocations == 0, "a warm step called cudaMalloc " << new_allocations << " times");
  CHECK_MESSAGE(new_frees == 0, "a warm step called cudaFree " << new_frees << " times");
}

}  // namespace
}  // namespace ember::testing::cuda
