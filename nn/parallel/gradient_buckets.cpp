// The bucket plan of data-parallel training (nn/parallel/gradient_buckets.h).
#include "nn/parallel/gradient_buckets.h"

namespace ember::nn {

std::vector<GradientBucket> plan_gradient_buckets(const std::vector<Tensor>& parameters, int64_t cap_bytes) {
  std::vector<size_t> reverse(parameters.size());
  for (size_t i = 0; i < reverse.size(); ++i) reverse[i] = reverse.size() - 1 - i;
  return plan_gradient_buckets(parameters, cap_bytes, reverse);
}

std::vector<GradientBucket> plan_gradient_buckets(const std::vector<Tensor>& parameters, int64_t cap_bytes,
                                                  const std::vector<size_t>& order) {
  EMBER_CHECK(cap_bytes >= 1, "plan_gradient_buckets: the bucket cap must be at least 1 byte, got {}", cap_bytes);
  std::vector<bool> seen(parameters.size(), false);
  for (size_t i : order) {
    EMBER_CHECK(i < parameters.size() && !seen[i],
                "plan_gradient_buckets: the order must list each of the {} parameters once; {} is {}",
                parameters.size(), i, i < parameters.size() ? "repeated" : "out of range");
    seen[i] = true;
  }
  EMBER_CHECK(order.size() == parameters.size(), "plan_gradient_buckets: the order lists {} of the {} parameters",
              order.size(), parameters.size());
  std::vector<GradientBucket> buckets;
  int64_t bucket_bytes = 0;
  for (size_t i : order) {
    const Tensor& parameter = parameters[i];
    EMBER_CHECK(parameter.defined(), "plan_gradient_buckets: parameter {} is undefined", i);
    const int64_t bytes = parameter.numel() * static_cast<int64_t>(element_size(parameter.dtype()));
    const bool fits = !buckets.empty() && buckets.back().dtype == parameter.dtype() &&
                      buckets.back().device == parameter.device() && bucket_bytes + bytes <= cap_bytes;
    if (!fits) {
      GradientBucket fresh;
      fresh.dtype = parameter.dtype();
      fresh.device = parameter.device();
      buckets.push_back(std::move(fresh));
      bucket_bytes = 0;
    }
    GradientBucket& bucket = buckets.back();
    bucket.parameters.push_back(i);
    bucket.offsets.push_back(bucket.numel);
    bucket.numel += parameter.numel();
    bucket_bytes += bytes;
  }
  return buckets;
}

}  // namespace ember::nn
