// The CUDA entry of the copy kernel table: host to device, device to host and device to device.
// core looks the copy kernel up by the tensor that is not on the CPU, so this one function
// serves to(Device), cpu(), contiguous(), clone(), to(DType), copy_ and cat on the GPU.
//
// A copy of the same dtype between contiguous tensors of one shape is a single cudaMemcpy.
// Anything else (strides, broadcasting, a dtype change) runs the converting kernel on the GPU,
// with the host side first made contiguous on the CPU, so only plain bytes cross the bus.
#include <cuda_runtime_api.h>

#include "core/cuda_graph.h"
#include "core/ops/copy.h"
#include "cuda/runtime/check.h"
#include "cuda/ops/copy_kernels.h"
#include "cuda/ops/device_elements.h"
#include "cuda/runtime/host_wait.h"
#include "cuda/runtime/stream.h"
#include "cuda/ops/tensor_layout.h"

namespace ember::cuda {
namespace {

bool is_plain_copy(const Tensor& dst, const Tensor& src) {
  return dst.dtype() == src.dtype() && dst.sizes() == src.sizes() && dst.is_contiguous() && src.is_contiguous();
}

size_t byte_size(const Tensor& t) { return static_cast<size_t>(t.numel()) * element_size(t.dtype()); }

// dst = src converted, broadcast and rearranged; both on the same GPU.
void convert_on_device(const Tensor& dst, const Tensor& src) {
  const StridedLayout<2> layout = strided_layout<2>("copy", {&dst, &src});
  visit_any_dtype(dst.dtype(), [&]<class Out>() {
    visit_any_dtype(src.dtype(), [&]<class In>() {
      launch_convert<device_element_t<Out>, device_element_t<In>>(layout, dst.numel(), device_data<Out>(dst),
                                                                  device_data<In>(src));
    });
  });
}

// A contiguous CPU tensor holding src's values (src itself when it already is one).
Tensor contiguous_on_host(const Tensor& src) {
  if (src.is_contiguous()) return src;
  Tensor host = make_tensor(src.sizes(), src.dtype(), kCPU);
  kernels::copy[kCPU](host, src);
  return host;
}

// A copy between host and device waits for the GPU, which a CUDA graph cannot record: whether
// CUDA refuses a synchronous cudaMemcpy inside a capture on a non-blocking stream is not
// something to rely on, and if it did not, item() would read memory the graph has not written
// yet. So ember refuses it itself, before any CUDA call.
void refuse_while_capturing(const char* what) {
  EMBER_CHECK(!is_capturing_graph(), "{}: a copy between host and device waits for the GPU, which a CUDA graph "
              "capture cannot record (no item(), cpu(), to(kCPU) or upload from host memory inside a captured "
              "step: copy the batch into the graph's input tensors before replay(), and read outputs after it)",
              what);
}

// From pageable memory, cudaMemcpy waits for the queued work before it copies.
void copy_to_device(void* device_bytes, const Tensor& host) {
  refuse_while_capturing("copy to GPU");
  check(cudaMemcpy(device_bytes, host.raw_data(), byte_size(host), cudaMemcpyHostToDevice), "copy to GPU");
  host_waited_for_gpu();
}

void upload(const Tensor& dst, const Tensor& src) {
  const Tensor host = contiguous_on_host(src);
  if (is_plain_copy(dst, host)) return copy_to_device(dst.raw_data(), host);
  const Tensor staged = make_tensor(host.sizes(), host.dtype(), dst.device());
  copy_to_device(staged.raw_data(), host);
  convert_on_device(dst, staged);
}

void copy_to_host(const Tensor& host, const Tensor& device_side) {
  refuse_while_capturing("copy to CPU");
  check(cudaMemcpy(host.raw_data(), device_side.raw_data(), byte_size(host), cudaMemcpyDeviceToHost), "copy to CPU");
  host_waited_for_gpu();
}

// cudaMemcpy to the host waits for the kernels queued before it: this is where item() and
// cpu() synchronise. (An upload from pageable memory, above, also waits for the queued work
// before it starts, and returns once the host bytes are staged, so `host` may go at once.)
void download(const Tensor& dst, const Tensor& src) {
  Tensor device_side = src;
  if (!(src.dtype() == dst.dtype() && src.sizes() == dst.sizes() && src.is_contiguous())) {
    device_side = make_tensor(dst.sizes(), dst.dtype(), src.device());
    convert_on_device(device_side, src);
  }
  if (dst.is_contiguous()) return copy_to_host(dst, device_side);
  const Tensor host = make_tensor(dst.sizes(), dst.dtype(), kCPU);
  copy_to_host(host, device_side);
  kernels::copy[kCPU](dst, host);
}

void copy_cuda(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;
  if (dst.is_cpu()) return download(dst, src);
  if (src.is_cpu()) return upload(dst, src);
  if (dst.device() != src.device()) {
    // Between two GPUs: through the host, so that no kernel reads another device's memory.
    const Tensor host = make_tensor(src.sizes(), src.dtype(), kCPU);
    download(host, src);
    return upload(dst, host);
  }
  if (is_plain_copy(dst, src)) {
    check(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), byte_size(dst), cudaMemcpyDeviceToDevice, current_stream()),
          "copy");
    return;
  }
  convert_on_device(dst, src);
}
EMBER_REGISTER_KERNEL(kernels::copy, DeviceType::CUDA, copy_cuda);

}  // namespace
}  // namespace ember::cuda
