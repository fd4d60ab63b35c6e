// The per-op totals of the profiler (see profiler.h).
#include "core/profiler.h"

#include <algorithm>
#include <map>

#include "core/cuda.h"

namespace ember::profiler {
namespace detail {
bool on = false;
int depth = 0;
}  // namespace detail

namespace {
// std::less<> lets a string_view look up a std::string key without building one.
std::map<std::string, OpTime, std::less<>> totals;

OpTime& entry(std::string_view op) {
  auto it = totals.find(op);
  if (it == totals.end()) it = totals.emplace(std::string(op), OpTime{std::string(op)}).first;
  return it->second;
}
}  // namespace

void start() {
  totals.clear();
  detail::on = true;
}

std::vector<OpTime> stop() {
  detail::on = false;
  std::vector<OpTime> ops;
  for (auto& [name, op] : totals) ops.push_back(op);
  std::sort(ops.begin(), ops.end(), [](const OpTime& a, const OpTime& b) { return a.seconds > b.seconds; });
  return ops;
}

bool is_on() { return detail::on; }

void add_flops(std::string_view op, double flops) {
  if (detail::on) entry(op).flops += flops;
}

void detail::wait_for_gpu() { cuda::synchronize(); }

void detail::record(std::string_view op, double seconds) {
  OpTime& time = entry(op);
  time.calls += 1;
  time.seconds += seconds;
}

}  // namespace ember::profiler
