// Definitions for gdaki/device/cq.hpp: CQE readiness, decoding, claiming, and the
// consumer-index publication protocol.
// Internal: not to be included directly; include gdaki/device/cq.hpp, which includes
// this file at its end. Declarations, contracts and default arguments live there.
#pragma once

#include <cstdint>

namespace gdaki::dev {

GDAKI_HD GDAKI_FORCEINLINE uint32_t cqe_tail_word(const prm::cqe64* cqe) {
  return arch::load_acquire(reinterpret_cast<const uint32_t*>(reinterpret_cast<const uint8_t*>(cqe) + 60));
}

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

// Tells the NIC how many CQEs the pollers have claimed: the CQ doorbell record's 24-bit
// consumer index (PRM 5.5), which a NIC without overrun-ignore compares with its producer
// index. It must never move backwards: on hardware a smaller value reads as "the poller
// has not made room" and the next CQE overruns the CQ (hazard 5; core_cq_ci.*).
// Concurrent pollers claim CQEs in order but would publish out of order, so one poller at
// a time publishes, under a combining try-lock that only the pollers touch (local scope:
// beside `ci`, in GPU memory for GPU pollers), with a plain store of the claimed count.
// Stores under the lock are of a count that only grows, so set_ci only moves forward, and
// no read-modify-write crosses to the record (for a GPU poller and a host-pinned record a
// compare-and-swap there was a PCIe round trip per CQE; the store is a posted write). A
// poller that finds the lock taken does not store: the holder publishes its claim too,
// through the same Dekker hand-off as sq_submit's db_lock (the claimer stores ci, fences,
// reads the lock; the holder stores the unlock, fences, re-reads ci). But the poller
// returns only once its claim is in set_ci (ci_published, which the holder stores after
// set_ci, covers it), or takes the lock itself when it comes free: its caller frees the
// claimed CQE's SQ slots next, and a WQE posted into them must not give the NIC a CQE that
// set_ci leaves no room for. A holder that stalls (a descheduled CPU thread) therefore
// stalls the pollers behind it instead of letting them overrun the CQ.
// (Fixes: a plain store by each poller moved set_ci back; then a forward-only CAS on the
// record itself cost a PCIe atomic per CQE on a GPU; then pollers that left at once let
// the poster run ahead of set_ci while a holder stalled, and the checking NIC overran the
// CQ: core_cq_ci.a_poller_returns_only_once_its_claim_is_published_...)
namespace detail {

// Under publish_lock: stores the count claimed so far into set_ci when it moved since the
// last store, and returns it (>= every earlier store: ci only grows).
GDAKI_HD inline uint64_t cq_store_claimed(cq_handle& cq) {
  const uint64_t claimed = arch::local::load_acquire(&cq.ci);
  if (claimed != arch::local::load_relaxed(&cq.ci_published)) {
    arch::store_release(&cq.dbrec->set_ci.raw, prm::to_be32(static_cast<uint32_t>(claimed) & prm::cq_ci_mask).raw);
    arch::local::store_release(&cq.ci_published, claimed);  // after set_ci: waiting pollers read it
  }
  return claimed;
}

// Releases publish_lock; returns true when claims arrived after `stored` was read, whose
// pollers may have found the lock taken and left: the caller must go round again.
GDAKI_HD inline bool cq_unlock_and_recheck(cq_handle& cq, uint64_t stored) {
  arch::local::store_release(&cq.publish_lock, 0u);
  arch::local::fence_full();  // the unlock before the re-read of ci
  return arch::local::load_acquire(&cq.ci) != stored;
}

}  // namespace detail

GDAKI_HD inline void cq_publish_ci(cq_handle& cq) {
  arch::local::fence_full();  // our claim before our read of the lock
  const uint64_t mine = arch::local::load_acquire(&cq.ci);  // covers our claim
  for (uint32_t i = 0;; ++i) {
    if (arch::local::compare_swap(&cq.publish_lock, 0u, 1u)) {
      // Ours is published by the first store; go round while claims arrive whose pollers
      // found the lock taken, unless one of them has taken it since.
      while (detail::cq_unlock_and_recheck(cq, detail::cq_store_claimed(cq))) {
        if (!arch::local::compare_swap(&cq.publish_lock, 0u, 1u)) return;
      }
      return;
    }
    if (arch::local::load_acquire(&cq.ci_published) >= mine) return;  // the holder published ours
    arch::spin_pause(i);
  }
}

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
      cq_publish_ci(cq);
      *position = ci;
      return status::ok;
    }
    // Another thread consumed it first; look again.
  }
}

GDAKI_HD inline status cq_poll_one(cq_handle& cq, completion* out) {
  uint64_t pos;
  no_peek peek;
  return cq_poll_one(cq, out, &pos, peek);
}

}  // namespace gdaki::dev
