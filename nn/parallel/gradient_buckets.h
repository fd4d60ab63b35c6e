// How data-parallel training groups parameters' gradients into buckets, each all-reduced as one
// message: few messages (each pays a latency) but not one huge one at the very end (which could
// not overlap the backward pass).
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace ember::nn {

struct GradientBucket {
  std::vector<size_t> parameters;  // indices into the list that was planned, in bucket order
  std::vector<int64_t> offsets;    // where each parameter's gradient starts in the flat bucket
  int64_t numel = 0;               // elements of the flat bucket
  DType dtype = kFloat32;
  Device device;
};

// Buckets in the order backward produces gradients: the reverse of registration order (a model's
// last layers are registered last and get their gradients first). A bucket takes parameters until
// adding the next would pass `cap_bytes`; a parameter larger than the cap gets a bucket of its
// own. Parameters of different dtypes or devices never share a bucket. Throws for a cap below 1.
std::vector<GradientBucket> plan_gradient_buckets(const std::vector<Tensor>& parameters, int64_t cap_bytes);
// The same with the order given: `order` lists every index of `parameters` once, in the order
// their gradients are expected (the order one backward pass made them, measured).
std::vector<GradientBucket> plan_gradient_buckets(const std::vector<Tensor>& parameters, int64_t cap_bytes,
                                                  const std::vector<size_t>& order);

}  // namespace ember::nn
