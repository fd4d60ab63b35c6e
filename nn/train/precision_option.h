// The run-time choice behind `--precision`: the dtype a training step computes its products in.
//
//   fp32  everything in float32 (the default; on the CPU the only one that saves time, as the
//         CPU computes 16-bit values in float32 after converting them)
//   bf16  forward and loss under autocast in bfloat16: tensor cores on a GPU, float32's range,
//         no loss scaling
//   fp16  the same in float16, with a GradScaler: float16's narrow range needs loss scaling
//
// Parameters, gradients and optimizer state stay float32 in every case.
//
//   const train::Precision precision = train::parse_precision("bf16");
//   nn::GradScaler scaler({.enabled = train::needs_loss_scaling(precision)});
//   Tensor loss;
//   {
//     const AutocastGuard autocast = train::autocast_scope(precision, device.type);
//     loss = nn::cross_entropy(model->forward(ids), labels);
//   }
//   scaler.scale(loss).backward();
#pragma once

#include <string>
#include <string_view>

#include "core/autocast.h"
#include "core/device.h"

namespace ember::train {

enum class Precision { Float32, BFloat16, Float16 };

// "fp32", "bf16" or "fp16"; anything else throws ember::Error
// "--precision: unknown precision 'x' (expected fp32, bf16 or fp16)".
Precision parse_precision(const std::string& name);
// The option's spelling: "fp32", "bf16", "fp16".
std::string_view precision_name(Precision precision);

// The autocast scope a step's forward and loss run in: off for fp32, else on for tensors on
// `device_type` in bfloat16 or float16.
AutocastGuard autocast_scope(Precision precision, DeviceType device_type);

// Whether the precision needs a GradScaler (fp16 only).
inline bool needs_loss_scaling(Precision precision) { return precision == Precision::Float16; }

}  // namespace ember::train
