// Remembers which one-time setups have been done on which device: a kernel's opt-in to more
// shared memory (cudaFuncSetAttribute) belongs to the context of the device current when it is
// set, so "once per process" is wrong as soon as a process uses a second GPU. Keyed by the
// kernel's address, since kernels of one signature share a C++ type. Plain C++, tested on the
// CPU (tests/test_once_per_device.cpp). C++17: the .cu files include it.
#pragma once

#include <mutex>
#include <set>
#include <utility>

namespace ember::cuda {

class OncePerDevice {
 public:
  bool is_done(const void* key, int device) const {
    std::lock_guard lock(mutex_);
    return done_.count({key, device}) > 0;
  }
  // Called after the setup succeeded, so that a failed one is tried again on the next launch.
  void mark_done(const void* key, int device) {
    std::lock_guard lock(mutex_);
    done_.insert({key, device});
  }

 private:
  mutable std::mutex mutex_;
  std::set<std::pair<const void*, int>> done_;
};

}  // namespace ember::cuda
