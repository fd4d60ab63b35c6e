// Totals over the ranks (nn/train/sum_over_ranks.h).
#include "nn/train/sum_over_ranks.h"

#include "core/distributed/process_group.h"
#include "core/ops/factory.h"

namespace ember::train {

std::vector<double> sum_over_ranks(std::vector<double> values) {
  if (!distributed::is_initialized() || distributed::world_size() == 1 || values.empty()) return values;
  Tensor totals = tensor(values, {static_cast<int64_t>(values.size())}, kFloat64);
  distributed::all_reduce(totals);
  return totals.to_vector<double>();
}

}  // namespace ember::train
