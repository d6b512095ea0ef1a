// DMA queue: copies between registered local buffers that a GPU thread (or CPU thread)
// asks the NIC to make, each with a completion. A DMA queue is an RC QP connected to
// itself (verbs::dma_queue, docs/design.md decision 29): a copy is an RDMA WRITE from the
// local source to the local destination through the NIC's loopback, so it is posted,
// rung, executed and completed exactly like a put, with the same checks, the same error
// CQEs and the same tickets. These calls are names for that use of ops.hpp; they add no
// state and no code path of their own.
//
// Keys: `src_key` is the source's lkey (any registration of the queue's PD covering the
// range); `dst_key` is the destination's rkey, and the destination registration must grant
// REMOTE_WRITE (the NIC checks a loopback WRITE as it checks one from the network).
#pragma once

#include <cstdint>

#include "gdaki/config.hpp"
#include "gdaki/device/ops.hpp"

namespace gdaki::dev {

// Copies `bytes` from [src, src + bytes) to [dst, dst + bytes) (both registered, see the
// header comment); copies above max_message_bytes are split into several WQEs, a zero-byte
// copy posts one empty WRITE. `queue` is the exported handle of a verbs::dma_queue. Scope,
// sharing, flags and timeout are those of put (ops.hpp). *ticket settles with
// dma_test / dma_wait once the bytes are in place.
// Returns ok (posted), invalid (more WQEBBs than the ring) or timeout (the queue stayed
// full for timeout_ns; nothing was posted and the queue stays usable).
template <typename Scope = scope_thread, sharing S = sharing::grid>
GDAKI_HD inline status dma_memcpy(qp_handle& queue, uint64_t dst, uint32_t dst_key, uint64_t src, uint32_t src_key,
                                  uint64_t bytes, uint64_t* ticket, uint32_t flags = op_flags::none,
                                  uint64_t timeout_ns = wait_forever);

// Non-blocking check of a copy's ticket. Returns ok (this copy and every earlier one on
// the queue are in place), again (not yet) or io_error (this or an earlier copy failed:
// dma_last_error says why; the queue is in ERR and later copies are flushed).
GDAKI_HD inline status dma_test(qp_handle& queue, uint64_t ticket);

// Waits for a copy's ticket. Returns ok, io_error (as dma_test) or timeout.
GDAKI_HD inline status dma_wait(qp_handle& queue, uint64_t ticket, uint64_t timeout_ns = wait_forever);

// Every copy posted on the queue so far (by any thread) is complete, unsignalled ones
// too. Returns ok, io_error or timeout.
template <typename Scope = scope_thread, sharing S = sharing::grid>
GDAKI_HD inline status dma_quiet(qp_handle& queue, uint64_t timeout_ns = wait_forever);

// The queue's first failure: the CQE syndrome (local_prot for a bad or too short source,
// remote_access for a bad or too short destination) and the failing WQE's first WQEBB.
GDAKI_HD inline op_error dma_last_error(const qp_handle& queue);

}  // namespace gdaki::dev

#include "gdaki/device/impl/dma.hpp"  // the definitions of the functions declared above
