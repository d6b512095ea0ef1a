// Polling mlx5 CQEs. A CQE at free-running position p lives in slot p & (N-1) and carries
// owner bit (p >> log2 N) & 1; the poller at ci accepts it when the opcode is not INVALID
// and the owner bit matches (PRM 5.4). Several threads may poll one CQ: each reads the
// CQE, then claims it by compare-and-swap on ci, so exactly one thread consumes it.
#pragma once

#include <cstdint>

#include "gdaki/config.hpp"
#include "gdaki/device/arch.hpp"
#include "gdaki/device/handles.hpp"
#include "gdaki/status.hpp"

namespace gdaki::dev {

// A decoded completion, in host order.
struct completion {
  prm::cqe_opcode opcode;   // REQ, RESP_*, REQ_ERR, RESP_ERR
  prm::syndrome syndrome;   // none unless opcode is an error
  uint8_t vendor_syndrome;
  uint8_t wqe_opcode;       // REQ / REQ_ERR: opcode of the completed send WQE
  uint16_t wqe_counter;     // REQ: first WQEBB of the WQE; RESP: receive WQE index
  uint32_t byte_cnt;
  uint32_t imm_raw;         // immediate bytes exactly as on the wire
  uint32_t qpn;             // local QPN
  uint32_t src_qpn;         // RESP: remote QPN
  bool solicited;
  GDAKI_HD bool ok() const { return syndrome == prm::syndrome::none; }
};

// The 32-bit word at CQE bytes 60..63 (wqe_counter, signature, op_own), the unit the NIC
// publishes with one release store. op_own is its top byte on a little-endian machine.
GDAKI_HD GDAKI_FORCEINLINE uint32_t cqe_tail_word(const prm::cqe64* cqe);

// Returns whether the CQE at position ci has been written (owner bit and opcode check).
GDAKI_HD GDAKI_FORCEINLINE bool cqe_ready(const cq_handle& cq, uint64_t ci, uint32_t* tail_out);

// Reads that a poller makes before its claim (the CAS on ci) and discards when the claim
// fails: another poller may have taken that CQE and the NIC re-filled its slot meanwhile,
// so these reads may overlap the NIC's writes by design. ThreadSanitizer is told to skip
// them (found under TSan: sq_concurrency.many_threads_share_one_sq_..., a CQE body read
// by a poller whose claim then failed, overlapping the test NIC's next-lap write).
#if defined(__SANITIZE_THREAD__) && !defined(__CUDACC__)
#define GDAKI_SPECULATIVE_READ __attribute__((no_sanitize("thread")))
#else
#define GDAKI_SPECULATIVE_READ
#endif

// Decodes a CQE whose tail word `tail` was acquired. Called before the claim: see
// GDAKI_SPECULATIVE_READ.
GDAKI_HD GDAKI_SPECULATIVE_READ inline void decode_cqe(const prm::cqe64* cqe, uint32_t tail, completion* out);

// Tells the NIC how many CQEs the pollers have claimed: writes the claimed count to the CQ
// doorbell record's 24-bit consumer index (PRM 5.5), never moving it backwards. Safe from
// many pollers at once: one publishes at a time, and a poller that finds another one
// publishing leaves at once (the other publishes its claim too). Every successful claim
// calls it (cq_poll_one, recv_poll); the protocol is described in impl/cq.hpp.
GDAKI_HD inline void cq_publish_ci(cq_handle& cq);

// Consumes the next CQE if one is there. On success fills *out and *position (the CQE's
// free-running index) and returns ok; returns again when the CQ is empty. Safe to call
// from many threads at once. Before claiming the CQE the caller's `peek` callback sees it
// (used by the SQ poller to read the WQE size while the slot is guaranteed unchanged).
template <typename Peek>
GDAKI_HD inline status cq_poll_one(cq_handle& cq, completion* out, uint64_t* position, Peek& peek);

// The peek that looks at nothing (callers that need only the completion).
struct no_peek {
  GDAKI_HD void operator()(const completion&) {}
};

// cq_poll_one without a peek. Returns ok (*out filled) or again.
GDAKI_HD inline status cq_poll_one(cq_handle& cq, completion* out);

}  // namespace gdaki::dev

#include "gdaki/device/impl/cq.hpp"  // the definitions of the functions declared above
