// The switches of the mma.sync attention kernels (declared in cuda/attention/flash_attention_plan.h):
// whether they may run, which compiled tile of each list, and the deterministic dQ pass. Plain
// C++, in every CUDA build, so that benchmarks and suites can set them whether or not the kernels
// were compiled.
#include <atomic>
#include <cstdlib>

#include "cuda/attention/attention_tensor_core_plan.h"
#include "cuda/attention/flash_attention_plan.h"

namespace ember::cuda {
namespace {

std::atomic<bool>& flash_setting() {
  static std::atomic<bool> allowed(tensor_cores_allowed_by(std::getenv("EMBER_ATTENTION_FLASH")));
  return allowed;
}

std::atomic<bool>& deterministic_setting() {
  static std::atomic<bool> deterministic(deterministic_requested_by(std::getenv("EMBER_ATTENTION_DETERMINISTIC")));
  return deterministic;
}

// A tile index from the environment: `name`'s value if it is one of the list's, else 0.
int tile_from_environment(const char* name) {
  const char* value = std::getenv(name);
  const int index = value == nullptr ? 0 : std::atoi(value);
  return index >= 0 && index < kFlashCompiledTiles ? index : 0;
}

std::atomic<int>& forward_tile_setting() {
  static std::atomic<int> choice(tile_from_environment("EMBER_ATTENTION_FLASH_TILE"));
  return choice;
}

std::atomic<int>& backward_tile_setting() {
  static std::atomic<int> choice(tile_from_environment("EMBER_ATTENTION_FLASH_BACKWARD_TILE"));
  return choice;
}

}  // namespace

bool attention_flash_allowed() { return flash_setting().load(); }
void set_attention_flash_allowed(bool allowed) { flash_setting().store(allowed); }
bool attention_deterministic() { return deterministic_setting().load(); }
void set_attention_deterministic(bool deterministic) { deterministic_setting().store(deterministic); }
int flash_forward_tile_choice() { return forward_tile_setting().load(); }
void set_flash_forward_tile_choice(int index) {
  forward_tile_setting().store(index >= 0 && index < kFlashCompiledTiles ? index : 0);
}
int flash_backward_tile_choice() { return backward_tile_setting().load(); }
void set_flash_backward_tile_choice(int index) {
  backward_tile_setting().store(index >= 0 && index < kFlashCompiledTiles ? index : 0);
}

}  // namespace ember::cuda
