// The device API: one-sided operations for kernel authors (and CPU threads), written on
// top of the data-path core (sq.hpp). Every call takes a cooperation scope and a sharing
// mode as template parameters:
//
//   Scope   scope_thread  each calling thread posts its own operation
//           scope_warp    every lane of the warp calls; one reservation for the warp, each
//                         lane builds its own WQE(s), one doorbell (rung by lane 0)
//           scope_block   every thread of the block calls; one reservation, one doorbell
//                         (rung by thread 0 of the block)
//   sharing exclusive     the QP is used by this thread (thread scope), this warp or this
//                         block only: plain counter updates, no lock
//           block / grid  several threads, warps or blocks post on the QP concurrently:
//                         atomic reservation and in-order publication (sq.hpp)
//
// A lane or thread that has nothing to post in a collective (warp/block) call passes
// op_flags::skip. Every lane of a collective call passes the same QP handle (skipping
// lanes too); lanes that disagree get invalid, and nothing is posted. Calls return a gdaki::status; posting calls also return a ticket (the
// WQEBB count just past the caller's last WQE) for test/wait. Every blocking call takes a
// timeout in nanoseconds (wait_forever = none). Host-side state dumps: device/dump.hpp.
//
// Backends (qp.backend, fixed at export; docs/proxy.md): direct builds WQEs in the QP's
// send queue (tickets count WQEBBs); proxy pushes one or more 64-byte descriptors per
// operation into the handle's proxy ring, every lane its own (tickets count descriptors,
// settled by the ring's completion counter). The same calls, scopes and statuses serve
// both; the choice is one switch in detail::post (posting) and one in test (settling).
#pragma once

#include <cstdint>
#include <type_traits>

#include "gdaki/config.hpp"
#include "gdaki/device/arch.hpp"
#include "gdaki/device/handles.hpp"
#include "gdaki/device/sq.hpp"
#include "gdaki/device/wqe.hpp"
#include "gdaki/prm/wqe.hpp"
#include "gdaki/proxy/descriptor.hpp"
#include "gdaki/proxy/ring.hpp"
#include "gdaki/status.hpp"

namespace gdaki::dev {

struct scope_thread {};
struct scope_warp {};
struct scope_block {};

enum class sharing : uint32_t { exclusive = 0, block = 1, grid = 2 };

// A remote buffer: virtual address in the peer's registered memory and its rkey.
struct remote_ptr {
  uint64_t addr;
  uint32_t rkey;
};
// A local registered buffer: address and lkey.
struct local_ptr {
  uint64_t addr;
  uint32_t lkey;
};

namespace op_flags {
inline constexpr uint32_t none = 0;
inline constexpr uint32_t fence = 1u << 0;        // start only after earlier READs/atomics completed
inline constexpr uint32_t unsignaled = 1u << 1;   // no CQE on success (learn its fate via quiet)
inline constexpr uint32_t skip = 1u << 2;         // collective call: this lane/thread posts nothing
// Write the WQE(s) and mark them ready, but ring no doorbell: a batch of deferred posts
// leaves with one doorbell, rung by submit(), quiet(), any later post without this flag
// (of any thread: a doorbell publishes everything ready), or the posting call itself
// when the ring is full. A deferred operation's ticket settles only after that doorbell:
// wait() on it without one waits out its timeout. Direct backend only; proxy descriptors
// are pushed at once (the ring has no doorbell to save). DOCA's "weak" posts + commit,
// perftest's post list (-l).
inline constexpr uint32_t defer = 1u << 3;
}  // namespace op_flags

enum class signal_op : uint32_t {
  add = 0,  // remote 8-byte word += value (atomic fetch-add, result discarded)
  set = 1,  // remote 8-byte word = value (8-byte inline RDMA WRITE)
};

// mlx5 RC messages are at most 2 GiB; puts and gets above this are split.
inline constexpr uint64_t max_message_bytes = uint64_t{1} << 30;
static_assert(max_message_bytes <= proxy::max_descriptor_bytes, "one WQE chunk fits one descriptor");

// The outcome of a failed operation, for diagnostics: the latched first error.
struct op_error {
  prm::syndrome syndrome;
  uint64_t wqe_index;  // first WQEBB of the failing WQE
};

// ---------------------------------------------------------------------------------------
// The API. Posting calls return ok (posted; *ticket set), invalid (bad size or arguments;
// nothing posted) or timeout (no ring space within timeout_ns; nothing reserved).
// Completion is learned with test()/wait() on the ticket, or quiet(). Scope, sharing,
// flags and tickets: see the top of this file and docs/device-api.md.
// Definitions: gdaki/device/impl/ops.hpp (included at the end of this header).
// ---------------------------------------------------------------------------------------

// ---- Put: RDMA WRITE from a registered local buffer ------------------------------------

// RDMA WRITE of `bytes` from local `src` to remote `dst` (split above max_message_bytes).
template <typename Scope = scope_thread, sharing S = sharing::grid>
GDAKI_HD inline status put(qp_handle& qp, remote_ptr dst, local_ptr src, uint64_t bytes, uint64_t* ticket,
                           uint32_t flags = op_flags::none, uint64_t timeout_ns = wait_forever);

// ---- Inline put: the bytes travel inside the WQE ---------------------------------------

// Inline RDMA WRITE of len <= qp.max_inline bytes copied from `value` into the WQE (no
// local registration needed; `value` may be reused as soon as p returns).
template <typename Scope = scope_thread, sharing S = sharing::grid>
GDAKI_HD inline status p(qp_handle& qp, remote_ptr dst, const void* value, uint32_t len, uint64_t* ticket,
                         uint32_t flags = op_flags::none, uint64_t timeout_ns = wait_forever);

// ---- Signals: a remote 8-byte word, alone or after a put -------------------------------

// Signal alone: remote 8-byte word `sig` += value (add) or = value (set).
// add needs the QP's scratch buffer (qp.scratch_lkey) for the discarded atomic result.
template <typename Scope = scope_thread, sharing S = sharing::grid>
GDAKI_HD inline status signal(qp_handle& qp, remote_ptr sig, signal_op op, uint64_t value, uint64_t* ticket,
                              uint32_t flags = op_flags::none, uint64_t timeout_ns = wait_forever);

// put, then signal, as one reservation: the signal is never visible before the data.
// The data WQEs are unsignaled; the signal WQE carries the completion.
template <typename Scope = scope_thread, sharing S = sharing::grid>
GDAKI_HD inline status put_signal(qp_handle& qp, remote_ptr dst, local_ptr src, uint64_t bytes, remote_ptr sig,
                                  signal_op op, uint64_t value, uint64_t* ticket, uint32_t flags = op_flags::none,
                                  uint64_t timeout_ns = wait_forever);

// ---- Get: RDMA READ into a registered local buffer -------------------------------------

// RDMA READ of `bytes` from remote `src` into local `dst`. The data is in dst once the
// ticket completes (test/wait).
template <typename Scope = scope_thread, sharing S = sharing::grid>
GDAKI_HD inline status get(qp_handle& qp, local_ptr dst, remote_ptr src, uint64_t bytes, uint64_t* ticket,
                           uint32_t flags = op_flags::none, uint64_t timeout_ns = wait_forever);

// ---- Atomics: remote 8-byte fetch-add / compare-swap (post, or post and wait) ----------

// Remote 8-byte fetch-and-add; the old value lands in local `result` (8 bytes,
// LOCAL_WRITE) when the ticket completes.
template <typename Scope = scope_thread, sharing S = sharing::grid>
GDAKI_HD inline status atomic_fetch_add(qp_handle& qp, remote_ptr dst, uint64_t add, local_ptr result,
                                        uint64_t* ticket, uint32_t flags = op_flags::none,
                                        uint64_t timeout_ns = wait_forever);

// Remote 8-byte compare-and-swap; the old value lands in local `result`.
template <typename Scope = scope_thread, sharing S = sharing::grid>
GDAKI_HD inline status atomic_compare_swap(qp_handle& qp, remote_ptr dst, uint64_t compare, uint64_t swap,
                                           local_ptr result, uint64_t* ticket, uint32_t flags = op_flags::none,
                                           uint64_t timeout_ns = wait_forever);

// Fetch-and-add that waits and returns the old value in *old.
template <typename Scope = scope_thread, sharing S = sharing::grid>
GDAKI_HD inline status atomic_fetch_add_wait(qp_handle& qp, remote_ptr dst, uint64_t add, local_ptr result,
                                             uint64_t* old, uint64_t timeout_ns = wait_forever);

// Compare-and-swap that waits and returns the old value in *old.
template <typename Scope = scope_thread, sharing S = sharing::grid>
GDAKI_HD inline status atomic_compare_swap_wait(qp_handle& qp, remote_ptr dst, uint64_t compare, uint64_t swap,
                                                local_ptr result, uint64_t* old, uint64_t timeout_ns = wait_forever);

// ---- Doorbell: publish deferred posts ---------------------------------------------------

// Rings the doorbell for every WQE marked ready on this QP so far (op_flags::defer posts,
// this thread's and others'); nothing when there is none. Warp/block scope: the leader
// rings once for the group. Proxy backend: nothing to do.
template <typename Scope = scope_thread, sharing S = sharing::grid>
GDAKI_HD inline void submit(qp_handle& qp);

// ---- Completion: settle one ticket -----------------------------------------------------

// Non-blocking completion check of one ticket: ok, again or io_error. The one data-path
// dispatch on the backend for settling.
GDAKI_HD inline status test(qp_handle& qp, uint64_t ticket);

// Waits for one ticket: ok, io_error (the operation or an earlier one failed; see
// last_error) or timeout.
GDAKI_HD inline status wait(qp_handle& qp, uint64_t ticket, uint64_t timeout_ns = wait_forever);

// ---- Ordering: fence, quiet ------------------------------------------------------------

// Orders later operations on this QP after the completion of earlier READs and atomics
// (a fenced, unsignaled NOP: the NIC starts it, and everything after it, only once the
// earlier READs/atomics are done). Plain WRITEs are already ordered on one QP.
template <typename Scope = scope_thread, sharing S = sharing::grid>
GDAKI_HD inline status fence(qp_handle& qp, uint64_t timeout_ns = wait_forever);

// Everything posted on this QP so far (by any thread) is complete. Returns ok, io_error
// or timeout. When the CQEs already polled (or one poll now) show every WQEBB reserved so
// far completed, that is the answer: the usual case after a signalled last operation
// (put_signal's signal is one), and no WQE is spent. Otherwise posts one signalled NOP
// and waits for it. In warp/block scope one thread decides and posts, every thread waits.
template <typename Scope = scope_thread, sharing S = sharing::grid>
GDAKI_HD inline status quiet(qp_handle& qp, uint64_t timeout_ns = wait_forever);

// ---- Errors ----------------------------------------------------------------------------

// The QP's first failure, latched: the CQE syndrome and the first WQEBB of the failing
// WQE ({none, no_error_index} while nothing failed). Proxy backend: the ring latches a
// status, not a CQE syndrome, so a failure reads as local_qp_op at the ring position of
// the failed descriptor (the poster's QP keeps the real syndrome: last_error on the
// poster's own handle). Any thread may call it; it reads, never waits.
GDAKI_HD inline op_error last_error(const qp_handle& qp);

}  // namespace gdaki::dev

#include "gdaki/device/impl/ops.hpp"  // the definitions of everything declared above
