// Two-sided verbs for kernel authors (and CPU threads): SEND and SEND with immediate posted
// on the send queue, receives posted and completed by the thread itself. The SEND calls
// take the scope, sharing, flags, timeout and ticket rules of ops.hpp; the receive calls
// are thread-scope (any number of threads may post and poll one QP's receive queue).
//
// Receive completions come from the QP's receive CQ, one per consumed receive WQE, in
// posting order (PRM 4). A QP created with qp_init::scatter_to_cqe gets payloads of 1..32
// bytes inside the CQE (PRM 5.1 format 1, MLX5_INLINE_SCATTER_32); recv_poll copies them
// into the posted buffers, as rdma-core's poller does, and also hands them back in the
// completion so a kernel can use them without reading its buffer.
//
// Direct backend only: the proxy's descriptors have no SEND (send/send_imm return
// not_supported on a proxy handle).
#pragma once

#include <cstdint>
#include <type_traits>

#include "gdaki/config.hpp"
#include "gdaki/device/arch.hpp"
#include "gdaki/device/cq.hpp"
#include "gdaki/device/handles.hpp"
#include "gdaki/device/ops.hpp"
#include "gdaki/device/ring.hpp"
#include "gdaki/device/sq.hpp"
#include "gdaki/device/wqe.hpp"
#include "gdaki/prm/cqe.hpp"
#include "gdaki/prm/wqe.hpp"
#include "gdaki/status.hpp"

namespace gdaki::dev {

// SEND of `bytes` (<= max_message_bytes; 0 sends an empty message) from local `src`: the
// peer's next receive WQE takes it (RNR retries while it has none: rnr_retry then
// RNR_RETRY_EXC_ERR; a receive too short: REMOTE_INVAL_REQ here, LOCAL_LENGTH there).
// flags: op_flags (fence, unsignaled, skip). Returns ok, invalid (bytes too large),
// not_supported (proxy handle) or timeout (no ring space within timeout_ns).
template <typename Scope = scope_thread, sharing S = sharing::grid>
GDAKI_HD inline status send(qp_handle& qp, local_ptr src, uint64_t bytes, uint64_t* ticket,
                            uint32_t flags = op_flags::none, uint64_t timeout_ns = wait_forever);

// SEND with immediate: as send, and the receiver's completion carries `imm_raw` (4 bytes
// exactly as on the wire: the receiver reads the same bytes back).
template <typename Scope = scope_thread, sharing S = sharing::grid>
GDAKI_HD inline status send_imm(qp_handle& qp, local_ptr src, uint64_t bytes, uint32_t imm_raw, uint64_t* ticket,
                                uint32_t flags = op_flags::none, uint64_t timeout_ns = wait_forever);

// SEND of len <= qp.max_inline bytes copied into the WQE (no registration; `data` may be
// reused on return), with an immediate when has_imm. Returns as send.
template <typename Scope = scope_thread, sharing S = sharing::grid>
GDAKI_HD inline status send_inline(qp_handle& qp, const void* data, uint32_t len, bool has_imm, uint32_t imm_raw,
                                   uint64_t* ticket, uint32_t flags = op_flags::none,
                                   uint64_t timeout_ns = wait_forever);

// Posts one receive of [dst.addr, dst.addr + bytes) (LOCAL_WRITE registration); 0 bytes
// posts a zero-capacity receive (it absorbs an empty SEND or a WRITE_IMM). Thread-safe.
// Returns ok, again (the RQ holds as many receives as it has slots) or invalid (the QP
// receives from an SRQ: post to the SRQ instead).
GDAKI_HD inline status recv_post(qp_handle& qp, local_ptr dst, uint32_t bytes);

// Posts one receive of [dst.addr, dst.addr + bytes) to a shared receive queue: the next
// message to arrive on any QP bound to it (created with qp_init::srq) takes it. *index
// (if not null) receives the SRQ WQE used, which its completion reports as `index`.
// Thread-safe (srq_post). Returns ok, again (max_wr receives outstanding) or invalid.
GDAKI_HD inline status recv_post(srq_handle& srq, local_ptr dst, uint32_t bytes, uint32_t* index = nullptr);

// One receive completion, decoded.
struct recv_completion {
  prm::cqe_opcode opcode;   // resp_send, resp_send_imm, resp_wr_imm, resp_send_inv; resp_err on error
  prm::syndrome syndrome;   // none, or why it failed (local_length, local_prot, wr_flush, ...)
  uint32_t byte_cnt;        // payload bytes (WRITE_IMM: the RDMA length)
  bool has_imm;             // imm_raw is the sender's immediate
  uint32_t imm_raw;         // 4 bytes exactly as on the wire
  bool solicited;           // the sender set SE
  uint32_t src_qpn;         // sender's QPN (meaningless when the payload in the CQE exceeds 24 B:
                            // it covers CQE bytes 24..27, as on a ConnectX)
  uint64_t index;           // which receive: the index-th posted on this QP (free-running);
                            // on an SRQ, the SRQ WQE it used (recv_post's *index)
  bool payload_in_cqe;      // scatter-to-CQE: the payload arrived in the CQE (and was copied
                            // into the posted buffer by recv_poll)
  uint8_t payload[prm::cqe_inline_scatter_max];  // its bytes when payload_in_cqe
};

// Consumes the next receive completion of qp, if there is one; on a QP bound to an SRQ
// the receive's WQE then goes back on the SRQ's free list (srq_free), so a kernel that
// still needs its buffer must not post it again before. Returns ok (a successful
// receive: *out filled, payload in its buffer), io_error (a receive completed in error:
// *out filled, out->syndrome says why; the QP is in ERR) or again (none yet). Safe from
// many threads at once: each completion goes to exactly one caller.
GDAKI_HD inline status recv_poll(qp_handle& qp, recv_completion* out);

// Waits for the next receive completion (recv_poll) at most timeout_ns (wait_forever =
// no limit). Returns ok, io_error (as recv_poll) or timeout.
GDAKI_HD inline status recv_wait(qp_handle& qp, recv_completion* out, uint64_t timeout_ns = wait_forever);

}  // namespace gdaki::dev

#include "gdaki/device/impl/twosided.hpp"  // the definitions of the functions declared above
