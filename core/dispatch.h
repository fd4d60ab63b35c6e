// Op dispatch: each op owns one KernelTable, a slot per device type. CPU kernels register
// from core/, CUDA kernels from cuda/, so a new backend never touches an op's logic.
#pragma once

#include <string_view>
#include <type_traits>
#include <utility>

#include "core/device.h"
#include "core/error.h"
#include "core/profiler.h"

namespace ember {

namespace cpu {
struct KernelTable;
// core/cpu/kernel_table.h: the CPU's vector kernels, chosen once (and refused there, with an
// ember::Error, when EMBER_CPU_ISA asks for what the CPU lacks).
const KernelTable& kernels();
}  // namespace cpu

// A kernel looked up in a table, ready to call. Calling it calls the kernel, timed under the
// op's name while the profiler is on (core/profiler.h).
template <class Fn>
class KernelCall;

template <class Result, class... Args>
class KernelCall<Result(Args...)> {
 public:
  KernelCall(Result (*kernel)(Args...), std::string_view op, bool on_gpu)
      : kernel_(kernel), op_(op), on_gpu_(on_gpu) {}

  // Most kernels write into tensors they are given and return nothing; a few return what only
  // the device knows how to shape (attention's saved statistics).
  Result operator()(Args... args) const {
    if (!profiler::detail::on) [[likely]] return kernel_(std::forward<Args>(args)...);
    profiler::KernelTimer timer(op_, on_gpu_);
    if constexpr (std::is_void_v<Result>) {
      kernel_(std::forward<Args>(args)...);
      timer.stop();
    } else {
      Result result = kernel_(std::forward<Args>(args)...);
      timer.stop();
      return result;
    }
  }

 private:
  Result (*kernel_)(Args...);
  std::string_view op_;
  bool on_gpu_;
};

// A kernel table for kernels of signature Fn, e.g.
//   constinit KernelTable<void(const Tensor& in, Tensor& out)> softmax_kernel{"softmax"};
// Tables are constant-initialised (constinit), so they exist before any registrar runs.
template <class Fn>
class KernelTable {
 public:
  constexpr explicit KernelTable(std::string_view op) : op_(op) {}

  void set(DeviceType type, Fn* kernel) { kernels_[static_cast<int>(type)] = kernel; }

  // The kernel for `device`; a missing one is an error, never a silent fallback.
  KernelCall<Fn> operator[](Device device) const { return get(device, op_); }

  // The same, for a table shared by a family of ops: errors and the profiler name `op`, which
  // must outlive the call (a string literal).
  KernelCall<Fn> get(Device device, std::string_view op) const {
    Fn* kernel = kernels_[static_cast<int>(device.type)];
    if (kernel == nullptr) [[unlikely]] {
      fail("{}: no kernel for {}", op, device.is_cuda() ? "CUDA" : "CPU");
    }
    // The CPU kernels call the chosen vector kernels from inside their parallel loops, where an
    // exception would end the program: the choice is made, or refused, here first.
    if (!device.is_cuda()) cpu::kernels();
    return KernelCall<Fn>(kernel, op, device.is_cuda());
  }

  // Whether `device` has a kernel: for ops that choose between a fused kernel, where a
  // backend has one, and a composition of other ops (scaled_dot_product_attention).
  bool has(Device device) const { return kernels_[static_cast<int>(device.type)] != nullptr; }

  std::string_view op() const { return op_; }

 private:
  std::string_view op_;
  Fn* kernels_[kNumDeviceTypes] = {};
};

// Registers a kernel at static-initialisation time:
//   EMBER_REGISTER_KERNEL(softmax_kernel, DeviceType::CPU, softmax_cpu);
// ember is built as a shared library, so every registrar's object file is loaded.
struct KernelRegistrar {
  template <class Fn>
  KernelRegistrar(KernelTable<Fn>& table, DeviceType type, Fn* kernel) {
    table.set(type, kernel);
  }
};

#define EMBER_CONCAT_INNER(a, b) a##b
#define EMBER_CONCAT(a, b) EMBER_CONCAT_INNER(a, b)
#define EMBER_REGISTER_KERNEL(table, device_type, kernel) \
  static ::ember::KernelRegistrar EMBER_CONCAT(ember_registrar_, __LINE__)(table, device_type, kernel)

}  // namespace ember
