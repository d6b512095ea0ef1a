// Definitions for gdaki/device/dma.hpp: each DMA call is a name for an ops.hpp call.
// Internal: not to be included directly; include gdaki/device/dma.hpp, which includes
// this file at its end. Declarations, contracts and default arguments live there.
#pragma once

#include <cstdint>

namespace gdaki::dev {

template <typename Scope, sharing S>
GDAKI_HD inline status dma_memcpy(qp_handle& queue, uint64_t dst, uint32_t dst_key, uint64_t src, uint32_t src_key,
                                  uint64_t bytes, uint64_t* ticket, uint32_t flags, uint64_t timeout_ns) {
  return put<Scope, S>(queue, remote_ptr{dst, dst_key}, local_ptr{src, src_key}, bytes, ticket, flags, timeout_ns);
}

GDAKI_HD inline status dma_test(qp_handle& queue, uint64_t ticket) { return test(queue, ticket); }

GDAKI_HD inline status dma_wait(qp_handle& queue, uint64_t ticket, uint64_t timeout_ns) {
  return wait(queue, ticket, timeout_ns);
}

template <typename Scope, sharing S>
GDAKI_HD inline status dma_quiet(qp_handle& queue, uint64_t timeout_ns) {
  return quiet<Scope, S>(queue, timeout_ns);
}

GDAKI_HD inline op_error dma_last_error(const qp_handle& queue) { return last_error(queue); }

}  // namespace gdaki::dev
