// Autocast's per-thread state, its scopes, the cast cache of parameters, and the rules that
// pick each op's operand dtypes.
#include "core/autocast.h"

#include <unordered_map>

#include "core/autograd/grad_mode.h"
#include "core/error.h"

namespace ember {
namespace {

struct DeviceTypeState {
  bool enabled = false;
  DType dtype = kBFloat16;
};

// A parameter's cast, kept while the outermost scope lasts. It holds the parameter itself,
// so the address it is keyed by cannot be reused by another tensor meanwhile; and the
// storage's version at the cast, so that a parameter updated in place is cast again.
struct CachedCast {
  Tensor source;
  uint64_t version;
  Tensor cast;
};

struct AutocastState {
  std::array<DeviceTypeState, kNumDeviceTypes> devices;
  int depth = 0;  // scopes open, enabled or not; the cache is cleared when the last closes
  int enabled_count = 0;
  std::unordered_map<TensorImpl*, CachedCast> cache;
};

thread_local AutocastState state;

DeviceTypeState& device_state(DeviceType type) { return state.devices[static_cast<int>(type)]; }

void set_enabled(DeviceType type, bool enabled, DType dtype) {
  DeviceTypeState& device = device_state(type);
  state.enabled_count += static_cast<int>(enabled) - static_cast<int>(device.enabled);
  device.enabled = enabled;
  device.dtype = dtype;
}

void check_dtype(DType dtype) {
  EMBER_CHECK(is_16_bit_floating_point(dtype), "autocast: dtype must be bfloat16 or float16, got {}",
              dtype_name(dtype));
}

// Parameters — leaves that require grad, not views — are what ops read again and again in a
// step; a cast recorded by autograd is the only kind worth keeping (one made under
// NoGradGuard would give the parameter no gradient if reused).
bool cacheable(const Tensor& x) {
  return x.requires_grad() && x.is_leaf() && !x.impl()->is_view && GradMode::is_enabled();
}

Tensor cast(const Tensor& x, DType dtype) {
  if (!cacheable(x)) return x.to(dtype);
  const auto found = state.cache.find(x.impl());
  if (found != state.cache.end() && found->second.cast.dtype() == dtype && found->second.version == x.version()) {
    return found->second.cast;
  }
  Tensor result = x.to(dtype);
  state.cache.insert_or_assign(x.impl(), CachedCast{x, x.version(), result});
  return result;
}

// The autocast state of the device the operands live on (the first defined one's): the ops
// themselves refuse operands on different devices.
const DeviceTypeState* scope_of(const std::vector<Tensor>& operands) {
  for (const Tensor& x : operands) {
    if (x.defined()) {
      const DeviceTypeState& device = device_state(x.device().type);
      return device.enabled ? &device : nullptr;
    }
  }
  return nullptr;
}

// Casts the floating operands, float64 ones excepted, to `dtype`; nullopt when none changes.
std::optional<std::vector<Tensor>> cast_floating(std::vector<Tensor> operands, DType dtype) {
  bool changed = false;
  for (Tensor& x : operands) {
    if (!x.defined() || !is_floating_point(x.dtype()) || x.dtype() == kFloat64 || x.dtype() == dtype) continue;
    x = cast(x, dtype);
    changed = true;
  }
  if (!changed) return std::nullopt;
  return operands;
}

}  // namespace

AutocastGuard::AutocastGuard(DeviceType device_type, DType dtype, bool enabled) : device_type_(device_type) {
  if (enabled) check_dtype(dtype);
  const DeviceTypeState& previous = device_state(device_type);
  previous_enabled_ = previous.enabled;
  previous_dtype_ = previous.dtype;
  set_enabled(device_type, enabled, enabled ? dtype : previous.dtype);
  ++state.depth;
}

AutocastGuard::AutocastGuard(DeviceType device_type, bool enabled) : AutocastGuard(device_type, kBFloat16, enabled) {}

AutocastGuard::~AutocastGuard() {
  set_enabled(device_type_, previous_enabled_, previous_dtype_);
  if (--state.depth == 0) state.cache.clear();
}

namespace autocast {

bool is_enabled(DeviceType device_type) { return device_state(device_type).enabled; }
DType dtype(DeviceType device_type) { return device_state(device_type).dtype; }
size_t cached_cast_count() { return state.cache.size(); }

namespace detail {

bool any_enabled() { return state.enabled_count > 0; }

std::optional<std::vector<Tensor>> product_operands(std::vector<Tensor> operands) {
  const DeviceTypeState* scope = scope_of(operands);
  if (scope == nullptr) return std::nullopt;
  return cast_floating(std::move(operands), scope->dtype);
}

std::optional<std::vector<Tensor>> float32_operands(std::vector<Tensor> operands) {
  if (scope_of(operands) == nullptr) return std::nullopt;
  return cast_floating(std::move(operands), kFloat32);
}

std::optional<std::vector<Tensor>> widest_operands(std::vector<Tensor> operands) {
  if (scope_of(operands) == nullptr) return std::nullopt;
  // Only a mix of floating dtypes widens; float64 beside another dtype stays the op's error.
  std::optional<DType> first;
  bool mixed = false;
  for (const Tensor& x : operands) {
    if (!x.defined() || !is_floating_point(x.dtype())) continue;
    if (x.dtype() == kFloat64) return std::nullopt;
    if (first && *first != x.dtype()) mixed = true;
    if (!first) first = x.dtype();
  }
  if (!mixed) return std::nullopt;
  return cast_floating(std::move(operands), kFloat32);
}

Suspend::Suspend() {
  for (int type = 0; type < kNumDeviceTypes; ++type) {
    previous_[type] = state.devices[type].enabled;
    set_enabled(static_cast<DeviceType>(type), false, state.devices[type].dtype);
  }
}

Suspend::~Suspend() {
  for (int type = 0; type < kNumDeviceTypes; ++type) {
    set_enabled(static_cast<DeviceType>(type), previous_[type], state.devices[type].dtype);
  }
}

}  // namespace detail
}  // namespace autocast
}  // namespace ember
