// The emulation itself (cuda_emulation.h): that its tensor-core instructions compute what the
// PTX ISA says they compute, and that it refuses what a GPU would get wrong (races, reads before
// a copy lands, barriers some threads never reach, accesses outside shared memory).
#include "tests/cuda_emulation/cuda_emulation.h"
// The emulation's macros are visible from here on: this file holds only kernels and their tests.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda/common/tensor_core_ops.cuh"

namespace {

using namespace ember;
using namespace ember::cuda_emulation;

// The message of the std::runtime_error `run` throws ("" if none).
template <class Run>
std::string failure_of(Run&& run) {
  try {
    run();
  } catch (const std::runtime_error& error) {
    return error.what();
  }
  return "";
}

std::vector<BFloat16> random_bfloat16(int count, uint64_t seed) {
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  std::vector<BFloat16> values(count);
  for (auto& value : values) value = BFloat16(uniform(random));
  return values;
}

// Every thread copies its 16-byte chunks of `bytes` from `source` into shared memory at
// `shared_offset`, by cp.async, then waits and meets the block at a barrier.
void copy_into_shared(const void* source, size_t bytes, size_t shared_offset, int threads) {
  for (size_t chunk = threadIdx.x; chunk * 16 < bytes; chunk += threads) {
    cuda::cp_async_16(cuda::dynamic_shared_memory() + shared_offset + chunk * 16,
                      static_cast<const unsigned char*>(source) + chunk * 16, 16);
  }
  cuda::cp_async_commit();
  cuda::cp_async_wait<0>();
  __syncthreads();
}

// A (16 x 16, row-major) times B (16 x 8), through ldmatrix and mma.sync as a kernel does it:
// A's fragment by ldmatrix.x4; B's by ldmatrix.x2 from B^T stored row-major (8 rows of 16 k) or
// by ldmatrix.x2.trans from B stored row-major (16 rows of 8 n). D gathered by the C layout.
std::vector<float> product_on_tensor_cores(const std::vector<BFloat16>& a, const std::vector<BFloat16>& b_by_rows,
                                           bool b_transposed_in_memory, uint64_t seed) {
  // Shared memory: A at 0 (512 bytes), B at 512 (256 bytes).
  std::vector<float> d(16 * 8, -1.0f);
  launch(
      dim3(1), dim3(32), 768,
      [&] {
        copy_into_shared(a.data(), 512, 0, 32);
        copy_into_shared(b_by_rows.data(), 256, 512, 32);
        const int lane = threadIdx.x;
        const auto* a_tile = reinterpret_cast<const BFloat16*>(cuda::dynamic_shared_memory());
        const auto* b_tile = reinterpret_cast<const BFloat16*>(cuda::dynamic_shared_memory() + 512);
        uint32_t a_fragment[4];
        cuda::ldmatrix_x4(a_fragment, a_tile + ((lane % 8) + ((lane / 8) % 2) * 8) * 16 + (lane / 16) * 8);
        uint32_t b_fragment[2];
        if (b_transposed_in_memory) {
          // B^T [n][k]: matrix 0 = k 0-7, matrix 1 = k 8-15 of the 8 rows n.
          cuda::ldmatrix_x2(b_fragment, b_tile + (lane % 8) * 16 + ((lane / 8) % 2) * 8);
        } else {
          // B [k][n]: matrix 0 = rows k 0-7, matrix 1 = rows k 8-15, transposed on the way.
          cuda::ldmatrix_x2(b_fragment, b_tile + (lane % 16) * 8, true);
        }
        const float zero[4] = {0, 0, 0, 0};
        float result[4];
        cuda::mma_m16n8k16_bf16(result, a_fragment, b_fragment, zero);
        const int g = lane / 4, t = lane % 4;
        for (int e = 0; e < 4; ++e) d[(g + 8 * (e / 2)) * 8 + 2 * t + e % 2] = result[e];
      },
      seed);
  return d;
}

TEST_CASE("ldmatrix and mma.sync.m16n8k16 multiply by the PTX ISA's fragment layouts") {
  const std::vector<BFloat16> a = random_bfloat16(16 * 16, 1), b = random_bfloat16(16 * 8, 2);
  std::vector<BFloat16> b_transposed(8 * 16);
  for (int k = 0; k < 16; ++k) {
    for (int n = 0; n < 8; ++n) b_transposed[n * 16 + k] = b[k * 8 + n];
  }
  std::vector<double> expected(16 * 8, 0.0);
  for (int m = 0; m < 16; ++m) {
    for (int n = 0; n < 8; ++n) {
      for (int k = 0; k < 16; ++k) expected[m * 8 + n] += double(float(a[m * 16 + k])) * double(float(b[k * 8 + n]));
    }
  }
  for (const bool transposed_in_memory : {true, false}) {
    const std::vector<float> d =
        product_on_tensor_cores(a, transposed_in_memory ? b_transposed : b, transposed_in_memory, 7);
    for (int e = 0; e < 16 * 8; ++e) {
      CAPTURE(transposed_in_memory);
      CAPTURE(e);
      CHECK(d[e] == doctest::Approx(expected[e]).epsilon(1e-6));
    }
  }
  CHECK(last_launch_counts().mma == 32);  // one per lane
  CHECK(last_launch_counts().ldmatrix == 64);
}

// cvt.rna.tf32.f32: to nearest of TF32's 10 fraction bits, ties away from zero.
float tf32_value(uint32_t bits) {
  float value = 0;
  std::memcpy(&value, &bits, 4);
  return value;
}

TEST_CASE("round_to_tf32 rounds as cvt.rna.tf32.f32 does") {
  auto bits_of = [](float value) {
    uint32_t bits = 0;
    std::memcpy(&bits, &value, 4);
    return bits;
  };
  CHECK(cuda::round_to_tf32(tf32_value(0x3F801000u)) == 0x3F802000u);  // 1 + 2^-11: a tie, away from zero
  CHECK(cuda::round_to_tf32(tf32_value(0xBF801000u)) == 0xBF802000u);  // and for -(1 + 2^-11)
  CHECK(cuda::round_to_tf32(tf32_value(0x3F800FFFu)) == 0x3F800000u);  // below the tie: down
  CHECK(cuda::round_to_tf32(tf32_value(0x3F9FF000u)) == 0x3FA00000u);  // a carry into the next binade
  CHECK(cuda::round_to_tf32(1.0f) == bits_of(1.0f));
  CHECK(cuda::round_to_tf32(std::numeric_limits<float>::infinity()) == bits_of(std::numeric_limits<float>::infinity()));
  CHECK(std::isnan(tf32_value(cuda::round_to_tf32(std::numeric_limits<float>::quiet_NaN()))));
}

// A (16 x 8) times B (8 x 8) on TF32: A by ldmatrix.x4 read as 8 x 4 matrices of 32-bit elements,
// B by ldmatrix.x2 from B^T stored row-major, every register rounded to TF32; D by the C layout.
TEST_CASE("mma.sync.m16n8k8 on TF32 multiplies by the PTX ISA's fragment layouts") {
  std::mt19937_64 random(3);
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  std::vector<float> a(16 * 8), b_transposed(8 * 8);
  for (float& value : a) value = uniform(random);
  for (float& value : b_transposed) value = uniform(random);
  auto rounded = [](float value) { return double(tf32_value(cuda::round_to_tf32(value))); };
  std::vector<double> expected(16 * 8, 0.0);
  for (int m = 0; m < 16; ++m) {
    for (int n = 0; n < 8; ++n) {
      for (int k = 0; k < 8; ++k) expected[m * 8 + n] += rounded(a[m * 8 + k]) * rounded(b_transposed[n * 8 + k]);
    }
  }
  for (const bool round_first : {true, false}) {
    std::vector<float> d(16 * 8, -1.0f);
    const std::string failure = failure_of([&] {
      launch(dim3(1), dim3(32), 768, [&] {
        copy_into_shared(a.data(), 512, 0, 32);
        copy_into_shared(b_transposed.data(), 256, 512, 32);
        const int lane = threadIdx.x;
        const auto* a_tile = reinterpret_cast<const float*>(cuda::dynamic_shared_memory());
        const auto* b_tile = reinterpret_cast<const float*>(cuda::dynamic_shared_memory() + 512);
        uint32_t a_fragment[4], b_fragment[2];
        cuda::ldmatrix_x4(a_fragment, a_tile + ((lane % 8) + ((lane / 8) % 2) * 8) * 8 + (lane / 16) * 4);
        cuda::ldmatrix_x2(b_fragment, b_tile + (lane % 8) * 8 + ((lane / 8) % 2) * 4);
        if (round_first) {
          for (uint32_t& r : a_fragment) r = cuda::round_to_tf32(cuda::bits_as_float(r));
          for (uint32_t& r : b_fragment) r = cuda::round_to_tf32(cuda::bits_as_float(r));
        }
        const float zero[4] = {0, 0, 0, 0};
        float result[4];
        cuda::mma_m16n8k8_tf32(result, a_fragment, b_fragment, zero);
        const int g = lane / 4, t = lane % 4;
        for (int e = 0; e < 4; ++e) d[(g + 8 * (e / 2)) * 8 + 2 * t + e % 2] = result[e];
      });
    });
    if (!round_first) {
      // Operands the kernel forgot to round are reported, not truncated silently.
      CHECK(failure.find("not rounded to TF32") != std::string::npos);
      continue;
    }
    CHECK(failure.empty());
    for (int e = 0; e < 16 * 8; ++e) {
      CAPTURE(e);
      CHECK(d[e] == doctest::Approx(expected[e]).epsilon(1e-6));
    }
  }
}

TEST_CASE("the fragment layouts themselves: which lane holds which element") {
  // A 16 x 16 matrix whose elements are their own index (exact in bf16 up to 256), read by
  // ldmatrix.x4: lane l holds (l / 4, 2 (l % 4)) and the next column of each 8 x 8 quarter.
  std::vector<BFloat16> index(16 * 16);
  for (int e = 0; e < 256; ++e) index[e] = BFloat16(float(e));
  std::vector<uint32_t> held(32 * 4);
  std::vector<uint32_t> held_transposed(32 * 4);
  launch(dim3(1), dim3(32), 512, [&] {
    copy_into_shared(index.data(), 512, 0, 32);
    const int lane = threadIdx.x;
    const auto* tile = reinterpret_cast<const BFloat16*>(cuda::dynamic_shared_memory());
    uint32_t r[4];
    cuda::ldmatrix_x4(r, tile + ((lane % 8) + ((lane / 8) % 2) * 8) * 16 + (lane / 16) * 8);
    for (int m = 0; m < 4; ++m) held[lane * 4 + m] = r[m];
    cuda::ldmatrix_x4(r, tile + ((lane % 8) + ((lane / 8) % 2) * 8) * 16 + (lane / 16) * 8, true);
    for (int m = 0; m < 4; ++m) held_transposed[lane * 4 + m] = r[m];
  });
  auto element = [](uint32_t pair, int which) {
    return float(BFloat16::from_bits(static_cast<uint16_t>(which == 0 ? pair & 0xffff : pair >> 16)));
  };
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int m = 0; m < 4; ++m) {
      // Quarter m: rows 8 (m % 2) on, columns 8 (m / 2) on (the order a kernel's lanes gave).
      const int row0 = 8 * (m % 2), col0 = 8 * (m / 2);
      CAPTURE(lane);
      CAPTURE(m);
      CHECK(element(held[lane * 4 + m], 0) == float((row0 + g) * 16 + col0 + 2 * t));
      CHECK(element(held[lane * 4 + m], 1) == float((row0 + g) * 16 + col0 + 2 * t + 1));
      CHECK(element(held_transposed[lane * 4 + m], 0) == float((row0 + 2 * t) * 16 + col0 + g));
      CHECK(element(held_transposed[lane * 4 + m], 1) == float((row0 + 2 * t + 1) * 16 + col0 + g));
    }
  }
}

TEST_CASE("__shfl_xor_sync exchanges between lanes and every thread reaches each barrier") {
  std::vector<float> sums(64);
  launch(
      dim3(1), dim3(64), 0,
      [&] {
        float value = float(threadIdx.x);
        value += __shfl_xor_sync(0xffffffffu, value, 1);
        value += __shfl_xor_sync(0xffffffffu, value, 2);
        __syncthreads();
        sums[threadIdx.x] = value;
      },
      3);
  for (int t = 0; t < 64; ++t) CHECK(sums[t] == float(4 * (t / 4 * 4) + 6));
}

TEST_CASE("the emulation refuses what would go wrong on a GPU") {
  const std::vector<BFloat16> data = random_bfloat16(512, 5);

  SUBCASE("a read of another warp's copy without a barrier between them") {
    const std::string message = failure_of([&] {
      launch(
          dim3(1), dim3(64), 512,
          [&] {
            if (threadIdx.x < 32) {
              cuda::cp_async_16(cuda::dynamic_shared_memory() + threadIdx.x * 16, data.data() + threadIdx.x * 8, 16);
              cuda::cp_async_commit();
              cuda::cp_async_wait<0>();
            }
            __syncthreads();
            // Warp 1 rewrites warp 0's rows, then warp 0 reads them back in the same interval.
            if (threadIdx.x >= 32) {
              const int lane = threadIdx.x - 32;
              cuda::cp_async_16(cuda::dynamic_shared_memory() + lane * 16, data.data() + 256 + lane * 8, 16);
              cuda::cp_async_commit();
              cuda::cp_async_wait<0>();
            } else {
              uint32_t r[4];
              cuda::ldmatrix_x4(r, cuda::dynamic_shared_memory() + threadIdx.x * 16);
            }
            __syncthreads();
          },
          11);
    });
    // Which of the three accesses comes first depends on the interleaving; each is refused.
    CHECK((message.find("same barrier interval") != std::string::npos ||
           message.find("before the cp.async") != std::string::npos));
  }

  SUBCASE("a read of a cp.async's destination before its wait_group") {
    const std::string message = failure_of([&] {
      launch(dim3(1), dim3(32), 512, [&] {
        cuda::cp_async_16(cuda::dynamic_shared_memory() + threadIdx.x * 16, data.data() + threadIdx.x * 8, 16);
        cuda::cp_async_commit();
        uint32_t r[4];
        cuda::ldmatrix_x4(r, cuda::dynamic_shared_memory() + threadIdx.x * 16);
        cuda::cp_async_wait<0>();
      });
    });
    CHECK(message.find("before the cp.async") != std::string::npos);
  }

  SUBCASE("a wait that leaves the newest group in flight") {
    const std::string message = failure_of([&] {
      launch(dim3(1), dim3(32), 1024, [&] {
        cuda::cp_async_16(cuda::dynamic_shared_memory() + threadIdx.x * 16, data.data() + threadIdx.x * 8, 16);
        cuda::cp_async_commit();
        cuda::cp_async_16(cuda::dynamic_shared_memory() + 512 + threadIdx.x * 16, data.data() + threadIdx.x * 8, 16);
        cuda::cp_async_commit();
        cuda::cp_async_wait<1>();
        __syncthreads();
        uint32_t r[4];
        cuda::ldmatrix_x4(r, cuda::dynamic_shared_memory() + threadIdx.x * 16);        // landed
        cuda::ldmatrix_x4(r, cuda::dynamic_shared_memory() + 512 + threadIdx.x * 16);  // not yet
      });
    });
    CHECK(message.find("before the cp.async") != std::string::npos);
  }

  SUBCASE("a barrier some threads never reach") {
    const std::string message = failure_of([&] {
      launch(dim3(1), dim3(64), 0, [&] {
        if (threadIdx.x < 32) __syncthreads();
      });
    });
    CHECK(message.find("stuck") != std::string::npos);
  }

  SUBCASE("a warp whose lanes meet different instructions") {
    const std::string message = failure_of([&] {
      launch(dim3(1), dim3(32), 0, [&] {
        if (threadIdx.x % 2 == 0) {
          __shfl_xor_sync(0xffffffffu, 1.0f, 1);
        } else {
          __syncwarp();
        }
      });
    });
    CHECK(message.find("diverged") != std::string::npos);
  }

  SUBCASE("shared memory outside the block's allocation, misaligned, or never written") {
    CHECK(failure_of([&] {
            launch(dim3(1), dim3(32), 256, [&] {
              cuda::cp_async_16(cuda::dynamic_shared_memory() + 16 * threadIdx.x, data.data(), 16);
              cuda::cp_async_commit();
              cuda::cp_async_wait<0>();
            });
          }).find("outside the block's 256 bytes") != std::string::npos);
    CHECK(failure_of([&] {
            launch(dim3(1), dim3(32), 1024, [&] {
              cuda::cp_async_16(cuda::dynamic_shared_memory() + 8, data.data(), 16);
              cuda::cp_async_commit();
              cuda::cp_async_wait<0>();
            });
          }).find("not 16-byte aligned") != std::string::npos);
    CHECK(failure_of([&] {
            launch(dim3(1), dim3(32), 512, [&] {
              uint32_t r[4];
              cuda::ldmatrix_x4(r, cuda::dynamic_shared_memory() + threadIdx.x * 16);
            });
          }).find("nothing has written") != std::string::npos);
  }

  SUBCASE("a global read outside every registered buffer") {
    register_global_region(data.data(), data.size() * sizeof(BFloat16));
    const std::string message = failure_of([&] {
      launch(dim3(1), dim3(32), 512, [&] {
        // Lane 0 reads the buffer's last 16 bytes, lane 1 the 16 after it.
        cuda::cp_async_16(cuda::dynamic_shared_memory() + threadIdx.x * 16, data.data() + 504 + threadIdx.x * 8, 16);
        cuda::cp_async_commit();
        cuda::cp_async_wait<0>();
      });
    });
    clear_global_regions();
    CHECK(message.find("outside every global buffer") != std::string::npos);
  }
}

}  // namespace
