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
GDAKI_HD GDAKI_FORCEINLINE uint32_t cqe_tail_word(const prm::cqe64* cqe) {
  return arch::load_acquire(reinterpret_cast<const uint32_t*>(reinterpret_cast<const uint8_t*>(cqe) + 60));
}

// Returns whether the CQE at position ci has been written (owner bit and opcode check).
GDAKI_HD GDAKI_FORCEINLINE bool cqe_ready(const cq_handle& cq, uint64_t ci, uint32_t* tail_out) {
  const prm::cqe64* cqe = cq.cqes + (ci & (cqe_count(cq) - 1));
  const uint32_t tail = cqe_tail_word(cqe);
  const uint8_t op_own = static_cast<uint8_t>(tail >> 24);
  const uint8_t expected_owner = static_cast<uint8_t>((ci >> cq.log_cqe_cnt) & 1);
  *tail_out = tail;
  if (prm::cqe_opcode_of(op_own) == prm::cqe_opcode::invalid || (op_own & prm::cqe_owner_mask) != expected_owner) {
    return false;
  }
  // The NIC wrote the CQE body (and the data it reports) by DMA before the owner word: on
  // a weakly ordered host the acquire load orders CPU-visible stores, the read barrier
  // device writes (rdma-core's udma_from_device_barrier after the owner check; a compiler
  // barrier on x86, dmb oshld on aarch64).
  arch::fence_from_device();
  return true;
}

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
GDAKI_HD GDAKI_SPECULATIVE_READ inline void decode_cqe(const prm::cqe64* cqe, uint32_t tail, completion* out) {
  const uint8_t op_own = static_cast<uint8_t>(tail >> 24);
  out->opcode = prm::cqe_opcode_of(op_own);
  out->solicited = (op_own & prm::cqe_se_mask) != 0;
  out->wqe_counter = prm::from_be(prm::be16{static_cast<uint16_t>(tail & 0xffff)});
  if (prm::cqe_is_error(out->opcode)) {
    const auto* e = reinterpret_cast<const prm::err_cqe*>(cqe);
    out->syndrome = static_cast<prm::syndrome>(e->syndrome);
    out->vendor_syndrome = e->vendor_err_synd;
    const uint32_t w = prm::from_be(e->s_wqe_opcode_qpn);
    out->wqe_opcode = static_cast<uint8_t>(w >> 24);
    out->qpn = w & 0xffffff;
    out->byte_cnt = 0;
    out->imm_raw = 0;
    out->src_qpn = 0;
  } else {
    const uint32_t w = prm::from_be(cqe->sop_drop_qpn);
    out->syndrome = prm::syndrome::none;
    out->vendor_syndrome = 0;
    out->wqe_opcode = static_cast<uint8_t>(w >> 24);
    out->qpn = w & 0xffffff;
    out->byte_cnt = prm::from_be(cqe->byte_cnt);
    out->imm_raw = cqe->imm_inval_pkey;
    out->src_qpn = prm::from_be(cqe->flags_rqpn) & 0xffffff;
  }
}

// Tells the NIC that every CQE below `next` has been read: the CQ doorbell record's
// 24-bit consumer index (PRM 5.5), which a NIC without overrun-ignore compares with its
// producer index. It must never move backwards: on hardware a smaller value reads as
// "the poller has not made room" and the next CQE overruns the CQ. Concurrent pollers
// claim CQEs in order but may publish out of order (a poller descheduled between its
// claim and this store), so the store is a compare-and-swap that only moves forward
// (wrap-safe in 24 bits: positions differ by less than a CQ, at most 2^22 entries).
// (Fix: this was a plain store; a late poller moved set_ci back: core_cq_ci.*, tests/core.)
GDAKI_HD inline void cq_publish_ci(cq_handle& cq, uint64_t next) {
  const uint32_t want = static_cast<uint32_t>(next) & prm::cq_ci_mask;
  uint32_t* word = &cq.dbrec->set_ci.raw;
  uint32_t cur = arch::load_relaxed(word);
  for (;;) {
    const uint32_t have = prm::from_be(prm::be32{cur}) & prm::cq_ci_mask;
    const uint32_t ahead = (want - have) & prm::cq_ci_mask;  // how far `want` is past `have`
    if (ahead == 0 || ahead > (prm::cq_ci_mask >> 1)) return;  // already there or further
    const uint32_t desired = prm::to_be32(want).raw;
    if (arch::compare_swap(word, cur, desired)) return;
    cur = arch::load_relaxed(word);
  }
}

// Consumes the next CQE if one is there. On success fills *out and *position (the CQE's
// free-running index) and returns ok; returns again when the CQ is empty. Safe to call
// from many threads at once. Before claiming the CQE the caller's `peek` callback sees it
// (used by the SQ poller to read the WQE size while the slot is guaranteed unchanged).
template <typename Peek>
GDAKI_HD inline status cq_poll_one(cq_handle& cq, completion* out, uint64_t* position, Peek& peek) {
  for (;;) {
    const uint64_t ci = arch::local::load_acquire(&cq.ci);
    uint32_t tail;
    if (!cqe_ready(cq, ci, &tail)) return status::again;
    const prm::cqe64* cqe = cq.cqes + (ci & (cqe_count(cq) - 1));
    decode_cqe(cqe, tail, out);
    peek(*out);
    if (arch::local::compare_swap(&cq.ci, ci, ci + 1)) {
      cq_publish_ci(cq, ci + 1);
      *position = ci;
      return status::ok;
    }
    // Another thread consumed it first; look again.
  }
}

struct no_peek {
  GDAKI_HD void operator()(const completion&) {}
};

GDAKI_HD inline status cq_poll_one(cq_handle& cq, completion* out) {
  uint64_t pos;
  no_peek peek;
  return cq_poll_one(cq, out, &pos, peek);
}

}  // namespace gdaki::dev
