// Kernel bodies of the DMA-queue tests: plain GDAKI_HD functions that the tests run on CPU
// threads through the host grid launcher and dma_kernels_check.cu compiles inside
// __global__ kernels for sm_90. They never assert: statuses go to a host-visible log.
#pragma once

#include <cstdint>

#include "gdaki/device/dma.hpp"

namespace dma_test {

namespace dev = gdaki::dev;
namespace arch = gdaki::dev::arch;

struct slices_args {
  dev::qp_handle* queue;
  uint64_t dst, src;  // each thread copies slice [t * slice, (t + 1) * slice)
  uint32_t dst_key, src_key;
  uint32_t slice;
  uint64_t* log;  // per thread: post status, wait status
};

// Every thread of the grid copies its own slice through one grid-shared queue, at scope
// Scope (warp / block: one reservation and one doorbell per warp or block), then waits
// for its own ticket.
template <typename Scope>
GDAKI_HD inline void copy_slices_kernel(const slices_args& a) {
  const uint32_t t = arch::block_rank_in_grid() * arch::threads_in_block() + arch::thread_rank_in_block();
  const uint64_t off = uint64_t{t} * a.slice;
  uint64_t ticket = 0;
  const gdaki::status posted =
      dev::dma_memcpy<Scope, dev::sharing::grid>(*a.queue, a.dst + off, a.dst_key, a.src + off, a.src_key, a.slice,
                                                 &ticket);
  a.log[2 * t] = static_cast<uint64_t>(posted);
  a.log[2 * t + 1] = static_cast<uint64_t>(posted == gdaki::status::ok ? dev::dma_wait(*a.queue, ticket)
                                                                        : gdaki::status::invalid);
}

}  // namespace dma_test
