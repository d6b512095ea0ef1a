// Definitions for gdaki/device/sq.hpp: CQE consumption, reservation, in-order ready
// publication, the doorbell (detail::publish_ready) and the receive queue.
// Internal: not to be included directly; include gdaki/device/sq.hpp, which includes
// this file at its end. Declarations, contracts and default arguments live there.
#pragma once

#include <cstdint>

namespace gdaki::dev {

namespace detail {
// Reads the size of the WQE a send CQE names, while the CQE is not yet claimed (so the
// WQE's slot can not have been reused).
//
// The read is speculative, seqlock style: if another poller claims this CQE first, the
// slot may be re-filled by a poster while we read it, and the value is discarded when our
// claim (the CAS on ci) fails; when the claim succeeds nobody can have claimed this or a
// later CQE, so the slot was not reused and the value is right. The discarded reads race
// with the poster's plain WQE stores by design, so ThreadSanitizer is told to skip this
// one function (found by the device tests under TSan: tests/device).
// (GDAKI_SPECULATIVE_READ: cq.hpp.)
struct wqe_size_peek {
  const qp_handle* qp;
  uint64_t first = 0;
  uint32_t nbb = 1;
  GDAKI_HD GDAKI_SPECULATIVE_READ void operator()(const completion& c) {
    // Widened against sq_ready, which every WQE the NIC can have run lies below: ready is
    // released before the doorbell record that exposes those WQEs, and the CQE (acquired
    // by the caller) is written after the NIC read that record. (Fix: this used sq_rung,
    // which the submitter stores only AFTER the doorbell record; a CQE for the second WQE
    // of a batch arriving in between widened 65,536 WQEBBs back and was lost or, worse,
    // settled every ticket: core_widening.*, tests/core.)
    first = widen16(arch::local::load_acquire(&qp->sq_ready), c.wqe_counter);
    const auto* ctrl = reinterpret_cast<const prm::ctrl_seg*>(
        qp->sq_buf + ((first & (sq_wqebbs(*qp) - 1)) << prm::wqebb_shift));
    nbb = prm::wqebbs_for_ds(prm::from_be(ctrl->qpn_ds) & 0x3f);
    if (nbb == 0) nbb = 1;
  }
};
}  // namespace detail

GDAKI_HD inline status sq_poll(qp_handle& qp, completion* out) {
  detail::wqe_size_peek peek{&qp};
  uint64_t pos = 0;
  status st = cq_poll_one(*qp.send_cq, out, &pos, peek);
#if !defined(__CUDA_ARCH__)
  if (st == status::again && qp.host_poll_hook != nullptr) {
    qp.host_poll_hook(qp.host_hook_ctx);  // may write CQEs (a CPU thread drives the NIC)
    st = cq_poll_one(*qp.send_cq, out, &pos, peek);
  }
#endif
  const uint64_t first = peek.first;
  const uint32_t nbb = peek.nbb;
  if (st != status::ok) return st;
  if (!out->ok()) {
    // The lowest failing WQE wins, with its own syndrome, in one word.
    const uint64_t mine = err_pack(first, out->syndrome);
    uint64_t cur = arch::local::load_acquire(&qp.err_state);
    bool won = false;
    while (first < err_index_of(cur) && !(won = arch::local::compare_swap(&qp.err_state, cur, mine))) {
      cur = arch::local::load_acquire(&qp.err_state);
    }
    if (won) arch::local::store_relaxed(&qp.err_vendor_syndrome, out->vendor_syndrome);
  }
  arch::local::fetch_max(&qp.sq_completed, first + nbb);
  return status::ok;
}

GDAKI_HD inline uint32_t sq_progress(qp_handle& qp) {
  completion c;
  uint32_t n = 0;
  while (sq_poll(qp, &c) == status::ok) ++n;
  return n;
}

GDAKI_HD inline status sq_test(qp_handle& qp, uint64_t ticket) {
  if (arch::local::load_acquire(&qp.sq_completed) < ticket) {
    // Polls only until the ticket is settled, not until the CQ is empty: the draining
    // poll that finds nothing cost a second CQ look and, on a CPU thread, a call into the
    // NIC's poll hook on every test that had just found its CQE.
    completion c;
    while (arch::local::load_acquire(&qp.sq_completed) < ticket && sq_poll(qp, &c) == status::ok) {
    }
    if (arch::local::load_acquire(&qp.sq_completed) < ticket) {
      // An error CQE names the failing WQE; in ERR the rest are flushed one CQE each, so
      // a ticket behind the failure is settled as an error even before its flush arrives.
      return err_index_of(arch::local::load_acquire(&qp.err_state)) < ticket ? status::io_error : status::again;
    }
  }
  return err_index_of(arch::local::load_acquire(&qp.err_state)) < ticket ? status::io_error : status::ok;
}

namespace detail {
// Calls test() until it answers something other than `again`, or timeout_ns has passed
// (wait_forever: never), pausing between tries: every *_wait of the API is this loop.
// The bound counts from the first try that answered `again`: a wait whose first try
// succeeds reads no clock (a CPU thread's clock read took ~24 ns where it was measured,
// docs/performance.md).
template <typename Test>
GDAKI_HD inline status poll_until(Test test, uint64_t timeout_ns) {
  uint64_t t0 = 0;
  for (uint32_t i = 0;; ++i) {
    const status st = test();
    if (st != status::again) return st;
    if (timeout_ns != wait_forever) {
      const uint64_t now = arch::clock_ns();
      if (i == 0) t0 = now;
      if (now - t0 >= timeout_ns) return status::timeout;
    }
    arch::spin_pause(i);
  }
}
}  // namespace detail

GDAKI_HD inline status sq_wait(qp_handle& qp, uint64_t ticket, uint64_t timeout_ns) {
  return detail::poll_until([&] { return sq_test(qp, ticket); }, timeout_ns);
}

namespace detail {
// A poster waiting for ring space may wait on WQEs that were posted with op_flags::defer
// and never rung (its own, or another thread's): it rings them. Through the combining
// lock even on an exclusive QP: this waiter is then the QP's only poster, so the lock is
// free, and on a shared QP it is the protocol every poster follows. Only on the slow
// path (the ring full), so the lock costs nothing on the posts that find room.
GDAKI_HD inline void ring_deferred(qp_handle& qp) {
  if (arch::local::load_acquire(&qp.sq_ready) != arch::local::load_relaxed(&qp.sq_rung)) sq_submit<true>(qp);
}
}  // namespace detail

GDAKI_HD GDAKI_FORCEINLINE uint64_t sq_reserve(qp_handle& qp, uint32_t nbb) {
  return arch::local::fetch_add(&qp.sq_reserved, nbb);
}

namespace detail {
// sq_wait_space once the ring is full: polls (and rings deferred WQEs) until completed
// reaches `need`. Out of line: the room check before it is all that most posts run.
GDAKI_HD GDAKI_NOINLINE status wait_space_slow(qp_handle& qp, uint64_t need, uint64_t timeout_ns) {
  const uint64_t t0 = timeout_ns == wait_forever ? 0 : arch::clock_ns();
  for (uint32_t i = 0; arch::local::load_acquire(&qp.sq_completed) < need; ++i) {
    if (sq_progress(qp) != 0) continue;
    detail::ring_deferred(qp);
    if (timeout_ns != wait_forever && arch::clock_ns() - t0 >= timeout_ns) return status::timeout;
    arch::spin_pause(i);
  }
  return status::ok;
}
}  // namespace detail

GDAKI_HD GDAKI_FORCEINLINE status sq_wait_space(qp_handle& qp, uint64_t start, uint32_t nbb, uint64_t timeout_ns) {
  const uint64_t need = start + nbb - sq_wqebbs(qp);  // completed must reach this
  if (start + nbb <= sq_wqebbs(qp) || arch::local::load_acquire(&qp.sq_completed) >= need) return status::ok;
  return detail::wait_space_slow(qp, need, timeout_ns);
}

namespace detail {
// The sole poster's reservation: room seen stays ours, so a plain store takes it. Forced
// inline: it is a few instructions on every post, and a call cost ~30 more (callgrind).
GDAKI_HD GDAKI_FORCEINLINE status reserve_exclusive(qp_handle& qp, uint32_t nbb, uint64_t* start, uint64_t timeout_ns) {
  const uint64_t cur = arch::local::load_relaxed(&qp.sq_reserved);
  const status st = sq_wait_space(qp, cur, nbb, timeout_ns);
  if (st != status::ok) return st;
  arch::local::store_relaxed(&qp.sq_reserved, cur + nbb);
  *start = cur;
  return status::ok;
}
}  // namespace detail

template <bool Exclusive>
GDAKI_HD inline status sq_reserve_space(qp_handle& qp, uint32_t nbb, uint64_t* start, uint64_t timeout_ns) {
  if constexpr (Exclusive) {
    return detail::reserve_exclusive(qp, nbb, start, timeout_ns);
  } else {
    if (timeout_ns == wait_forever) {
      *start = sq_reserve(qp, nbb);
      return sq_wait_space(qp, *start, nbb);
    }
    const uint64_t ring = sq_wqebbs(qp);
    const uint64_t t0 = arch::clock_ns();
    for (uint32_t i = 0;; ++i) {
      const uint64_t cur = arch::local::load_relaxed(&qp.sq_reserved);
      if (cur + nbb <= ring + arch::local::load_acquire(&qp.sq_completed)) {
        if (arch::local::compare_swap(&qp.sq_reserved, cur, cur + nbb)) {
          *start = cur;
          return status::ok;
        }
        continue;  // another poster took it first: look again
      }
      if (sq_progress(qp) != 0) continue;
      detail::ring_deferred(qp);
      if (arch::clock_ns() - t0 >= timeout_ns) return status::timeout;
      arch::spin_pause(i);
    }
  }
}

GDAKI_HD inline status sq_acquire(qp_handle& qp, uint32_t nbb, uint64_t* start, uint64_t timeout_ns) {
  *start = 0;  // defined on every path, so callers never read an indeterminate value
  if (nbb == 0 || nbb > qp.max_send_wqebbs || nbb > sq_wqebbs(qp)) return status::invalid;
  return sq_reserve_space(qp, nbb, start, timeout_ns);
}

GDAKI_HD inline void sq_mark_ready(qp_handle& qp, uint64_t start, uint32_t nbb) {
  for (uint32_t i = 0; arch::local::load_acquire(&qp.sq_ready) != start; ++i) arch::spin_pause(i);
  // Release: the WQE bytes written by this thread happen-before the new ready value, so
  // whichever thread rings for it (after an acquire of ready) publishes complete WQEs.
  arch::local::store_release(&qp.sq_ready, start + nbb);
}

namespace detail {
// The synthetic doorbell word DOCA / NVSHMEM write: ctrl bytes 0..7 with wqe_index = pc,
// opcode 0, DS 0 (PRM 3.2). As a little-endian 64-bit store the first BE32 is the low half.
GDAKI_HD constexpr uint64_t doorbell_word(uint32_t qpn, uint64_t pc) {
  return static_cast<uint64_t>(prm::to_be32(static_cast<uint32_t>(pc & 0xffff) << 8).raw) |
         (static_cast<uint64_t>(prm::to_be32(qpn << 8).raw) << 32);
}

// Takes the doorbell lock if it is free; never waits (sq_submit's combining protocol).
GDAKI_HD inline bool try_lock(uint32_t* l) { return arch::local::compare_swap(l, 0u, 1u); }
GDAKI_HD inline void unlock(uint32_t* l) { arch::local::store_release(l, 0u); }

// BlueFlame: copy the WQE that starts at `first` (64-byte chunks, wrapping at the ring
// end) into the BF register with 8-byte stores. The WQE is also in the ring, so a NIC
// that ignores the copy still executes it.
GDAKI_HD inline void blueflame_copy(qp_handle& qp, uint64_t first, uint32_t nbb) {
  for (uint32_t b = 0; b < nbb; ++b) {
    const auto* src = reinterpret_cast<const uint64_t*>(qp.sq_buf + (((first + b) & (sq_wqebbs(qp) - 1)) << 6));
    auto* dst = reinterpret_cast<uint64_t*>(qp.bf_reg + b * 64);
    for (uint32_t w = 0; w < 8; ++w) arch::doorbell_store64(dst + w, src[w]);
  }
}
}  // namespace detail

namespace detail {
// Publishes every ready WQEBB: DBR[snd] = ready, then the doorbell (unless the QP is in
// CPU-assisted mode, where a CPU service rings). The caller is the only thread doing this
// on the QP (it holds db_lock, or it is the sole poster). Returns whether it published.
GDAKI_HD inline bool publish_ready(qp_handle& qp) {
  const uint64_t prev = arch::local::load_relaxed(&qp.sq_rung);
  const uint64_t pc = arch::local::load_acquire(&qp.sq_ready);
  if (pc == prev) return false;
  // BlueFlame only: the size of the first new WQE, read BEFORE the DBR store. Until then
  // the NIC cannot have run it, so its slot cannot have been re-filled. (Fix: this used
  // to be read after the DBR store, and in every doorbell mode; by then the NIC may have
  // executed the WQE, another thread polled its CQE and a poster reused the slot: a data
  // race found by the device tests under TSan, and a wrong size for BlueFlame.)
  uint32_t first_nbb = 0;
  if (qp.db_mode == doorbell_mode::blueflame) {
    const auto* ctrl = reinterpret_cast<const prm::ctrl_seg*>(qp.sq_buf + ((prev & (sq_wqebbs(qp) - 1)) << 6));
    first_nbb = prm::wqebbs_for_ds(prm::from_be(ctrl->qpn_ds) & 0x3f);
  }
  // (1) WQE stores (ours, and other threads' via their release of ready and our
  //     acquire above) before the DBR store the NIC acquires.
  arch::fence_to_device();
  arch::store_release(&qp.dbrec->snd.raw, prm::to_be32(static_cast<uint32_t>(pc & 0xffff)).raw);
  arch::local::store_release(&qp.sq_rung, pc);
  if (qp.db_mode != doorbell_mode::cpu_assisted) {
    // (2) DBR store before the MMIO doorbell: a NIC woken by the doorbell reads the DBR.
    arch::fence_before_mmio();
    if (qp.db_mode == doorbell_mode::blueflame && qp.bf_reg != nullptr && prev + first_nbb == pc &&
        first_nbb * 64 <= qp.bf_size) {
      detail::blueflame_copy(qp, prev, first_nbb);  // exactly one WQE: BlueFlame it
      // Drain the write-combined copy inside db_lock, so the next holder's copy to the
      // same register can not merge with ours (rdma-core's mmio_flush_writes after
      // mlx5_bf_copy, under the BF lock).
      arch::fence_after_mmio();
    } else {
      arch::doorbell_store64(qp.uar_db, detail::doorbell_word(qp.qpn, pc));
    }
  }
  return true;
}

// After a doorbell: a provider that executes on the ringing CPU thread (the soft NIC) does
// so now. In cpu_assisted mode (no doorbell here) the service that rings calls it instead
// (proxy/doorbell_service.hpp). Never on the GPU.
GDAKI_HD inline void after_doorbell(qp_handle& qp) {
#if !GDAKI_DEVICE_PASS
  if (qp.host_doorbell_hook != nullptr && qp.db_mode != doorbell_mode::cpu_assisted) {
    qp.host_doorbell_hook(qp.host_hook_ctx);
  }
#else
  (void)qp;
#endif
}
}  // namespace detail

template <bool Shared>
GDAKI_HD inline void sq_submit(qp_handle& qp) {
  if constexpr (!Shared) {
    if (detail::publish_ready(qp)) detail::after_doorbell(qp);
  } else {
    arch::local::fence_full();  // our ready store before our read of the lock
    while (detail::try_lock(&qp.db_lock)) {
      const bool rang = detail::publish_ready(qp);
      detail::unlock(&qp.db_lock);
      if (rang) detail::after_doorbell(qp);
      arch::local::fence_full();  // the unlock before the re-read of ready
      if (arch::local::load_acquire(&qp.sq_ready) == arch::local::load_relaxed(&qp.sq_rung)) break;
    }
  }
}

GDAKI_HD inline uint64_t sq_commit(qp_handle& qp, uint64_t start, uint32_t nbb) {
  sq_mark_ready(qp, start, nbb);
  sq_submit(qp);
  return start + nbb;
}

GDAKI_HD inline status sq_quiet(qp_handle& qp, uint64_t timeout_ns) {
  uint64_t start;
  const status st = sq_acquire(qp, 1, &start, timeout_ns);
  if (st != status::ok) return st;
  prepare_nop(qp, start, prm::ctrl_flags::cq_update);
  return sq_wait(qp, sq_commit(qp, start, 1), timeout_ns);
}

GDAKI_HD inline status rq_poll(qp_handle& qp, completion* out) {
  uint64_t pos;
  no_peek peek;
  const status st = cq_poll_one(*qp.recv_cq, out, &pos, peek);
  if (st != status::ok) return st;
  // A QP on an SRQ: the CQE names the SRQ's WQE, which goes back on its free list.
  if (qp.srq != nullptr) return srq_free(*qp.srq, out->wqe_counter);
  const uint64_t full = widen16(arch::local::load_acquire(&qp.rq_ready), out->wqe_counter);
  arch::local::fetch_max(&qp.rq_completed, full + 1);
  return status::ok;
}

GDAKI_HD inline status rq_post(qp_handle& qp, const sge* sgl, uint32_t num_sge) {
  const uint32_t slots = (1u << qp.log_rq_stride) / 16;
  if (qp.srq != nullptr || num_sge > slots) return status::invalid;  // an SRQ QP has no RQ
  // compare_swap takes the expected value by copy: a poster that loses must read the
  // counter again, or it retries a stale index forever (the grid hang of
  // device_twosided.threads_racing_for_receive_slots_each_get_their_own).
  uint64_t idx;
  for (;;) {
    idx = arch::local::load_acquire(&qp.rq_reserved);
    if (idx - arch::local::load_acquire(&qp.rq_completed) >= rq_wqes(qp)) return status::again;
    if (arch::local::compare_swap(&qp.rq_reserved, idx, idx + 1)) break;
  }
  auto* seg = reinterpret_cast<prm::data_seg*>(qp.rq_buf + ((idx & (rq_wqes(qp) - 1)) << qp.log_rq_stride));
  for (uint32_t i = 0; i < num_sge; ++i) {
    seg[i].byte_count = prm::to_be32(sgl[i].length);
    seg[i].lkey = prm::to_be32(sgl[i].lkey);
    seg[i].addr = prm::to_be64(sgl[i].addr);
  }
  if (num_sge < slots) {  // terminator: a zero-length entry with the invalid lkey
    seg[num_sge].byte_count = prm::to_be32(0);
    seg[num_sge].lkey = prm::to_be32(prm::invalid_lkey);
    seg[num_sge].addr = prm::to_be64(0);
  }
  for (uint32_t i = 0; arch::local::load_acquire(&qp.rq_ready) != idx; ++i) arch::spin_pause(i);
  // Receive WQE bytes before the DBR word that exposes them; the DBR store comes before
  // our release of rq_ready, so the next poster's DBR store is ordered after ours.
  arch::fence_to_device();
  arch::store_release(&qp.dbrec->rcv.raw, prm::to_be32(static_cast<uint32_t>((idx + 1) & 0xffff)).raw);
  arch::local::store_release(&qp.rq_ready, idx + 1);
  return status::ok;
}

namespace detail {

// The SRQ's posting lock: posts and frees are a few stores each, so a spin suffices.
GDAKI_HD inline void srq_lock(srq_handle& srq) {
  for (uint32_t i = 0; !arch::local::compare_swap(&srq.lock, 0u, 1u); ++i) arch::spin_pause(i);
}
GDAKI_HD inline void srq_unlock(srq_handle& srq) { arch::local::store_release(&srq.lock, 0u); }

GDAKI_HD inline uint8_t* srq_wqe(const srq_handle& srq, uint32_t index) {
  return srq.buf + (static_cast<uint64_t>(index & (srq_wqes(srq) - 1)) << srq.log_stride);
}

}  // namespace detail

GDAKI_HD inline status srq_post(srq_handle& srq, const sge* sgl, uint32_t num_sge, uint32_t* index) {
  if (num_sge > srq.max_sge) return status::invalid;
  detail::srq_lock(srq);
  const uint32_t idx = arch::local::load_relaxed(&srq.head);
  if (idx == arch::local::load_relaxed(&srq.tail)) {  // only the kept WQE is free
    detail::srq_unlock(srq);
    return status::again;
  }
  uint8_t* w = detail::srq_wqe(srq, idx);
  // The link of a free WQE other than the tail was written before it became reachable
  // (at creation, or by the srq_free that appended its successor), under this lock.
  const uint32_t next = prm::from_be(reinterpret_cast<const prm::srq_next_seg*>(w)->next_wqe_index);
  auto* seg = reinterpret_cast<prm::data_seg*>(w + sizeof(prm::srq_next_seg));
  for (uint32_t i = 0; i < num_sge; ++i) {
    seg[i].byte_count = prm::to_be32(sgl[i].length);
    seg[i].lkey = prm::to_be32(sgl[i].lkey);
    seg[i].addr = prm::to_be64(sgl[i].addr);
  }
  if (num_sge < srq.max_sge) {  // terminator: a zero-length entry with the invalid lkey
    seg[num_sge].byte_count = prm::to_be32(0);
    seg[num_sge].lkey = prm::to_be32(prm::invalid_lkey);
    seg[num_sge].addr = prm::to_be64(0);
  }
  arch::local::store_relaxed(&srq.head, next & (srq_wqes(srq) - 1));
  const uint64_t posted = arch::local::load_relaxed(&srq.posted) + 1;
  arch::local::store_relaxed(&srq.posted, posted);
  // The WQE's bytes before the DBR word that lets the NIC take it (rdma-core's
  // udma_to_device_barrier in mlx5_post_srq_recv); DBR stores stay in order under the lock.
  arch::fence_to_device();
  arch::store_release(&srq.dbrec->rcv.raw, prm::to_be32(static_cast<uint32_t>(posted & 0xffff)).raw);
  detail::srq_unlock(srq);
  if (index != nullptr) *index = idx;
  return status::ok;
}

GDAKI_HD inline status srq_free(srq_handle& srq, uint32_t index) {
  if (index >= srq_wqes(srq)) return status::invalid;
  detail::srq_lock(srq);
  // The tail is free and not posted, so the NIC never reads its link: appending is safe.
  auto* t = reinterpret_cast<prm::srq_next_seg*>(detail::srq_wqe(srq, arch::local::load_relaxed(&srq.tail)));
  t->next_wqe_index = prm::to_be16(static_cast<uint16_t>(index));
  arch::local::store_relaxed(&srq.tail, index);
  arch::local::store_relaxed(&srq.freed, arch::local::load_relaxed(&srq.freed) + 1);
  detail::srq_unlock(srq);
  return status::ok;
}

}  // namespace gdaki::dev
