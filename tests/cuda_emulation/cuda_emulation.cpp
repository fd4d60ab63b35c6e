// The CPU emulation of CUDA's block, warp and tensor-core instructions (cuda_emulation.h says
// what it models). Threads are fibers (ucontext), switched only here: at barriers and warp-wide
// instructions always, at other shared-memory operations when the seeded generator says so.
#include "tests/cuda_emulation/cuda_emulation.h"

#include <fmt/format.h>
#include <ucontext.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace ember::cuda_emulation {
namespace {

constexpr int kWarpSize = 32;
constexpr size_t kStackBytes = 256 * 1024;
constexpr size_t kSharedAlignment = 128;  // as `extern __shared__ __align__(128)` promises
constexpr unsigned int kFullMask = 0xffffffffu;

enum class Waiting { kNothing, kBarrier, kWarp, kReturned };

// A cp.async issued by a thread: its data is read from global memory at issue (the kernels'
// sources do not change while they run) and lands at the thread's wait_group.
struct PendingCopy {
  unsigned char* destination = nullptr;
  unsigned char data[16] = {};
  int64_t group = -1;  // -1 until committed
};

struct Fiber {
  ucontext_t context{};
  int id = 0;  // the linear thread index in the block
  Waiting waiting = Waiting::kNothing;
  std::vector<PendingCopy> copies;
  int64_t committed_groups = 0;
};

enum class ByteState : uint8_t { kNeverWritten, kPending, kWritten };

// What the race checks need to know about one byte of shared memory.
struct ByteRecord {
  ByteState state = ByteState::kNeverWritten;
  int writer = -1;
  int64_t write_epoch = -1, writer_warp_epoch = -1;
  int reader = -1;  // -2: several threads
  int64_t read_epoch = -1, reader_warp_epoch = -1;
};

enum class Collective { kSyncWarp, kShuffle, kMma, kLdmatrix };

const char* collective_name(Collective kind) {
  switch (kind) {
    case Collective::kSyncWarp:
      return "__syncwarp";
    case Collective::kShuffle:
      return "__shfl_xor_sync";
    case Collective::kMma:
      return "mma.sync";
    case Collective::kLdmatrix:
      return "ldmatrix";
  }
  return "?";
}

// One lane's part in a warp-wide instruction: its inputs, then its outputs.
struct LaneSlot {
  Collective kind = Collective::kSyncWarp;
  int variant = 0;  // mma: 0 bf16, 1 f16 (m16n8k16), 2 tf32 (m16n8k8); ldmatrix: matrices * 2 + transposed
  uint32_t a[4] = {}, b[2] = {};
  float c[4] = {};
  float value = 0;
  int lane_mask = 0;
  const unsigned char* address = nullptr;
  float d[4] = {};
  uint32_t r[4] = {};
  float shuffled = 0;
};

struct WarpState {
  LaneSlot lanes[kWarpSize];
  int arrived = 0;
  int64_t epoch = 0;  // completed __syncwarp calls: orders the warp's shared accesses
};

struct Block {
  dim3 index, dim, grid;
  unsigned char* shared = nullptr;
  size_t shared_bytes = 0;
  std::vector<ByteRecord> records;
  std::vector<Fiber>* fibers = nullptr;
  std::vector<WarpState> warps;
  int64_t epoch = 0;  // completed __syncthreads: the barrier intervals
  int barrier_arrived = 0;
  std::string error;
  std::mt19937_64* random = nullptr;
};

Block* g_block = nullptr;
Fiber* g_current = nullptr;
ucontext_t g_scheduler;
const std::function<void()>* g_body = nullptr;
LaunchCounts g_counts;
std::vector<std::pair<const unsigned char*, size_t>> g_regions;

Fiber& current(const char* what) {
  if (g_current == nullptr) throw std::runtime_error(fmt::format("cuda_emulation: {} called outside a launch", what));
  return *g_current;
}

// Back to the scheduler, which resumes this fiber when it may go on.
void yield() { swapcontext(&g_current->context, &g_scheduler); }

// Stops the launch: the scheduler throws the message and never resumes this fiber.
[[noreturn]] void fail(const std::string& message) {
  Fiber& fiber = current("fail");
  g_block->error =
      fmt::format("block ({}, {}, {}), thread {} (warp {}, lane {}): {}", g_block->index.x, g_block->index.y,
                  g_block->index.z, fiber.id, fiber.id / kWarpSize, fiber.id % kWarpSize, message);
  fiber.waiting = Waiting::kReturned;
  yield();
  std::abort();  // never reached: a failed fiber is not resumed
}

// A switch at a point where real threads could be overtaken, as often as a coin says.
void maybe_yield() {
  if (((*g_block->random)() & 1u) != 0) yield();
}

size_t shared_offset(const void* address, size_t bytes, size_t alignment, const char* what) {
  const auto at = reinterpret_cast<uintptr_t>(address), base = reinterpret_cast<uintptr_t>(g_block->shared);
  if (at < base || at + bytes > base + g_block->shared_bytes) {
    fail(fmt::format("{} of {} bytes at {} is outside the block's {} bytes of shared memory", what, bytes,
                     static_cast<long long>(at - base), g_block->shared_bytes));
  }
  if (at % alignment != 0) {
    fail(fmt::format("{} at shared offset {} is not {}-byte aligned", what, at - base, alignment));
  }
  return at - base;
}

bool same_warp_synced(int other, int64_t other_warp_epoch, int me) {
  return other / kWarpSize == me / kWarpSize && g_block->warps[me / kWarpSize].epoch > other_warp_epoch;
}

// Checks and records a read of shared bytes [offset, offset + bytes) by thread `me`.
void record_read(size_t offset, size_t bytes, int me, const char* what) {
  const int64_t warp_epoch = g_block->warps[me / kWarpSize].epoch;
  for (size_t at = offset; at < offset + bytes; ++at) {
    ByteRecord& byte = g_block->records[at];
    if (byte.state == ByteState::kNeverWritten) {
      fail(fmt::format("{} reads shared offset {}, which nothing has written", what, at));
    }
    if (byte.state == ByteState::kPending) {
      fail(
          fmt::format("{} reads shared offset {} before the cp.async of thread {} writing it has landed "
                      "(cp.async.wait_group)",
                      what, at, byte.writer));
    }
    if (byte.write_epoch == g_block->epoch && byte.writer != me &&
        !same_warp_synced(byte.writer, byte.writer_warp_epoch, me)) {
      fail(
          fmt::format("{} reads shared offset {}, written by thread {} in the same barrier interval (a race: "
                      "no __syncthreads between them)",
                      what, at, byte.writer));
    }
    if (byte.read_epoch == g_block->epoch && byte.reader != me) {
      byte.reader = -2;
    } else {
      byte.reader = me;
    }
    byte.read_epoch = g_block->epoch;
    byte.reader_warp_epoch = warp_epoch;
  }
}

// Checks a write by thread `me` to shared bytes [offset, offset + bytes) about to be issued.
void check_write(size_t offset, size_t bytes, int me, const char* what) {
  for (size_t at = offset; at < offset + bytes; ++at) {
    const ByteRecord& byte = g_block->records[at];
    if (byte.state == ByteState::kPending) {
      fail(fmt::format("{} to shared offset {} while a cp.async of thread {} to it is in flight", what, at,
                       byte.writer));
    }
    if (byte.write_epoch == g_block->epoch && byte.writer != me &&
        !same_warp_synced(byte.writer, byte.writer_warp_epoch, me)) {
      fail(fmt::format("{} to shared offset {}, which thread {} wrote in the same barrier interval", what, at,
                       byte.writer));
    }
    if (byte.read_epoch == g_block->epoch && byte.reader != me &&
        (byte.reader == -2 || !same_warp_synced(byte.reader, byte.reader_warp_epoch, me))) {
      fail(fmt::format(
          "{} to shared offset {}, which {} read in the same barrier interval (a race: no "
          "__syncthreads between them)",
          what, at, byte.reader == -2 ? std::string("other threads") : fmt::format("thread {}", byte.reader)));
    }
  }
}

void land(const PendingCopy& copy, int me) {
  std::memcpy(copy.destination, copy.data, 16);
  const size_t offset = static_cast<size_t>(copy.destination - g_block->shared);
  const int64_t warp_epoch = g_block->warps[me / kWarpSize].epoch;
  for (size_t at = offset; at < offset + 16; ++at) {
    ByteRecord& byte = g_block->records[at];
    byte.state = ByteState::kWritten;
    byte.writer = me;
    byte.write_epoch = g_block->epoch;
    byte.writer_warp_epoch = warp_epoch;
  }
}

// ---- the warp-wide instructions ----

float bits_to_float(uint16_t bits, bool float16) {
  return float16 ? float(Float16::from_bits(bits)) : float(BFloat16::from_bits(bits));
}
uint16_t low(uint32_t pair) { return static_cast<uint16_t>(pair & 0xffffu); }
uint16_t high(uint32_t pair) { return static_cast<uint16_t>(pair >> 16); }

// D = A B + C for one m16n8k16 product, gathered from and scattered to the lanes by the PTX
// ISA's fragment layouts (groupID g = lane / 4, threadID_in_group t = lane % 4):
//   A (16 x 16): register 0 holds (g, 2t), (g, 2t + 1); 1: rows g + 8; 2: columns + 8; 3: both;
//   B (16 x 8, k x n): register 0 holds (2t, g), (2t + 1, g); 1: rows + 8;
//   C, D (16 x 8): c0, c1 at (g, 2t), (g, 2t + 1); c2, c3 at row g + 8.
// The lower 16 bits of a register hold the element of lower column (A) or row (B) index.
// For m16n8k8 with TF32 operands (one element a register):
//   A (16 x 8): register 0 holds (g, t); 1: row g + 8; 2: column t + 4; 3: both;
//   B (8 x 8): register 0 holds (t, g); 1: row t + 4; C and D as above.
// A TF32 operand is a float whose lower 13 bits the tensor cores ignore; ember's kernels round
// every operand to TF32 first (cvt.rna.tf32.f32), so one with those bits set is reported: it
// would be a value the kernel forgot to round.
void run_mma(WarpState& warp) {
  const int variant = warp.lanes[0].variant;
  const bool float16 = variant == 1, tf32 = variant == 2;
  const int depth = tf32 ? 8 : 16;
  double a[16][16], b[16][8], c[16][8];
  auto tf32_value = [&](uint32_t bits, int lane) {
    if ((bits & 0x1FFFu) != 0) {
      fail(fmt::format("mma.sync.m16n8k8.tf32: lane {} passes {:#010x}, a float not rounded to TF32", lane, bits));
    }
    float value = 0;
    std::memcpy(&value, &bits, 4);
    return double(value);
  };
  for (int lane = 0; lane < kWarpSize; ++lane) {
    const LaneSlot& slot = warp.lanes[lane];
    const int g = lane / 4, t = lane % 4;
    for (int reg = 0; reg < 4; ++reg) {
      if (tf32) {
        a[g + (reg % 2) * 8][t + (reg / 2) * 4] = tf32_value(slot.a[reg], lane);
        continue;
      }
      const int row = g + (reg % 2) * 8, col = 2 * t + (reg / 2) * 8;
      a[row][col] = bits_to_float(low(slot.a[reg]), float16);
      a[row][col + 1] = bits_to_float(high(slot.a[reg]), float16);
    }
    for (int reg = 0; reg < 2; ++reg) {
      if (tf32) {
        b[t + reg * 4][g] = tf32_value(slot.b[reg], lane);
        continue;
      }
      const int k = 2 * t + reg * 8;
      b[k][g] = bits_to_float(low(slot.b[reg]), float16);
      b[k + 1][g] = bits_to_float(high(slot.b[reg]), float16);
    }
    for (int e = 0; e < 4; ++e) c[g + (e / 2) * 8][2 * t + e % 2] = slot.c[e];
  }
  for (int lane = 0; lane < kWarpSize; ++lane) {
    LaneSlot& slot = warp.lanes[lane];
    const int g = lane / 4, t = lane % 4;
    for (int e = 0; e < 4; ++e) {
      const int row = g + (e / 2) * 8, col = 2 * t + e % 2;
      double sum = c[row][col];
      for (int k = 0; k < depth; ++k) sum += a[row][k] * b[k][col];
      slot.d[e] = static_cast<float>(sum);
    }
  }
}

// ldmatrix: matrix m (of 1, 2 or 4) is the 8 rows of 8 16-bit elements at the addresses lanes
// 8m .. 8m + 7 give. Lane l receives, in register m, elements (l / 4, 2 (l % 4)) and
// (l / 4, 2 (l % 4) + 1) of matrix m, or with .trans those of its transpose.
void run_ldmatrix(WarpState& warp, int warp_index) {
  const int matrices = warp.lanes[0].variant / 2;
  const bool transposed = warp.lanes[0].variant % 2 == 1;
  uint16_t element[4][8][8];
  for (int m = 0; m < matrices; ++m) {
    for (int row = 0; row < 8; ++row) {
      const int lane = 8 * m + row;
      const unsigned char* address = warp.lanes[lane].address;
      const int thread = warp_index * kWarpSize + lane;
      const size_t offset = shared_offset(address, 16, 16, "ldmatrix row");
      record_read(offset, 16, thread, "ldmatrix");
      std::memcpy(element[m][row], address, 16);
    }
  }
  for (int lane = 0; lane < kWarpSize; ++lane) {
    const int row = lane / 4, col = 2 * (lane % 4);
    for (int m = 0; m < matrices; ++m) {
      const uint16_t first = transposed ? element[m][col][row] : element[m][row][col];
      const uint16_t second = transposed ? element[m][col + 1][row] : element[m][row][col + 1];
      warp.lanes[lane].r[m] = uint32_t(first) | (uint32_t(second) << 16);
    }
  }
}

// Every lane of the calling thread's warp takes part in one instruction: the slot's inputs are
// set by the caller; the last lane to arrive runs it for all; each lane reads its outputs after.
LaneSlot& arrive(Collective kind, int variant) {
  Fiber& fiber = current(collective_name(kind));
  WarpState& warp = g_block->warps[fiber.id / kWarpSize];
  LaneSlot& slot = warp.lanes[fiber.id % kWarpSize];
  slot.kind = kind;
  slot.variant = variant;
  return slot;
}

void complete(Collective kind) {
  Fiber& fiber = *g_current;
  const int warp_index = fiber.id / kWarpSize;
  WarpState& warp = g_block->warps[warp_index];
  fiber.waiting = Waiting::kWarp;
  if (++warp.arrived == kWarpSize) {
    for (int lane = 0; lane < kWarpSize; ++lane) {
      if (warp.lanes[lane].kind != kind || warp.lanes[lane].variant != warp.lanes[0].variant) {
        fail(fmt::format("warp {} diverged: lane {} is at {} while lane {} is at {} (another form of it)", warp_index,
                         lane, collective_name(warp.lanes[lane].kind), fiber.id % kWarpSize, collective_name(kind)));
      }
    }
    switch (kind) {
      case Collective::kSyncWarp:
        ++warp.epoch;
        break;
      case Collective::kShuffle:
        for (int lane = 0; lane < kWarpSize; ++lane) {
          const int source = lane ^ warp.lanes[lane].lane_mask;
          warp.lanes[lane].shuffled = source < kWarpSize ? warp.lanes[source].value : warp.lanes[lane].value;
        }
        break;
      case Collective::kMma:
        run_mma(warp);
        break;
      case Collective::kLdmatrix:
        run_ldmatrix(warp, warp_index);
        break;
    }
    warp.arrived = 0;
    for (int lane = 0; lane < kWarpSize; ++lane) {
      Fiber& mate = (*g_block->fibers)[warp_index * kWarpSize + lane];
      if (mate.waiting == Waiting::kWarp) mate.waiting = Waiting::kNothing;
    }
  }
  yield();
}

void fiber_entry() {
  Fiber& fiber = *g_current;
  (*g_body)();
  if (!fiber.copies.empty()) fail(fmt::format("returned with {} cp.async not yet landed", fiber.copies.size()));
  fiber.waiting = Waiting::kReturned;
  // Returning resumes the scheduler (uc_link).
}

// Why no thread can go on, when some have not returned.
std::string stall_reason(const std::vector<Fiber>& fibers) {
  int at_barrier = 0, returned = 0, first_at_warp = -1;
  for (const Fiber& fiber : fibers) {
    if (fiber.waiting == Waiting::kBarrier) ++at_barrier;
    if (fiber.waiting == Waiting::kReturned) ++returned;
    if (fiber.waiting == Waiting::kWarp && first_at_warp < 0) first_at_warp = fiber.id;
  }
  if (first_at_warp >= 0) {
    const WarpState& warp = g_block->warps[first_at_warp / kWarpSize];
    return fmt::format("thread {} waits at {} for lanes of its warp that never reach it ({} of 32 arrived)",
                       first_at_warp, collective_name(warp.lanes[first_at_warp % kWarpSize].kind), warp.arrived);
  }
  return fmt::format(
      "{} threads wait at __syncthreads while {} have returned: every thread of the block must "
      "reach each __syncthreads",
      at_barrier, returned);
}

void run_block(Block& block, std::vector<Fiber>& fibers, std::vector<std::unique_ptr<char[]>>& stacks) {
  g_block = &block;
  for (size_t i = 0; i < fibers.size(); ++i) {
    Fiber& fiber = fibers[i];
    fiber = Fiber{};
    fiber.id = static_cast<int>(i);
    getcontext(&fiber.context);
    fiber.context.uc_stack.ss_sp = stacks[i].get();
    fiber.context.uc_stack.ss_size = kStackBytes;
    fiber.context.uc_link = &g_scheduler;
    makecontext(&fiber.context, fiber_entry, 0);
  }
  std::vector<int> runnable;
  for (;;) {
    runnable.clear();
    bool all_returned = true;
    for (const Fiber& fiber : fibers) {
      if (fiber.waiting == Waiting::kNothing) runnable.push_back(fiber.id);
      if (fiber.waiting != Waiting::kReturned) all_returned = false;
    }
    if (all_returned) break;
    if (runnable.empty()) {
      g_current = nullptr;
      throw std::runtime_error(fmt::format("cuda_emulation: block ({}, {}, {}) is stuck: {}", block.index.x,
                                           block.index.y, block.index.z, stall_reason(fibers)));
    }
    g_current = &fibers[runnable[(*block.random)() % runnable.size()]];
    swapcontext(&g_scheduler, &g_current->context);
    if (!block.error.empty()) {
      g_current = nullptr;
      throw std::runtime_error("cuda_emulation: " + block.error);
    }
  }
  g_current = nullptr;
}

}  // namespace

dim3 thread_index() {
  const Fiber& fiber = current("threadIdx");
  const dim3 dim = g_block->dim;
  const unsigned int id = static_cast<unsigned int>(fiber.id);
  return dim3(id % dim.x, (id / dim.x) % dim.y, id / (dim.x * dim.y));
}
dim3 block_index() {
  current("blockIdx");
  return g_block->index;
}
dim3 block_dim() {
  current("blockDim");
  return g_block->dim;
}
dim3 grid_dim() {
  current("gridDim");
  return g_block->grid;
}

unsigned char* dynamic_shared_memory() {
  current("dynamic shared memory");
  return g_block->shared;
}

void sync_threads() {
  Fiber& fiber = current("__syncthreads");
  ++g_counts.barriers;
  fiber.waiting = Waiting::kBarrier;
  if (++g_block->barrier_arrived == static_cast<int>(g_block->fibers->size())) {
    g_block->barrier_arrived = 0;
    ++g_block->epoch;
    for (Fiber& other : *g_block->fibers) {
      if (other.waiting == Waiting::kBarrier) other.waiting = Waiting::kNothing;
    }
  }
  yield();
}

void sync_warp(unsigned int mask) {
  current("__syncwarp");
  if (mask != kFullMask) fail("__syncwarp with a partial mask is not emulated");
  arrive(Collective::kSyncWarp, 0);
  complete(Collective::kSyncWarp);
}

float shuffle_xor(unsigned int mask, float value, int lane_mask) {
  current("__shfl_xor_sync");
  if (mask != kFullMask) fail("__shfl_xor_sync with a partial mask is not emulated");
  ++g_counts.shuffles;
  LaneSlot& slot = arrive(Collective::kShuffle, 0);
  slot.value = value;
  slot.lane_mask = lane_mask;
  complete(Collective::kShuffle);
  return slot.shuffled;
}

float atomic_add(float* address, float value) {
  current("atomicAdd");
  const float old = *address;
  *address = old + value;
  maybe_yield();
  return old;
}

void register_global_region(const void* begin, size_t bytes) {
  g_regions.emplace_back(static_cast<const unsigned char*>(begin), bytes);
}
void clear_global_regions() { g_regions.clear(); }

LaunchCounts last_launch_counts() { return g_counts; }

void launch(dim3 grid, dim3 block_shape, size_t shared_bytes, const std::function<void()>& thread_body,
            uint64_t interleaving_seed) {
  const size_t threads = size_t(block_shape.x) * block_shape.y * block_shape.z;
  if (threads == 0 || threads % kWarpSize != 0 || threads > 1024) {
    throw std::runtime_error(
        fmt::format("cuda_emulation: a block of {} threads (the emulation runs whole warps, "
                    "up to 1024 threads)",
                    threads));
  }
  g_counts = LaunchCounts{};
  g_body = &thread_body;
  std::mt19937_64 random(interleaving_seed);
  std::vector<std::unique_ptr<char[]>> stacks;
  for (size_t i = 0; i < threads; ++i) stacks.push_back(std::make_unique<char[]>(kStackBytes));
  std::vector<Fiber> fibers(threads);
  std::vector<unsigned char> storage(shared_bytes + kSharedAlignment);
  const auto base = reinterpret_cast<uintptr_t>(storage.data());
  unsigned char* shared = storage.data() + (kSharedAlignment - base % kSharedAlignment) % kSharedAlignment;
  // Whatever happens, the next launch (or a call outside one) finds no block current.
  struct Reset {
    ~Reset() {
      g_block = nullptr;
      g_current = nullptr;
      g_body = nullptr;
    }
  } reset;
  for (unsigned int z = 0; z < grid.z; ++z) {
    for (unsigned int y = 0; y < grid.y; ++y) {
      for (unsigned int x = 0; x < grid.x; ++x) {
        Block block;
        block.index = dim3(x, y, z);
        block.dim = block_shape;
        block.grid = grid;
        block.shared = shared;
        block.shared_bytes = shared_bytes;
        // Shared memory starts as garbage on a GPU: a pattern here, and any read of it an error.
        std::memset(shared, 0xA5, shared_bytes);
        block.records.assign(shared_bytes, ByteRecord{});
        block.fibers = &fibers;
        block.warps.assign(threads / kWarpSize, WarpState{});
        block.random = &random;
        run_block(block, fibers, stacks);
      }
    }
  }
}

}  // namespace ember::cuda_emulation

namespace ember::cuda {

using cuda_emulation::g_block;
using cuda_emulation::g_counts;

namespace {
// variant 0: bf16 operands, 1: f16.
void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], const float (&c)[4], int variant) {
  cuda_emulation::current("mma.sync");
  ++g_counts.mma;
  cuda_emulation::LaneSlot& slot = cuda_emulation::arrive(cuda_emulation::Collective::kMma, variant);
  std::copy(a, a + 4, slot.a);
  std::copy(b, b + 2, slot.b);
  std::copy(c, c + 4, slot.c);
  cuda_emulation::complete(cuda_emulation::Collective::kMma);
  std::copy(slot.d, slot.d + 4, d);
}
}  // namespace

void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], const float (&c)[4]) {
  mma(d, a, b, c, 0);
}
void mma_m16n8k16_f16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], const float (&c)[4]) {
  mma(d, a, b, c, 1);
}
void mma_m16n8k8_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], const float (&c)[4]) {
  mma(d, a, b, c, 2);
}

namespace {
template <int Matrices>
void ldmatrix(uint32_t (&r)[Matrices], const void* row, bool transposed) {
  cuda_emulation::current("ldmatrix");
  ++g_counts.ldmatrix;
  cuda_emulation::LaneSlot& slot =
      cuda_emulation::arrive(cuda_emulation::Collective::kLdmatrix, Matrices * 2 + (transposed ? 1 : 0));
  slot.address = static_cast<const unsigned char*>(row);
  cuda_emulation::complete(cuda_emulation::Collective::kLdmatrix);
  std::copy(slot.r, slot.r + Matrices, r);
}
}  // namespace

void ldmatrix_x1(uint32_t (&r)[1], const void* row, bool transposed) { ldmatrix<1>(r, row, transposed); }
void ldmatrix_x2(uint32_t (&r)[2], const void* row, bool transposed) { ldmatrix<2>(r, row, transposed); }
void ldmatrix_x4(uint32_t (&r)[4], const void* row, bool transposed) { ldmatrix<4>(r, row, transposed); }

void cp_async_16(void* shared, const void* global, int source_bytes) {
  cuda_emulation::Fiber& fiber = cuda_emulation::current("cp.async");
  ++g_counts.cp_async;
  if (source_bytes < 0 || source_bytes > 16) {
    cuda_emulation::fail(fmt::format("cp.async of {} source bytes (0 to 16)", source_bytes));
  }
  const size_t offset = cuda_emulation::shared_offset(shared, 16, 16, "cp.async destination");
  cuda_emulation::PendingCopy copy;
  copy.destination = static_cast<unsigned char*>(shared);
  if (source_bytes > 0) {
    const auto* source = static_cast<const unsigned char*>(global);
    if (reinterpret_cast<uintptr_t>(source) % 16 != 0) {
      cuda_emulation::fail("cp.async source is not 16-byte aligned");
    }
    if (!cuda_emulation::g_regions.empty()) {
      const bool inside =
          std::any_of(cuda_emulation::g_regions.begin(), cuda_emulation::g_regions.end(), [&](const auto& region) {
            return source >= region.first && source + source_bytes <= region.first + region.second;
          });
      if (!inside)
        cuda_emulation::fail(fmt::format("cp.async reads {} bytes outside every global buffer", source_bytes));
    }
    std::memcpy(copy.data, source, static_cast<size_t>(source_bytes));
  }
  cuda_emulation::check_write(offset, 16, fiber.id, "cp.async");
  for (size_t at = offset; at < offset + 16; ++at) {
    cuda_emulation::ByteRecord& byte = g_block->records[at];
    byte.state = cuda_emulation::ByteState::kPending;
    byte.writer = fiber.id;
  }
  std::memset(shared, 0xFF, 16);  // poisoned until it lands
  fiber.copies.push_back(copy);
  cuda_emulation::maybe_yield();
}

void store_shared_32(void* shared, uint32_t value) {
  cuda_emulation::Fiber& fiber = cuda_emulation::current("shared store");
  const size_t offset = cuda_emulation::shared_offset(shared, 4, 4, "shared store");
  cuda_emulation::check_write(offset, 4, fiber.id, "shared store");
  std::memcpy(shared, &value, 4);
  const int64_t warp_epoch = g_block->warps[fiber.id / cuda_emulation::kWarpSize].epoch;
  for (size_t at = offset; at < offset + 4; ++at) {
    cuda_emulation::ByteRecord& byte = g_block->records[at];
    byte.state = cuda_emulation::ByteState::kWritten;
    byte.writer = fiber.id;
    byte.write_epoch = g_block->epoch;
    byte.writer_warp_epoch = warp_epoch;
  }
  cuda_emulation::maybe_yield();
}

uint32_t load_shared_32(const void* shared) {
  cuda_emulation::Fiber& fiber = cuda_emulation::current("shared load");
  const size_t offset = cuda_emulation::shared_offset(shared, 4, 4, "shared load");
  cuda_emulation::record_read(offset, 4, fiber.id, "shared load");
  uint32_t value = 0;
  std::memcpy(&value, shared, 4);
  cuda_emulation::maybe_yield();
  return value;
}

void cp_async_commit() {
  cuda_emulation::Fiber& fiber = cuda_emulation::current("cp.async.commit_group");
  bool any = false;
  for (auto& copy : fiber.copies) {
    if (copy.group < 0) {
      copy.group = fiber.committed_groups;
      any = true;
    }
  }
  (void)any;  // an empty group is legal PTX, and counts as a group
  ++fiber.committed_groups;
}

void cp_async_wait_pending(int pending) {
  cuda_emulation::Fiber& fiber = cuda_emulation::current("cp.async.wait_group");
  const int64_t landed_below = fiber.committed_groups - pending;
  std::vector<cuda_emulation::PendingCopy> still;
  for (const auto& copy : fiber.copies) {
    if (copy.group >= 0 && copy.group < landed_below) {
      cuda_emulation::land(copy, fiber.id);
    } else {
      still.push_back(copy);
    }
  }
  fiber.copies = std::move(still);
  cuda_emulation::maybe_yield();
}

}  // namespace ember::cuda
