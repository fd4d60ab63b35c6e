// parse_precision and the autocast scope each precision asks for.
#include "nn/train/precision_option.h"

#include "core/error.h"

namespace ember::train {

Precision parse_precision(const std::string& name) {
  if (name == "fp32") return Precision::Float32;
  if (name == "bf16") return Precision::BFloat16;
  if (name == "fp16") return Precision::Float16;
  fail("--precision: unknown precision '{}' (expected fp32, bf16 or fp16)", name);
}

std::string_view precision_name(Precision precision) {
  switch (precision) {
    case Precision::Float32: return "fp32";
    case Precision::BFloat16: return "bf16";
    case Precision::Float16: return "fp16";
  }
  return "unknown";
}

AutocastGuard autocast_scope(Precision precision, DeviceType device_type) {
  const DType dtype = precision == Precision::Float16 ? kFloat16 : kBFloat16;
  return AutocastGuard(device_type, dtype, precision != Precision::Float32);
}

}  // namespace ember::train
