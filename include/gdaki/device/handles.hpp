// Exported QP and CQ handles: trivially copyable plain data (pointers and counters) that
// the control path fills in and places where the initiator can reach it (GPU memory,
// host-pinned mapped memory, or host memory for CPU threads). The data path reads the
// geometry fields and updates the counters with the atomics of arch.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "gdaki/config.hpp"
#include "gdaki/prm/cqe.hpp"
#include "gdaki/prm/dbr.hpp"

namespace gdaki::proxy {
struct ring_handle;  // proxy/ring.hpp (which includes this header, hence the declaration)
}  // namespace gdaki::proxy

namespace gdaki::dev {

// Where the posting calls of ops.hpp send an operation, chosen when the handle is exported
// (docs/proxy.md, "Choosing the backend"). Zero is direct, so a zeroed handle is a
// direct one and every existing export keeps its meaning.
enum class qp_backend : uint32_t {
  direct = 0,  // WQEs into this QP's send queue, doorbell per db_mode (GDAKI)
  proxy = 1,   // 64-byte descriptors into proxy_ring; a CPU proxy thread posts them
};

// How submit() tells the NIC about new WQEs, chosen when the handle is exported.
enum class doorbell_mode : uint32_t {
  db_store = 0,      // DBR update, then the 8-byte UAR doorbell store (default)
  blueflame = 1,     // DBR update, then the whole WQE copied into the BlueFlame register
  cpu_assisted = 2,  // DBR update only; a CPU progress service rings on our behalf
};

inline constexpr uint64_t no_error_index = ~uint64_t{0};

// The first failure of a send queue, latched in one 64-bit word so that the failing WQE
// and its syndrome are claimed together by one compare-and-swap (two fields could pair a
// new index with an old syndrome, or let a later failure's syndrome overwrite the first's):
// syndrome in the top 8 bits, the WQE's first WQEBB in the low 56 (a free-running WQEBB
// count reaches 2^56 after two years at 10^9 WQEBBs/s). no_error_state when none.
inline constexpr uint64_t no_error_state = ~uint64_t{0};
inline constexpr uint64_t err_index_mask = (uint64_t{1} << 56) - 1;
GDAKI_HD constexpr uint64_t err_pack(uint64_t wqebb, prm::syndrome s) {
  return (uint64_t{static_cast<uint8_t>(s)} << 56) | (wqebb & err_index_mask);
}
GDAKI_HD constexpr uint64_t err_index_of(uint64_t state) {
  return state == no_error_state ? no_error_index : state & err_index_mask;
}
GDAKI_HD constexpr prm::syndrome err_syndrome_of(uint64_t state) {
  return state == no_error_state ? prm::syndrome::none : static_cast<prm::syndrome>(state >> 56);
}

// A shared receive queue (SRQ): receive WQEs that any QP bound to it may consume. Its
// WQEs (2^log_wqes of 2^log_stride bytes: prm::srq_next_seg, then data segments) form a
// linked list: posting takes the WQE at `head` and follows its link; a completed WQE is
// linked after `tail` (srq_free), as rdma-core's mlx5 provider does. One WQE always stays
// on the list (head != tail), so a post never writes the link the NIC may be following.
// The NIC counts WQEs posted through the doorbell record's receive word.
struct srq_handle {
  uint8_t* buf;
  uint32_t log_wqes;
  uint32_t log_stride;
  prm::qp_dbrec* dbrec;  // only rcv is used: WQEs ever posted, mod 2^16 (srq->db[MLX5_RCV_DBR])
  uint32_t srqn;
  uint32_t max_sge;  // data segments per WQE
  // Posting state, changed only under `lock` (posts and frees come from any thread).
  alignas(64) uint32_t lock;
  uint32_t head;     // the next free WQE to fill
  uint32_t tail;     // the last free WQE (frees link after it)
  uint32_t reserved;
  uint64_t posted;   // WQEs ever posted (free-running; the DBR holds its low 16 bits)
  uint64_t freed;    // WQEs ever returned by srq_free
};

struct cq_handle {
  prm::cqe64* cqes;  // 2^log_cqe_cnt entries of 64 bytes
  prm::cq_dbrec* dbrec;
  uint32_t log_cqe_cnt;
  uint32_t cqn;
  // Free-running count of CQEs consumed. Advanced by compare-and-swap so that several
  // threads may poll one CQ; each CQE is consumed by exactly one of them.
  alignas(64) uint64_t ci;
  // The count last stored into the doorbell record's set_ci, and the pollers' try-lock
  // that serialises those stores (cq_publish_ci). Written under the lock only; pollers
  // waiting for their claim to be published read ci_published.
  uint64_t ci_published;
  uint32_t publish_lock;
};

// Host-only hook run after a doorbell, so a provider can execute the WQEs on the ringing
// CPU thread (the soft NIC does; see docs). Never called from device code.
using host_doorbell_hook_fn = void (*)(void* ctx);
// Host-only hook run by sq_poll when the send CQ is empty, so a provider whose NIC needs
// the CPU to make progress (the soft NIC's wires) can do it on the polling thread. Null
// where the NIC progresses by itself. Never called from device code.
using host_poll_hook_fn = void (*)(void* ctx);

struct qp_handle {
  // --- send queue geometry -----------------------------------------------------------
  uint8_t* sq_buf;  // 2^log_sq_wqebbs WQEBBs of 64 bytes
  uint32_t log_sq_wqebbs;
  uint32_t qpn;
  prm::qp_dbrec* dbrec;
  uint64_t* uar_db;  // the 8-byte doorbell register
  uint8_t* bf_reg;   // BlueFlame register (may be null when db_mode != blueflame)
  uint32_t bf_size;  // bytes usable in one BlueFlame write
  doorbell_mode db_mode;
  uint32_t max_inline;  // largest inline payload the QP accepts
  uint32_t max_send_wqebbs;  // largest WQE the QP accepts, in WQEBBs (<= 16)
  // Auto-signal: every WQE that covers a WQEBB k * auto_signal_wqebbs - 1 asks for a CQE,
  // whatever its caller asked, so ring space always comes back through CQEs even when
  // nobody signals (docs/device-api.md "Liveness rules"). A power of two <= ring / 2, set
  // by export (verbs::qp::export_handle); 0 = off (hand-built handles only).
  uint32_t auto_signal_wqebbs;
  // --- receive queue geometry --------------------------------------------------------
  uint8_t* rq_buf;  // 2^log_rq_wqes receive WQEs of 2^log_rq_stride bytes
  uint32_t log_rq_wqes;
  uint32_t log_rq_stride;
  srq_handle* srq;  // the shared receive queue this QP receives from, or null (own RQ)
  cq_handle* send_cq;  // must serve this QP only (the poller rebuilds WQE indexes from it)
  cq_handle* recv_cq;
  host_doorbell_hook_fn host_doorbell_hook;
  host_poll_hook_fn host_poll_hook;
  void* host_hook_ctx;
  // An 8-byte registered local buffer (with LOCAL_WRITE) that receives the discarded
  // results of signal atomics (put_signal / signal with add). Zero when not set up.
  uint64_t scratch_addr;
  uint32_t scratch_lkey;
  // --- backend (read-only after export) --------------------------------------------------
  qp_backend backend;         // direct: the fields above and below are the QP; proxy: only
                              // max_inline, the scratch fields and the three below are used
  uint16_t proxy_peer;        // proxy: the poster's index of the QP that serves this handle
  uint16_t proxy_counter;     // proxy: completion counter id; every descriptor bumps it once
  proxy::ring_handle* proxy_ring;  // proxy: the ring this handle alone pushes to (tickets are
                                   // its positions, so no other handle may share it)
  // --- send counters (free-running, in WQEBBs) ---------------------------------------
  alignas(64) uint64_t sq_reserved;  // handed out to posters
  alignas(64) uint64_t sq_ready;     // every WQEBB below this is fully written
  uint64_t sq_rung;                  // highest pc published through DBR + doorbell
  uint32_t db_lock;                  // serialises DBR + doorbell so both stay monotone
  alignas(64) uint64_t sq_completed;  // every WQEBB below this is finished by the NIC
  uint64_t err_state;                 // the first failure: err_pack(first WQEBB, syndrome), or
                                      // no_error_state (read with err_index_of / err_syndrome_of)
  uint32_t err_vendor_syndrome;       // that failure's vendor syndrome (informational; may lag)
  uint32_t err_reserved;
  // --- receive counters (free-running, in receive WQEs) -------------------------------
  alignas(64) uint64_t rq_reserved;
  uint64_t rq_ready;
  uint64_t rq_completed;
};

static_assert(std::is_trivially_copyable_v<srq_handle> && std::is_standard_layout_v<srq_handle>,
              "the SRQ handle is plain data copied to GPU memory");
static_assert(offsetof(srq_handle, lock) % 64 == 0, "the posting state has its own line");
static_assert(std::is_trivially_copyable_v<qp_handle> && std::is_trivially_copyable_v<cq_handle>,
              "handles are plain data copied to GPU memory");
static_assert(std::is_standard_layout_v<qp_handle> && std::is_standard_layout_v<cq_handle>,
              "handles are shared between host and device compilers");

// The run-time counters of each side of the data path sit on cache lines of their own,
// apart from the geometry the export writes once (docs/memory-ordering.md, "Every shared
// word"): posters' reservation, readiness, completion and receive groups never share a
// line with each other or with read-only fields.
static_assert(offsetof(qp_handle, sq_reserved) % 64 == 0 && offsetof(qp_handle, sq_ready) % 64 == 0 &&
                  offsetof(qp_handle, sq_completed) % 64 == 0 && offsetof(qp_handle, rq_reserved) % 64 == 0,
              "each counter group starts a cache line");
static_assert(offsetof(qp_handle, proxy_ring) + sizeof(void*) <= offsetof(qp_handle, sq_reserved),
              "read-only geometry ends before the first counter line");
static_assert(offsetof(qp_handle, err_reserved) + sizeof(uint32_t) <= offsetof(qp_handle, rq_reserved) &&
                  offsetof(qp_handle, db_lock) + sizeof(uint32_t) <= offsetof(qp_handle, sq_completed),
              "send and receive counter groups do not share a line");
static_assert(offsetof(cq_handle, ci) % 64 == 0, "the CQ's claim counter has its own line");

GDAKI_HD constexpr uint32_t sq_wqebbs(const qp_handle& qp) { return 1u << qp.log_sq_wqebbs; }
GDAKI_HD constexpr uint32_t rq_wqes(const qp_handle& qp) { return 1u << qp.log_rq_wqes; }
GDAKI_HD constexpr uint32_t cqe_count(const cq_handle& cq) { return 1u << cq.log_cqe_cnt; }
GDAKI_HD constexpr uint32_t srq_wqes(const srq_handle& s) { return 1u << s.log_wqes; }

}  // namespace gdaki::dev
