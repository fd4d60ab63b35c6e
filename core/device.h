// Where a tensor's memory lives: the CPU or one CUDA device.
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>

namespace ember {

enum class DeviceType : uint8_t { CPU = 0, CUDA = 1 };
inline constexpr int kNumDeviceTypes = 2;

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  constexpr Device() = default;
  constexpr Device(DeviceType type, int index = 0) : type(type), index(index) {}  // NOLINT: implicit on purpose

  static constexpr Device cpu() { return Device(DeviceType::CPU); }
  static constexpr Device cuda(int index = 0) { return Device(DeviceType::CUDA, index); }
  // Parses "cpu", "cuda" or "cuda:N"; anything else throws ember::Error.
  static Device parse(std::string_view text);

  constexpr bool is_cpu() const { return type == DeviceType::CPU; }
  constexpr bool is_cuda() const { return type == DeviceType::CUDA; }
  constexpr bool operator==(const Device&) const = default;

  std::string str() const { return is_cpu() ? "cpu" : fmt::format("cuda:{}", index); }
};

inline constexpr Device kCPU = Device::cpu();

}  // namespace ember

template <>
struct fmt::formatter<ember::Device> : fmt::formatter<std::string_view> {
  auto format(const ember::Device& device, format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(device.str(), ctx);
  }
};
