// internal: the soft provider's objects. Lifetimes: the control-path layer destroys
// children before parents, so a QP may hold raw pointers to its PD, CQs and device. A QP
// is also shared (shared_ptr) with the engine's QP list and with peers that cache it as
// their remote end; those holders check `destroyed` under the QP's locks before touching
// anything but the QP's own memory.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "gdaki/prm/cqe.hpp"
#include "gdaki/prm/dbr.hpp"
#include "gdaki/providers/soft.hpp"
#include "gdaki/verbs/provider.hpp"
#include "gdaki/verbs/qp.hpp"
#include "spin_lock.hpp"
#include "wire/mapped_pin.hpp"
#include "soft_memory.hpp"
#include "soft_tables.hpp"

namespace gdaki::soft {

class engine;
namespace wire {
class endpoint;
struct client_conn;
struct wire_op;
}  // namespace wire
namespace shm {
struct mapping;
}

struct soft_device : verbs::provider_object {
  uint32_t index = 0;  // soft<index>
  config cfg;
  std::unique_ptr<engine> eng;
  // Wires to other processes and hosts; declared after eng so it stops first (its I/O
  // thread serves requests into this device's QPs).
  std::unique_ptr<wire::endpoint> wire;
  ~soft_device();
};

struct soft_pd : verbs::provider_object {
  soft_device* dev = nullptr;
  uint32_t pdn = 0;
};

struct soft_mr : verbs::provider_object {
  uint32_t key = 0;  // lkey == rkey for the soft NIC's key table
};

struct soft_cq : verbs::provider_object {
  soft_device* dev = nullptr;
  uint32_t cqn = 0;
  uint32_t log_n = 0;
  bool ignore_overrun = true;
  ring_memory ring;     // 2^log_n CQEs
  ring_memory dbr_mem;  // the CQ doorbell record, on its own cache line
  prm::cqe64* cqes = nullptr;
  prm::cq_dbrec* dbrec = nullptr;
  // Producer side, serialised by mu: several QPs may share one CQ (spin_lock.hpp).
  spin_lock mu;
  uint64_t pi = 0;        // CQEs ever written
  uint32_t seen_ci = 0;   // the set_ci read before the last CQE (no overrun-ignore only)
  bool dead = false;      // destroyed: write nothing more
  std::atomic<bool> error{false};  // overrun without ignore_overrun
};

// A shared receive queue. The NIC side (`mu`): how many WQEs it has taken and which it
// takes next, following the links of the WQEs themselves (prm::srq_next_seg), as a
// ConnectX does; the posting side lives in the data path's dev::srq_handle.
struct soft_srq : verbs::provider_object {
  soft_device* dev = nullptr;
  soft_pd* pd = nullptr;
  uint32_t srqn = 0;
  uint32_t log_n = 0, log_stride = 0, max_sge = 0;
  ring_memory ring;     // 2^log_n WQEs of 2^log_stride bytes
  ring_memory dbr_mem;  // its doorbell record (the receive word), on its own cache line
  uint8_t* wqes = nullptr;
  prm::qp_dbrec* dbrec = nullptr;
  // Taken by responders of several QPs at once: this lock makes each WQE go to one of them.
  std::mutex mu;
  uint64_t taken = 0;     // WQEs consumed (the DBR's count minus this, mod 2^16, are waiting)
  uint32_t next_wqe = 0;  // the WQE the next receive takes
  // The CPU's free list (set_srq_free_list): a QP's RESET returns discarded receives to it.
  std::atomic<dev::srq_handle*> free_list{nullptr};
};

enum class stall_kind : uint8_t { none, rnr, transport };

// The word soft_qp::state holds for s (the engine compares it without a lock).
constexpr uint32_t state_of(verbs::qp_state s) { return static_cast<uint32_t>(s); }

struct soft_qp : verbs::provider_object {
  soft_device* dev = nullptr;
  soft_pd* pd = nullptr;
  soft_cq* scq = nullptr;
  soft_cq* rcq = nullptr;
  soft_srq* srq = nullptr;  // receives come from here (the QP then has no RQ)
  uint32_t qpn = 0;
  uint32_t user_index = 0;
  uint32_t log_sq = 0, log_rq = 0, log_rq_stride = 0;
  uint32_t max_inline = 0, max_send_wqebbs = 0, max_send_sge = 0, max_recv_sge = 0;
  bool scatter_to_cqe = false;  // qp_init::scatter_to_cqe: receives <= 32 B land in the CQE
  ring_memory sq_mem, rq_mem, dbr_mem, uar_mem;
  uint8_t* sq = nullptr;
  uint8_t* rq = nullptr;
  prm::qp_dbrec* dbrec = nullptr;
  uint64_t* uar_db = nullptr;  // the doorbell register inside the UAR page

  // State: written under both locks by modify, and by the NIC (ERR) under one of them;
  // read without a lock by the engine's quick checks.
  std::atomic<uint32_t> state{0};  // verbs::qp_state
  verbs::qp_attr attr;             // under both locks (modify) / exec_mu or resp_mu (read)
  bool destroyed = false;          // set under both locks
  std::atomic<bool> dead{false};   // copy of destroyed for lock-free checks
  // A CPU thread has rung this QP's doorbell through the host hook (on_doorbell), so it
  // executes what it rings: the engine then treats a local QP as it does a remote one
  // (engine::pass, engine_seen_ci).
  std::atomic<bool> host_rings{false};
  // Exported cpu_assisted: like a real NIC, act only on rung doorbells (the UAR word),
  // never on a doorbell record that moved without one (docs/soft-nic.md).
  std::atomic<bool> doorbell_gated{false};

  // The three groups below are written by different threads: the requester's by the
  // thread that rings (or the engine), the engine's notes by the engine, the responder's
  // by the peer's executor (in one process, the peer's ringing thread). Each starts on
  // its own cache line, and what every executor only reads (above) shares none of them:
  // otherwise each WQE of an in-process ping-pong moved lines between the two cores
  // (perf annotate: the exec_mu exchange and the peer's resp_mu lock were the hottest
  // instructions of on_doorbell and try_fast_write; docs/performance.md, "In-process
  // loopback").

  // Requester side (the SQ), under exec_mu.
  alignas(64) spin_lock exec_mu;  // the QP's executor (spin_lock.hpp)
  // Where the executor announces that it reads under the key table (key_lock.hpp).
  key_reader_slot key_reader{keys().lock()};
  uint64_t sq_ci = 0;                    // WQEBBs consumed
  std::atomic<uint64_t> sq_ci_seen{0};   // copy of sq_ci for lock-free "any work?" checks
  stall_kind stall = stall_kind::none;   // waiting for an RNR or transport retry
  uint32_t retries_used = 0;
  std::atomic<uint64_t> stall_until{0};  // steady-clock ns; 0 = not stalled
  std::shared_ptr<soft_qp> peer;         // cached remote end (dest_qp_num)
  // The last two local keys the mapped short path (run_mapped_short) found live in this
  // QP's PD, their ranges and rights, and the key table's generation then: while that has
  // not moved, no MR was deregistered, so a buffer inside a cached range needs no lookup.
  // Two, because a put with signal alternates the source's key and the signal's result
  // buffer's (one entry missed twice per put: callgrind, docs/performance.md).
  struct local_key_cache {
    struct entry {
      uint32_t lkey = 0;
      uint32_t access = 0;
      uint64_t addr = 0, length = 0;  // length 0: empty
    };
    uint64_t generation = ~uint64_t{0};  // of both entries
    entry e[2];
    uint32_t victim = 0;  // the entry the next miss refills (the older one)
  } local_key;
  // av names another process: use the wire. Written by modify under exec_mu; the engine
  // reads it without that lock to choose a policy, so it is atomic (TSan, dma restart).
  std::atomic<bool> remote{false};
  uint64_t last_uar = 0;                 // last doorbell word seen (a hint only)
  // Remote QPs (the wire, wire.hpp): requests in flight in SQ order, the next WQE to issue
  // (sq_ci <= sq_issued <= producer), the next request number (PSN) and the connection
  // they travel on, bound for this QP pair or not yet.
  std::deque<std::shared_ptr<wire::wire_op>> wire_ops;
  std::vector<std::shared_ptr<wire::wire_op>> spare_ops;  // retired, to reuse
  uint64_t sq_issued = 0;
  uint32_t wire_psn = 0;
  std::shared_ptr<wire::client_conn> wire_conn;
  bool wire_bound = false;
  // The executor's dial before this issue batch (outside the key table's lock) failed:
  // issue() fails the WQE at once instead of dialling again under the lock.
  bool wire_dial_failed = false;
  // The peer MRs this QP copies into itself (the shared-memory wire's mapped path), and
  // its copies so far (a liveness check every 256).
  std::vector<std::shared_ptr<shm::mapping>> wire_maps;
  uint32_t wire_copies = 0;
  // The mappings the short path holds in use across doorbells (a lease: mapped_pin.hpp),
  // and whether it holds any, for the engine's sweep (read without exec_mu).
  wire::mapped_pin short_pin;
  std::atomic<bool> short_pin_held{false};
  // Gives the lease back. Caller holds exec_mu.
  void release_short_pin() {
    short_pin.release();
    short_pin_held.store(false, std::memory_order_relaxed);
  }
  std::atomic<bool> wire_busy{false};  // wire_ops is not empty (for has_work)
  std::atomic<uint64_t> host_polled_ns{0};  // last time a CPU thread polled this QP's CQ (on_poll)
  std::atomic<uint32_t> host_polls{0};
  // The engine's note (engine::pass): the send CI at which it last found a doorbell
  // waiting on this QP (remote, or local and rung by a CPU thread). It takes a waiting
  // doorbell only when the CI has not moved since (engine.cpp says why). Atomic (relaxed) only because a QP can be in two engine
  // threads' snapshots for a pass while the list changes.
  alignas(64) std::atomic<uint64_t> engine_seen_ci{~uint64_t{0}};
  std::atomic<uint64_t> engine_seen_ns{0};  // when it noted engine_seen_ci
  std::atomic<uint64_t> lease_sweep_ns{0};  // when the engine gives short_pin back (0: not seen held)

  // Responder side (the RQ and incoming requests), under resp_mu.
  alignas(64) std::mutex resp_mu;
  uint64_t rq_ci = 0;                   // receive WQEs consumed
  std::atomic<uint64_t> rq_ci_seen{0};
  // rkeys of alloc_shared() MRs that peers mapped through this QP (the shared-memory
  // wire's mapped path): taken back when the QP stops taking requests (revoke_grants).
  std::vector<uint32_t> granted_rkeys;

  uint32_t sq_wqebbs() const { return 1u << log_sq; }
  uint32_t rq_wqes() const { return 1u << log_rq; }
};

}  // namespace gdaki::soft
