// Kernel bodies of the two-sided device tests (twosided_test.cpp): receives posted and
// completed by the threads of a grid. Plain GDAKI_HD functions: the tests run them on CPU
// threads through the host grid launcher and device_kernels_check.cu compiles them as
// __global__ kernels for sm_90. They record results in host-visible logs, never assert.
#pragma once

#include <cstdint>

#include "gdaki/device/twosided.hpp"

namespace device_test {

struct recv_grid_args {
  gdaki::dev::qp_handle* qp;  // the receiving QP
  uint64_t buf;               // thread t receives into [buf + t * slot, + slot)
  uint32_t lkey;
  uint32_t slot;
  uint64_t* log;              // per thread, 4 words: post status, wait status, index, byte count
};

GDAKI_HD inline uint32_t recv_grid_thread() {
  namespace arch = gdaki::dev::arch;
  return arch::block_rank_in_grid() * arch::threads_in_block() + arch::thread_rank_in_block();
}

// Every thread posts one receive into its own slot (in whatever order the threads run).
GDAKI_HD inline void post_receives_kernel(const recv_grid_args& a) {
  const uint32_t t = recv_grid_thread();
  a.log[4 * t] = static_cast<uint64_t>(
      gdaki::dev::recv_post(*a.qp, {a.buf + uint64_t{t} * a.slot, a.lkey}, a.slot));
}

// Every thread posts `per_thread` receives, slot t * per_thread + j for its j-th, racing
// the other threads for RQ slots; logs the first failing status (ok when all went in).
GDAKI_HD inline void post_many_receives_kernel(const recv_grid_args& a, uint32_t per_thread) {
  const uint32_t t = recv_grid_thread();
  auto st = gdaki::status::ok;
  for (uint32_t j = 0; j < per_thread && st == gdaki::status::ok; ++j) {
    const uint64_t s = uint64_t{t} * per_thread + j;
    st = gdaki::dev::recv_post(*a.qp, {a.buf + s * a.slot, a.lkey}, a.slot);
  }
  a.log[4 * t] = static_cast<uint64_t>(st);
}

// Every thread takes one receive completion (whichever comes: completions are claimed, not
// assigned) and logs which receive it was and how many bytes it carried.
GDAKI_HD inline void wait_receives_kernel(const recv_grid_args& a, uint64_t timeout_ns) {
  const uint32_t t = recv_grid_thread();
  gdaki::dev::recv_completion c{};
  a.log[4 * t + 1] = static_cast<uint64_t>(gdaki::dev::recv_wait(*a.qp, &c, timeout_ns));
  a.log[4 * t + 2] = c.index;
  a.log[4 * t + 3] = c.byte_cnt;
}

struct srq_grid_args {
  gdaki::dev::srq_handle* srq;  // shared by both receiving QPs
  gdaki::dev::qp_handle* qp[2];  // even threads complete on qp[0], odd ones on qp[1]
  uint64_t buf;                  // thread t posts [buf + t * slot, + slot)
  uint32_t lkey;
  uint32_t slot;
  uint64_t* log;  // per thread, 5 words: post status, SRQ index posted, wait status, index, byte count
};

// Every thread posts one receive into its own slot to the SRQ and logs the WQE it used.
GDAKI_HD inline void post_srq_receives_kernel(const srq_grid_args& a) {
  const uint32_t t = recv_grid_thread();
  uint32_t index = ~0u;
  a.log[5 * t] = static_cast<uint64_t>(
      gdaki::dev::recv_post(*a.srq, {a.buf + uint64_t{t} * a.slot, a.lkey}, a.slot, &index));
  a.log[5 * t + 1] = index;
}

// Every thread takes one receive completion of its QP (the SRQ's WQE goes back to the
// free list as it does) and logs which WQE it was and how many bytes it carried.
GDAKI_HD inline void wait_srq_receives_kernel(const srq_grid_args& a, uint64_t timeout_ns) {
  const uint32_t t = recv_grid_thread();
  gdaki::dev::recv_completion c{};
  a.log[5 * t + 2] = static_cast<uint64_t>(gdaki::dev::recv_wait(*a.qp[t & 1], &c, timeout_ns));
  a.log[5 * t + 3] = c.index;
  a.log[5 * t + 4] = c.byte_cnt;
}

// Lane-parallel SENDs at warp scope: lane l sends `bytes` from src + l * bytes, with the
// lane number as immediate; skip_lane (or none: ~0u) posts nothing.
GDAKI_HD inline void warp_send_kernel(gdaki::dev::qp_handle* qp, uint64_t src, uint32_t lkey, uint32_t bytes,
                                      uint32_t skip_lane, uint64_t* log) {
  namespace dev = gdaki::dev;
  const uint32_t lane = dev::arch::lane_id();
  uint64_t ticket = 0;
  const gdaki::status posted = dev::send_imm<dev::scope_warp, dev::sharing::grid>(
      *qp, {src + uint64_t{lane} * bytes, lkey}, bytes, lane, &ticket,
      lane == skip_lane ? dev::op_flags::skip : dev::op_flags::none);
  log[2 * lane] = static_cast<uint64_t>(posted);
  log[2 * lane + 1] = static_cast<uint64_t>(posted == gdaki::status::ok ? dev::wait(*qp, ticket) : posted);
}

}  // namespace device_test
