// Where the host waits for the GPU: a copy to the host, a copy from pageable host memory (CUDA
// waits for the queued work before it), and synchronize(). Each of those calls
// host_waited_for_gpu() right after waiting, which counts the wait (a warm training step should
// make none until the user asks for a value: ember::cuda::host_synchronizations()) and reports
// the errors kernels found since the last wait (cuda/ops/index_check_kernels.h).
#pragma once

namespace ember::cuda {

void host_waited_for_gpu();

}  // namespace ember::cuda
