// The kernels of the GPU scenario program (gpu_scenarios.cu): each one drives the public
// device API (gdaki/device/ops.hpp) from real CUDA threads and leaves its statuses in a
// kernel_report in GPU memory (the host copies it back once the kernel has finished, so
// no word is written by both the GPU and the CPU). Every operation and wait carries a
// timeout, so a stuck queue shows up as a status, not a hang.
#pragma once

#include <cstdint>

#include "gdaki/device/arch.hpp"
#include "gdaki/device/ops.hpp"

namespace gdaki::gpu_test {

inline constexpr uint64_t op_timeout_ns = 3'000'000'000ull;

// Byte offsets of each scenario's area in the target buffer (and in the source buffer).
namespace area {
inline constexpr uint64_t put = 0;              // 4096 B put, then read back by the get
inline constexpr uint64_t inline_word = 8192;   // p: 8 inline bytes
inline constexpr uint64_t put_signal = 16384;   // 512 B of put_signal data
inline constexpr uint64_t signal_word = 20480;  // its signal word
inline constexpr uint64_t atomic_word = 24576;  // fetch-add, then compare-swap
inline constexpr uint64_t warp = 32768;         // 32 lanes x 64 B
inline constexpr uint64_t grid = 65536;         // threads x 16 slots x 8 B
inline constexpr uint64_t rate = 262144;        // 1024 slots of 8 B, reused round robin
inline constexpr uint32_t rate_slots = 1024;
}  // namespace area

struct kernel_report {
  uint32_t status[16];    // ops kernel: one status per step, in order
  uint32_t steps;         // ops kernel: steps run
  uint64_t fetched[2];    // ops kernel: fetch-add and compare-swap old values
  uint32_t non_ok;        // bulk kernels: how many calls did not return ok
  uint32_t first_non_ok;  // the first such status
  uint64_t t_begin, t_end;  // put-rate kernels: GPU global timer around the posting loop
};

__device__ inline void note(kernel_report* r, status s) {
  if (s != status::ok && atomicAdd(&r->non_ok, 1u) == 0) r->first_non_ok = static_cast<uint32_t>(s);
}

// 1. Every operation at thread scope, one thread, each waited for.
__global__ void ops_kernel(dev::qp_handle* qp, dev::local_ptr src, dev::remote_ptr dst, dev::local_ptr result,
                           kernel_report* r) {
  using namespace dev;
  uint64_t t = 0;
  uint32_t i = 0;
  const auto step = [&](status s) { r->status[i++] = static_cast<uint32_t>(s); };
  step(put<scope_thread, sharing::exclusive>(*qp, {dst.addr + area::put, dst.rkey}, src, 4096, &t, 0, op_timeout_ns));
  step(wait(*qp, t, op_timeout_ns));
  const uint64_t v = 0x1122334455667788ull;
  step(p<scope_thread, sharing::exclusive>(*qp, {dst.addr + area::inline_word, dst.rkey}, &v, 8, &t, 0,
                                           op_timeout_ns));
  step(put_signal<scope_thread, sharing::exclusive>(*qp, {dst.addr + area::put_signal, dst.rkey},
                                                    {src.addr + area::put_signal, src.lkey}, 512,
                                                    {dst.addr + area::signal_word, dst.rkey}, signal_op::add, 5, &t,
                                                    0, op_timeout_ns));
  step(wait(*qp, t, op_timeout_ns));
  step(get<scope_thread, sharing::exclusive>(*qp, {result.addr + 4096, result.lkey}, {dst.addr + area::put, dst.rkey},
                                             4096, &t, 0, op_timeout_ns));
  step(wait(*qp, t, op_timeout_ns));
  step(atomic_fetch_add<scope_thread, sharing::exclusive>(*qp, {dst.addr + area::atomic_word, dst.rkey}, 7, result,
                                                          &t, 0, op_timeout_ns));
  step(wait(*qp, t, op_timeout_ns));
  r->fetched[0] = *reinterpret_cast<volatile uint64_t*>(result.addr);
  step(atomic_compare_swap<scope_thread, sharing::exclusive>(*qp, {dst.addr + area::atomic_word, dst.rkey}, 1007,
                                                             42, {result.addr + 8, result.lkey}, &t, 0,
                                                             op_timeout_ns));
  step(wait(*qp, t, op_timeout_ns));
  r->fetched[1] = *reinterpret_cast<volatile uint64_t*>(result.addr + 8);
  step(quiet<scope_thread, sharing::exclusive>(*qp, op_timeout_ns));
  r->steps = i;
}

// 2. One warp at warp scope: each lane puts 64 B to its own slot; lane 0 quiets.
__global__ void warp_put_kernel(dev::qp_handle* qp, dev::local_ptr src, dev::remote_ptr dst, kernel_report* r) {
  using namespace dev;
  const uint32_t lane = threadIdx.x;
  uint64_t t = 0;
  note(r, put<scope_warp, sharing::exclusive>(*qp, {dst.addr + area::warp + lane * 64, dst.rkey},
                                              {src.addr + area::warp + lane * 64, src.lkey}, 64, &t, 0,
                                              op_timeout_ns));
  __syncwarp();
  if (lane == 0) note(r, quiet<scope_thread, sharing::exclusive>(*qp, op_timeout_ns));
}

// The value grid thread `tid` writes to its slot `i` (never 0, so an unwritten slot shows).
__host__ __device__ constexpr uint64_t grid_value(uint64_t tid, uint32_t i) { return (tid << 32) | (i + 1); }

// 3. One QP shared by the whole grid: every thread posts `per` inline 8 B puts to its own
// slots, waiting for its ticket every 4 and at the end.
__global__ void grid_shared_kernel(dev::qp_handle* qp, dev::remote_ptr dst, uint32_t per, kernel_report* r) {
  using namespace dev;
  const uint64_t tid = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  uint64_t t = 0;
  for (uint32_t i = 0; i < per; ++i) {
    const uint64_t v = grid_value(tid, i);
    const status s = p<scope_thread, sharing::grid>(*qp, {dst.addr + area::grid + (tid * per + i) * 8, dst.rkey}, &v,
                                                    8, &t, 0, op_timeout_ns);
    note(r, s);
    if (s != status::ok) return;
    if ((i & 3) == 3) note(r, wait(*qp, t, op_timeout_ns));
  }
  note(r, wait(*qp, t, op_timeout_ns));
}

// 4. Put rate: blockDim.x lanes (1 = one thread at thread scope, 32 = one warp at warp
// scope) post n puts of 8 B from registered memory in total, round robin over the rate
// area; a CQE for every `signal_every`-th round, the others unsignalled; then a quiet.
template <typename Scope>
__global__ void put_rate_kernel(dev::qp_handle* qp, dev::local_ptr src, dev::remote_ptr dst, uint32_t n,
                                uint32_t signal_every, kernel_report* r) {
  using namespace dev;
  const uint32_t lane = threadIdx.x, lanes = blockDim.x;
  uint64_t t = 0;
  if (lane == 0) r->t_begin = arch::clock_ns();
  for (uint32_t i = 0; i < n; i += lanes) {
    const uint64_t off = uint64_t{(i + lane) % area::rate_slots} * 8;
    const uint32_t round = i / lanes;
    const uint32_t flags = round % signal_every == signal_every - 1 ? op_flags::none : op_flags::unsignaled;
    const status s = put<Scope, sharing::exclusive>(*qp, {dst.addr + area::rate + off, dst.rkey},
                                                    {src.addr + area::rate + off, src.lkey}, 8, &t, flags,
                                                    op_timeout_ns);
    if (s != status::ok) {
      note(r, s);
      break;
    }
  }
  __syncwarp();
  if (lane == 0) {
    note(r, quiet<scope_thread, sharing::exclusive>(*qp, op_timeout_ns));
    r->t_end = arch::clock_ns();
  }
}

}  // namespace gdaki::gpu_test
