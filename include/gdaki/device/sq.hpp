// Posting on an RC QP: reserve WQEBBs, build WQEs (wqe.hpp), mark them ready in order,
// submit (doorbell record, then doorbell), and learn completions from the send CQ.
//
// Counters (all free-running, in WQEBBs):  completed <= rung <= ready <= reserved.
//   reserved  - handed out by sq_reserve (fetch_add): slots are contiguous, never shared
//   ready     - advanced in reservation order by sq_mark_ready; everything below is written
//   rung      - the highest value written to the DBR and rung; monotone under db_lock
//   completed - learned from CQEs; the poster never reuses a WQEBB at or above it - N
// Memory ordering is documented in docs/memory-ordering.md.
#pragma once

#include <cstdint>

#include "gdaki/config.hpp"
#include "gdaki/device/arch.hpp"
#include "gdaki/device/cq.hpp"
#include "gdaki/device/handles.hpp"
#include "gdaki/device/ring.hpp"
#include "gdaki/device/wqe.hpp"
#include "gdaki/prm/wqe.hpp"
#include "gdaki/status.hpp"

namespace gdaki::dev {

inline constexpr uint64_t wait_forever = ~uint64_t{0};

// ---------------------------------------------------------------------------------------
// Completions of the send queue
// ---------------------------------------------------------------------------------------

// Consumes one CQE of qp's send CQ and advances sq_completed past the WQE it names (the SQ
// completes in order, so that WQE and every earlier one are finished). The WQE's size is
// read from its own control segment, which cannot be reused before the CQE is claimed.
// Error CQEs also latch the first failure (err_state: index and syndrome in one word).
// Returns ok with *out filled, or again when no CQE is waiting.
GDAKI_HD inline status sq_poll(qp_handle& qp, completion* out);

// Drains every waiting send CQE. Returns how many were consumed.
GDAKI_HD inline uint32_t sq_progress(qp_handle& qp);

// Status of the WQEs that end at or before `ticket` (a free-running WQEBB count, as
// returned by the posting calls): ok once the NIC finished them all without error,
// io_error if one of them failed or was flushed, again if not yet complete.
GDAKI_HD inline status sq_test(qp_handle& qp, uint64_t ticket);

// Waits until sq_test(ticket) is not again, or timeout_ns passes (wait_forever = no limit).
// Returns ok, io_error or timeout.
GDAKI_HD inline status sq_wait(qp_handle& qp, uint64_t ticket, uint64_t timeout_ns = wait_forever);

// ---------------------------------------------------------------------------------------
// Reserve, mark ready, submit
// ---------------------------------------------------------------------------------------

// Hands out nbb contiguous WQEBBs (thread-safe). Returns the first one's counter. The
// slots may still hold WQEs the NIC has not finished: call sq_wait_space before writing.
GDAKI_HD GDAKI_FORCEINLINE uint64_t sq_reserve(qp_handle& qp, uint32_t nbb);

// Flow control: waits until WQEBBs [start, start + nbb) no longer hold unfinished WQEs,
// polling the send CQ meanwhile. Returns ok, or timeout (the QP then can not make
// progress: its peer is gone or nothing signalled was posted in a ring's worth of WQEBBs).
GDAKI_HD inline status sq_wait_space(qp_handle& qp, uint64_t start, uint32_t nbb, uint64_t timeout_ns = wait_forever);

// Reserves nbb WQEBBs, waiting at most timeout_ns for them to be free. A reservation can
// not be taken back (every later poster waits in sq_mark_ready for the slots below its
// own), so a wait that can time out must not hold one:
//   - wait_forever, shared: the wait-free fetch_add, then wait for room (cannot abandon);
//   - bounded, shared: compare-and-swap only once the ring has room, so a timeout has
//     reserved nothing and the QP stays usable (core_reservation.*, tests/core);
//   - exclusive (the caller is the QP's only poster): wait for room, then take it with a
//     plain store; nobody else moves sq_reserved, so room seen stays ours.
// A bounded shared wait for a large reservation can lose the room to smaller posters that
// arrive meanwhile; it then times out with nothing reserved (docs/device-api.md).
template <bool Exclusive = false>
GDAKI_HD inline status sq_reserve_space(qp_handle& qp, uint32_t nbb, uint64_t* start, uint64_t timeout_ns);

// Reserve plus flow control in one call: *start receives the first WQEBB. Returns ok,
// invalid (nbb larger than the QP allows) or timeout (then nothing is reserved).
GDAKI_HD inline status sq_acquire(qp_handle& qp, uint32_t nbb, uint64_t* start, uint64_t timeout_ns = wait_forever);

// Declares WQEBBs [start, start + nbb) fully written. Ready advances in reservation
// order, so this waits for every earlier reservation to be marked first: a doorbell can
// then never cover a slot that is still being written.
GDAKI_HD inline void sq_mark_ready(qp_handle& qp, uint64_t start, uint32_t nbb);

// Publishes every ready WQEBB (detail::publish_ready), keeping DBR values and doorbells
// monotone across threads. Shared = false: the caller is the QP's only poster
// (sharing::exclusive), so it publishes directly, with no atomic read-modify-write.
// Shared: a combining lock. Whoever takes db_lock publishes everything ready by then, and
// a poster that finds the lock taken leaves at once: the holder publishes its WQEs too.
// That is what keeps a QP shared by a whole grid from queueing every poster on the lock
// (one doorbell per WQE, serialised: the 8x128 hang of issue 16). The hand-off is a
// Dekker pair: the poster stores ready, fences, reads the lock; the holder stores the
// unlock, fences, re-reads ready and goes round again if it moved. With both fences
// (store->load) at least one of the two sees the other's store, so no ready WQE is left
// unpublished (core_reservation / device shared-QP stress tests, tests/gpu 8x128).
template <bool Shared = true>
GDAKI_HD inline void sq_submit(qp_handle& qp);

// Marks [start, start + nbb) ready and submits. Returns the ticket for sq_wait/sq_test.
GDAKI_HD inline uint64_t sq_commit(qp_handle& qp, uint64_t start, uint32_t nbb);

// Everything posted so far is complete: posts a signalled NOP (the only way to learn the
// fate of unsignalled WQEs) and waits for it. Returns ok, io_error or timeout.
GDAKI_HD inline status sq_quiet(qp_handle& qp, uint64_t timeout_ns = wait_forever);

// ---------------------------------------------------------------------------------------
// Receive queue
// ---------------------------------------------------------------------------------------

// Consumes one receive CQE and retires the receive WQE it names; for a QP on an SRQ,
// out->wqe_counter is the SRQ's WQE index and the WQE returns to the SRQ's free list
// (srq_free). Returns ok or again.
GDAKI_HD inline status rq_poll(qp_handle& qp, completion* out);

// Posts one receive WQE scattering into sgl[0..num_sge). Thread-safe; the RQ doorbell
// record is written in posting order. Returns ok, again (RQ full) or
// invalid (too many entries for the stride, or the QP receives from an SRQ).
GDAKI_HD inline status rq_post(qp_handle& qp, const sge* sgl, uint32_t num_sge);

// ---------------------------------------------------------------------------------------
// Shared receive queue
// ---------------------------------------------------------------------------------------

// Posts one receive WQE scattering into sgl[0..num_sge) on the SRQ: the free WQE at the
// list head is filled, then the doorbell record counts it. Thread-safe (a short spin lock,
// as rdma-core's mlx5_post_srq_recv takes one). Returns ok, again (every WQE but the one
// the list keeps is posted and not yet freed) or invalid (num_sge > srq.max_sge). *index
// (if not null) receives the WQE's index: the wqe_counter of its CQE (rdma-core keys its
// wr_id table by it).
GDAKI_HD inline status srq_post(srq_handle& srq, const sge* sgl, uint32_t num_sge, uint32_t* index = nullptr);

// Returns SRQ WQE `index` (a receive CQE's wqe_counter) to the free list, after its
// completion has been consumed and its buffers are no longer needed by the NIC.
// Thread-safe. Returns ok, or invalid (index out of range).
GDAKI_HD inline status srq_free(srq_handle& srq, uint32_t index);

}  // namespace gdaki::dev

#include "gdaki/device/impl/sq.hpp"  // the definitions of the functions declared above
