// The rungs of CPU kernels (core/cpu/isa.h) this CPU can run, for suites that call each rung's
// table directly.
#pragma once

#include <vector>

#include "core/cpu/isa.h"

namespace ember::testing {

// Every rung up to the detected one, portable first.
inline std::vector<cpu::CpuIsa> rungs_of_this_cpu() {
  std::vector<cpu::CpuIsa> rungs;
  for (int rung = 0; rung <= static_cast<int>(cpu::detected_cpu_isa()); ++rung) {
    rungs.push_back(static_cast<cpu::CpuIsa>(rung));
  }
  return rungs;
}

}  // namespace ember::testing
