// The SQ executor: doorbell record -> WQEs -> placement -> CQEs, with RNR and transport
// retries, the first-error CQE and WR_FLUSH CQEs afterwards (PRM 3.5, 6.6).
#include "executor.hpp"

#include <algorithm>
#include <chrono>
#include <shared_mutex>
#include <string>
#include <thread>

#include "../soft_objects.hpp"
#include "../soft_tables.hpp"
#include "cqe_writer.hpp"
#include "engine.hpp"
#include "fast_write.hpp"
#include "placement.hpp"
#include "gdaki/device/arch.hpp"
#include "gdaki/prm/endian.hpp"
#include "gdaki/prm/op_traits.hpp"
#include "gdaki/verbs/mr.hpp"
#include "gdaki/verbs/qp.hpp"
#include "responder.hpp"
#include "wqe_parse.hpp"
#include "../wire/shm_map.hpp"
#include "../wire/wire.hpp"
#include "../wire/wire_test_hooks.hpp"

namespace gdaki::soft {

using prm::syndrome;
using verbs::qp_state;

uint64_t now_ns() { return dev::arch::clock_ns(); }

namespace {

constexpr uint64_t forever = ~uint64_t{0};
// A remote QP whose CQ a CPU thread polled this recently is driven by that thread.
constexpr uint64_t host_driven_ns = 1'000'000;

uint32_t dbr_snd(const soft_qp& qp) {
  return prm::from_be(prm::be32{dev::arch::load_acquire(&qp.dbrec->snd.raw)}) & 0xffff;
}
// How far the SQ may be executed: the doorbell record, or in a gated (cpu_assisted) QP the
// nearer of the record and the last rung doorbell word (its wqe_index, ctrl bytes 0..3 as
// sq.hpp doorbell_word writes them). The record is still read with acquire in both cases:
// that read is what makes the posters' WQE bytes visible to us. Inline: a doorbell asks
// it three times (the short path, its end, has_work), and the call cost as much as it.
[[gnu::always_inline]] inline uint32_t sq_producer(const soft_qp& qp) {
  const uint32_t dbr = dbr_snd(qp);
  if (!qp.doorbell_gated.load(std::memory_order_acquire)) return dbr;
  const uint64_t word = dev::arch::load_acquire(qp.uar_db);
  const uint32_t rung = (prm::from_be(prm::be32{static_cast<uint32_t>(word)}) >> 8) & 0xffff;
  const uint32_t ci = static_cast<uint32_t>(qp.sq_ci_seen.load(std::memory_order_acquire));
  return ((rung - ci) & 0xffff) < ((dbr - ci) & 0xffff) ? rung : dbr;
}
uint32_t dbr_rcv(const soft_qp& qp) {
  return prm::from_be(prm::be32{dev::arch::load_acquire(&qp.dbrec->rcv.raw)}) & 0xffff;
}

// IBA RNR NAK timer codes, in nanoseconds (code 0 is the longest, 655.36 ms).
uint64_t rnr_timer_ns(uint8_t code) {
  static constexpr uint32_t us_x100[32] = {65536, 1,    2,    3,    4,    6,    8,     12,    16,    24,    32,
                                           48,    64,   96,   128,  192,  256,  384,   512,   768,   1024,  1536,
                                           2048,  3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152};
  return uint64_t{us_x100[code & 31]} * 10000;
}

void flush_rq_locked(soft_qp& qp) {
  const uint32_t dbr = dbr_rcv(qp);
  while (((dbr - static_cast<uint32_t>(qp.rq_ci)) & 0xffff) != 0) {
    cqe_fields f;
    f.opcode = prm::cqe_opcode::resp_err;
    f.synd = syndrome::wr_flush;
    f.qpn = qp.qpn;
    f.user_index = qp.user_index;
    f.wqe_counter = static_cast<uint16_t>(qp.rq_ci);
    ++qp.rq_ci;
    if (write_cqe(*qp.rcq, f) != cq_write::ok) {
      qp.rq_ci += (dbr - static_cast<uint32_t>(qp.rq_ci)) & 0xffff;  // CQ gone or broken: drop the rest
      break;
    }
  }
  qp.rq_ci_seen.store(qp.rq_ci, std::memory_order_release);
}

void requester_error(soft_qp& qp) {
  qp.release_short_pin();  // before we wait for peers' counts (revoke): mapped_pin.hpp
  std::lock_guard lk(qp.resp_mu);
  enter_error_locked_resp(qp);
}

// Writes the requester CQE of the WQE at sq_ci. Returns false if the CQ overran (QP -> ERR).
bool complete_send(soft_qp& qp, uint8_t wqe_opcode, syndrome s, uint32_t byte_cnt) {
  cqe_fields f;
  f.opcode = s == syndrome::none ? prm::cqe_opcode::req : prm::cqe_opcode::req_err;
  f.synd = s;
  f.wqe_opcode = wqe_opcode;
  f.qpn = qp.qpn;
  f.byte_cnt = s == syndrome::none ? byte_cnt : 0;
  f.user_index = qp.user_index;
  f.wqe_counter = static_cast<uint16_t>(qp.sq_ci);
  return write_cqe(*qp.scq, f) != cq_write::overrun;
}
bool complete_send(soft_qp& qp, const parsed_wqe& w, syndrome s, uint32_t byte_cnt) {
  return complete_send(qp, w.opcode, s, byte_cnt);
}

struct exec_outcome {
  syndrome synd = syndrome::none;
  bool stalled = false;
};

// Records a failed attempt to reach the peer (RNR NAK or no answer). Returns the final
// error once the retry budget is spent, else stalls the QP until the next try.
exec_outcome retry_later(soft_qp& qp, stall_kind kind, uint64_t wait_ns, uint32_t limit, syndrome final_synd) {
  if (qp.stall != kind) {
    qp.stall = kind;
    qp.retries_used = 0;
  }
  if (limit != ~uint32_t{0} && qp.retries_used >= limit) {
    qp.stall = stall_kind::none;
    qp.retries_used = 0;
    qp.stall_until.store(0, std::memory_order_release);
    return {final_synd, false};
  }
  ++qp.retries_used;
  qp.stall_until.store(now_ns() + (wait_ns == 0 ? 1 : wait_ns), std::memory_order_release);
  return {syndrome::none, true};
}

exec_outcome transport_retry(soft_qp& qp) {
  const uint8_t t = qp.attr.timeout;
  uint64_t wait = t == 0 ? 10'000'000ull : (4096ull << t);  // 0 = no timeout: re-check every 10 ms
  if (qp.dev->cfg.timeout_cap_us != 0 && wait > uint64_t{qp.dev->cfg.timeout_cap_us} * 1000) {
    wait = uint64_t{qp.dev->cfg.timeout_cap_us} * 1000;
  }
  const uint32_t limit = t == 0 ? ~uint32_t{0} : uint32_t{qp.attr.retry_cnt} + 1;
  return retry_later(qp, stall_kind::transport, wait, limit, syndrome::transport_retry_exc);
}

// Requester-side key check: live lkey, this QP's PD, in bounds, LOCAL_WRITE if needed.
bool local_keys_ok(const soft_qp& qp, const parsed_wqe& w, bool need_write) {
  for (uint32_t i = 0; i < w.num_sg; ++i) {
    const gather_entry& g = w.sg[i];
    if (g.is_inline || g.length == 0) continue;
    if (!keys().local_range_ok(g.lkey, qp.pd->pdn, g.addr, g.length, need_write)) return false;
  }
  return true;
}

// The caller holds qp.exec_mu, under which qp.peer is only replaced by us (modify and
// destroy take exec_mu too), so a plain pointer stays valid for the WQE: no reference
// count moves on the per-WQE path.
soft_qp* resolve_peer(soft_qp& qp) {
  if (!qp.peer || qp.peer->qpn != qp.attr.dest_qp_num) qp.peer = qps().find(qp.attr.dest_qp_num);
  return qp.peer.get();
}

void clear_stall(soft_qp& qp) {
  // Written only when set: on the per-WQE path the usual case is "never stalled", and a
  // store would dirty the line for nothing.
  if (qp.stall == stall_kind::none && qp.retries_used == 0) return;
  qp.stall = stall_kind::none;
  qp.retries_used = 0;
  qp.stall_until.store(0, std::memory_order_release);
}

// The peer lives in another process: the wire brought back the syndrome of the request
// (and READ data / atomic value). A dead peer or link is final, no retry: the wire has
// already waited its bounded time (config::wire_timeout_ms) or seen the connection end,
// and the retire loop has held the report until the QP's transport timer ran out
// (loss_reportable).
exec_outcome remote_outcome(soft_qp& qp, const wire::outcome& o) {
  switch (o.what) {
    case wire::outcome::retry:
      return transport_retry(qp);
    case wire::outcome::rnr: {
      const uint32_t limit = qp.attr.rnr_retry == 7 ? ~uint32_t{0} : qp.attr.rnr_retry;
      return retry_later(qp, stall_kind::rnr, rnr_timer_ns(o.rnr_timer), limit, syndrome::rnr_retry_exc);
    }
    case wire::outcome::fatal:
      clear_stall(qp);
      return {syndrome::transport_retry_exc, false};
    default:
      clear_stall(qp);
      return {o.synd, false};
  }
}

// Checks a WQE as execute_one does before anything leaves the QP. Returns false with
// *synd set when it completes here (bad WQE, NOP, local protection).
bool precheck(soft_qp& qp, const wqe_reader& r, parsed_wqe& w, uint64_t index, syndrome* synd) {
  *synd = syndrome::none;
  if (w.wqe_index != static_cast<uint16_t>(index)) {
    *synd = syndrome::local_qp_op;
    return false;
  }
  if (!parse_one_segment_write(r, qp.max_inline, &w)) *synd = parse_segments(r, qp.max_inline, &w);
  if (*synd != syndrome::none) return false;
  const prm::op_traits t = prm::traits_of(w.opcode);
  if (t.kind == prm::op_kind::nop) return false;
  const bool local_write = t.response_payload;  // READ data and atomic results land locally
  if (!local_keys_ok(qp, w, local_write)) {
    *synd = syndrome::local_prot;
    return false;
  }
  return true;
}

// Whether [addr, addr + len) lies in the MR lkey names, live, in qp's PD and, if
// need_write, with LOCAL_WRITE, as local_keys_ok checks it: from the QP's cache while no
// MR has been deregistered since it was filled. Caller holds the key table's shared lock.
// (The cache miss, a table lookup, out of line: the hit is a few instructions inline.)
[[gnu::noinline]] const soft_qp::local_key_cache::entry* refill_local_key(soft_qp& qp, uint32_t lkey,
                                                                         uint64_t generation) {
  wire::test_hooks::short_path_key_lookups.fetch_add(1, std::memory_order_relaxed);
  const mr_entry* e = keys().find(lkey, false);
  if (e == nullptr || e->pdn != qp.pd->pdn) return nullptr;
  soft_qp::local_key_cache& c = qp.local_key;
  if (c.generation != generation) {
    c = {};  // filled under another generation: neither entry holds any more
    c.generation = generation;
  }
  soft_qp::local_key_cache::entry& slot = c.e[c.victim];
  c.victim ^= 1;
  slot = {lkey, e->access, e->addr, e->length};
  return &slot;
}
inline bool local_range_cached(soft_qp& qp, uint32_t lkey, uint64_t addr, uint32_t len, bool need_write) {
  const soft_qp::local_key_cache& c = qp.local_key;
  const uint64_t generation = keys().generation();
  const soft_qp::local_key_cache::entry* x = nullptr;
  if (c.generation == generation) {
    // No key is 0 (indexes start at 2): an empty entry matches no lkey a WQE can name
    // validly, and its length 0 covers no range.
    if (c.e[0].lkey == lkey) {
      x = &c.e[0];
    } else if (c.e[1].lkey == lkey) {
      x = &c.e[1];
    }
  }
  if (x == nullptr && (x = refill_local_key(qp, lkey, generation)) == nullptr) return false;
  if (need_write && !(x->access & verbs::access::local_write)) return false;
  return addr >= x->addr && len <= x->length && addr - x->addr <= x->length - len;
}

// The key table's protection for one run of run_mapped_short. The general issue loop
// holds its shared lock already; a doorbell's run takes it at the first WQE that names a
// local key (a pointer data segment's source, an atomic's result; an inline WRITE or a
// NOP touches no registered memory of ours), and as an announced reader (key_lock.hpp):
// stores to the QP's own slot, no read-modify-write, no word shared with other QPs.
// Counting in and out of the shared word were two of the five atomic read-modify-writes
// of an 8-byte WRITE rung on its own (docs/performance.md, "Announced readers"). Where it
// must count (a writer inside, or no membarrier), it takes the lock with mappings pinned
// and must not wait for a deregistration, which holds the lock while it waits for every
// peer to leave its grants (two processes that each pin and then wait would hold each
// other up): so the pins go first.
class run_keys {
 public:
  run_keys(soft_qp& qp, bool held) : qp_(qp), held_(held) {}
  ~run_keys() {
    if (how_ == taken::announced) keys().lock().leave_announced(qp_.key_reader);
    if (how_ == taken::counted) keys().lock().unlock_shared();
  }
  run_keys(const run_keys&) = delete;
  run_keys& operator=(const run_keys&) = delete;
  void need(wire::mapped_pin& pin) {
    if (held_) return;
    held_ = true;
    key_lock& l = keys().lock();
    if (l.try_enter_announced(qp_.key_reader)) {
      how_ = taken::announced;
      return;
    }
    if (!l.try_lock_shared()) {
      pin.release();
      l.lock_shared();
    }
    how_ = taken::counted;
  }

 private:
  enum class taken : uint8_t { no, announced, counted };
  soft_qp& qp_;
  bool held_;
  taken how_ = taken::no;
};

// The test hook short_path_source_pause_us (wire_test_hooks.hpp): out of line, off the path.
[[gnu::noinline, gnu::cold]] void pause_before_source_read() {
  wire::test_hooks::short_path_source_pauses.fetch_add(1, std::memory_order_relaxed);
  std::this_thread::sleep_for(
      std::chrono::microseconds(wire::test_hooks::short_path_source_pause_us.load(std::memory_order_relaxed)));
}

// The mapped short path of a remote QP (the shared-memory wire): a run of the WQEs small
// messages are made of, each in one WQEBB: an RDMA WRITE of one pointer or inline data
// segment of at most endpoint::short_write_max bytes, an 8-byte fetch-and-add or
// compare-and-swap (a signal, a counter), and a NOP (a flush), into peer MRs this QP has
// mapped. With it the NIC model's part of an 8-byte WRITE rung on its own went from ~725
// instructions (general parse, precheck, copy_mapped, the issue loop) to ~465
// (callgrind; docs/performance.md, "The mapped short path"). It takes a WQE only when
// every check the general path makes passes (the producer's count, wqe_index, DS, the
// inline size, the local key's PD, rights and range, the grant's rights and range, the
// atomic's alignment), writes the same CQE, and stops at the first WQE of another shape
// or that fails a check: the general loop takes that one and reports what is wrong with
// its usual syndrome. The caller holds exec_mu, nothing of the QP is in flight, so no
// copy overtakes a request (RC order), and held_keys takes the key table's shared lock when a
// WQE needs it. Returns the WQEs it completed; *cq_overrun when a CQE found the CQ full
// (the caller moves the QP to ERR).
uint32_t run_mapped_short(soft_qp& qp, uint32_t producer, uint32_t budget, bool* cq_overrun, run_keys& held_keys) {
  using prm::send_opcode;
  wire::endpoint& ep = *qp.dev->wire;
  wire::mapped_pin& pin = qp.short_pin;  // the QP's lease, kept across runs
  if (pin.stale()) pin.revalidate();
  uint32_t done = 0;
  while (done < budget) {
    const uint32_t n = (producer - static_cast<uint32_t>(qp.sq_issued)) & 0xffff;
    if (n == 0 || n > qp.sq_wqebbs()) break;
    const wqe_reader r(qp.sq, qp.log_sq, qp.sq_issued);
    const auto ctrl = r.read<prm::ctrl_seg>(0);
    const uint32_t w0 = prm::from_be(ctrl.opmod_idx_opcode);
    const uint32_t ds = prm::from_be(ctrl.qpn_ds) & 0x3f;
    const auto opcode = static_cast<uint8_t>(w0 & 0xff);
    if (static_cast<uint16_t>(w0 >> 8) != static_cast<uint16_t>(qp.sq_issued) || ds == 0 || ds > 4) break;
    uint32_t byte_cnt = 0;
    if (opcode == static_cast<uint8_t>(send_opcode::rdma_write)) {
      if (ds < 3) break;
      const auto d = r.read<prm::data_seg>(2);
      const uint32_t bc = prm::from_be(d.byte_count);
      const uint32_t len = bc & ~prm::inline_flag;
      if (len == 0 || len > wire::endpoint::short_write_max || !one_segment_write_shape(ds, bc, qp.max_inline)) break;
      const uint8_t* src;
      uint8_t tmp[2 * 16 - 4];  // the most inline bytes one WQEBB holds (DS 4)
      if ((bc & prm::inline_flag) != 0) {
        if (len <= 12) {
          src = r.unit(2) + 4;  // within the data segment's own 16-byte unit
        } else {
          r.copy_out(2 * 16 + 4, tmp, len);  // may straddle the ring's end
          src = tmp;
        }
      } else {
        const uint64_t laddr = prm::from_be(d.addr);
        held_keys.need(pin);
        if (!local_range_cached(qp, prm::from_be(d.lkey), laddr, len, false)) break;
        if (wire::test_hooks::short_path_source_pause_us.load(std::memory_order_relaxed) != 0) [[unlikely]] {
          pause_before_source_read();
        }
        src = reinterpret_cast<const uint8_t*>(laddr);
      }
      const auto a = r.read<prm::raddr_seg>(1);
      if (!ep.write_mapped_short(qp, pin, prm::from_be(a.rkey), prm::from_be(a.raddr), src, len)) break;
      byte_cnt = len;
    } else if (opcode == static_cast<uint8_t>(send_opcode::atomic_fa) ||
               opcode == static_cast<uint8_t>(send_opcode::atomic_cs)) {
      // ctrl, raddr, atomic, and the result's pointer segment of the operand's 8 bytes.
      if (ds != 4) break;
      const auto d = r.read<prm::data_seg>(3);
      const uint32_t bc = prm::from_be(d.byte_count);
      const uint64_t laddr = prm::from_be(d.addr);
      if (bc != 8) break;
      held_keys.need(pin);
      if (!local_range_cached(qp, prm::from_be(d.lkey), laddr, 8, true)) break;
      const auto a = r.read<prm::raddr_seg>(1);
      const auto op = r.read<prm::atomic_seg>(2);
      uint64_t old;
      if (!ep.atomic_mapped_short(qp, pin, prm::from_be(a.rkey), prm::from_be(a.raddr),
                                  opcode == static_cast<uint8_t>(send_opcode::atomic_cs), prm::from_be(op.swap_add),
                                  prm::from_be(op.compare), &old)) {
        break;
      }
      std::memcpy(reinterpret_cast<void*>(laddr), &old, 8);  // host order, as mapped_copy
      byte_cnt = 8;
    } else if (opcode != static_cast<uint8_t>(send_opcode::nop)) {
      break;
    }
    placement_done();
    ++qp.sq_issued;
    ++done;
    const bool cqe_ok = (ctrl.fm_ce_se & prm::ctrl_flags::ce_mask) < prm::ctrl_flags::cq_update ||
                        complete_send(qp, opcode, syndrome::none, byte_cnt);
    ++qp.sq_ci;
    if (!cqe_ok) {
      *cq_overrun = true;
      break;
    }
  }
  if (qp.short_pin_held.load(std::memory_order_relaxed) != pin.held()) {
    qp.short_pin_held.store(pin.held(), std::memory_order_relaxed);
  }
  if (done != 0) {
    qp.sq_ci_seen.store(qp.sq_ci, std::memory_order_release);
    auto& counted = wire::test_hooks::short_path_wqes;
    counted.store(counted.load(std::memory_order_relaxed) + done, std::memory_order_relaxed);
  }
  return done;
}

// Forgets the requests in flight behind the oldest (their responses are still read and
// dropped by the wire): after a retry the QP sends again from sq_ci with the same PSNs,
// after an error it flushes them.
void abandon_in_flight(soft_qp& qp, uint32_t psn) {
  qp.wire_ops.clear();
  qp.wire_busy.store(false, std::memory_order_release);
  qp.sq_issued = qp.sq_ci;
  qp.wire_psn = psn;
}

// A fresh op, from the QP's spares when one is free (the connection dropped its reference):
// a stream of mapped WRITEs then allocates nothing.
std::shared_ptr<wire::wire_op> take_op(soft_qp& qp) {
  if (!qp.spare_ops.empty()) {
    std::shared_ptr<wire::wire_op> op = std::move(qp.spare_ops.back());
    qp.spare_ops.pop_back();
    op->done.store(false, std::memory_order_relaxed);
    op->result = {};
    op->resp_len = op->req_len = 0;
    op->sent_ms = op->lost_ns = 0;
    op->num_sg = 0;
    op->sg.reset();
    return op;
  }
  return std::make_shared<wire::wire_op>();
}

void recycle_op(soft_qp& qp, std::shared_ptr<wire::wire_op>&& op) {
  if (op.use_count() == 1 && qp.spare_ops.size() < 64) qp.spare_ops.push_back(std::move(op));
}

// How long a NIC goes on retrying a request whose ACK does not come before it reports
// TRANSPORT_RETRY_EXC: retry_cnt + 1 tries of 4.096 us * 2^timeout (each at most
// timeout_cap_us, as transport_retry), and never longer than the wire's own bound,
// wire_timeout_ms, which also stands for timeout 0 ("retry forever" on a NIC).
uint64_t transport_timer_ns(const soft_qp& qp) {
  const uint64_t bound = uint64_t{qp.dev->cfg.wire_timeout_ms} * 1'000'000;
  const uint8_t t = qp.attr.timeout;
  if (t == 0) return bound;
  uint64_t per_try = 4096ull << std::min<uint8_t>(t, 31);
  if (qp.dev->cfg.timeout_cap_us != 0) per_try = std::min(per_try, uint64_t{qp.dev->cfg.timeout_cap_us} * 1000);
  return std::min(bound, per_try * (uint64_t{qp.attr.retry_cnt} + 1));
}

// A request lost with its connection (the peer closed it, died or stopped answering, or
// could not be dialled) is reported as a NIC reports one whose ACK never comes: once the
// QP's transport timer has run out since it was sent. The wire learns of a closed
// connection at once, but a NIC cannot, and unchanged programs count on that:
// ibv_srq_pingpong's server exits as soon as it has its counts, with the client's last
// extra SENDs unanswered; a NIC fails them half a second later, after the client has
// polled its own last completions and exited, where ours failed them in the middle of
// that poll. Until then the QP issues nothing (a NIC retries the oldest request). Returns
// false, with the deadline in res, while the report must wait.
bool loss_reportable(soft_qp& qp, wire::wire_op& op, progress_result& res) {
  if (qp.state.load(std::memory_order_acquire) != state_of(qp_state::rts)) return true;  // flushed now anyway
  const uint64_t now = now_ns();
  if (op.lost_ns == 0) op.lost_ns = now;
  const uint64_t since = op.sent_ms != 0 ? op.sent_ms * 1'000'000 : op.lost_ns;
  const uint64_t due = since + transport_timer_ns(qp);
  if (now >= due) return true;
  res.deadline = due;
  res.pending = true;
  return false;
}

// Remote QPs: WQEs go to the wire up to its window ahead of their completions and retire
// in SQ order as their responses come back (progress_qp says who may block where).
void progress_remote(soft_qp& qp, uint32_t budget, wire_wait mode, progress_result& res) {
  constexpr uint32_t window_wait_us = 200, response_wait_us = 100;
  bool waited = false;
  auto& ops = qp.wire_ops;
  uint32_t issued = 0;
  for (;;) {
    bool moved = false;
    // 1. Retire finished requests, oldest first.
    while (!ops.empty() && ops.front()->done.load(std::memory_order_acquire)) {
      if (ops.front()->result.what == wire::outcome::fatal && !loss_reportable(qp, *ops.front(), res)) return;
      std::shared_ptr<wire::wire_op> op = std::move(ops.front());
      ops.pop_front();
      moved = true;
      res.worked = true;
      parsed_wqe w;
      w.opcode = op->opcode;
      const exec_outcome o = remote_outcome(qp, op->result);
      if (o.stalled) {
        abandon_in_flight(qp, op->psn);
        res.deadline = qp.stall_until.load(std::memory_order_relaxed);
        res.pending = true;
        return;
      }
      if (o.synd == syndrome::none) {
        if (op->signaled && !complete_send(qp, w, syndrome::none, op->byte_cnt)) requester_error(qp);
      } else {
        complete_send(qp, w, o.synd, 0);  // the first error always completes (IBA 10.7.3.1)
        requester_error(qp);
      }
      qp.sq_ci += op->nbb;
      qp.sq_ci_seen.store(qp.sq_ci, std::memory_order_release);
      if (o.synd != syndrome::none) {
        abandon_in_flight(qp, op->psn);  // ERR: the caller flushes the rest
        return;
      }
      recycle_op(qp, std::move(op));
    }
    // (Stored only on a change: the engine reads this line on every pass.)
    if (ops.empty() && qp.wire_busy.load(std::memory_order_relaxed)) qp.wire_busy.store(false, std::memory_order_release);
    if (qp.state.load(std::memory_order_acquire) != state_of(qp_state::rts)) {
      abandon_in_flight(qp, qp.wire_psn);  // moved to ERR from outside: flush everything
      return;
    }
    // 2. Issue new WQEs while the window allows.
    const uint64_t until = qp.stall_until.load(std::memory_order_relaxed);
    if (until != 0 && now_ns() < until) {
      res.deadline = until;
      res.pending = true;
      return;
    }
    const uint32_t producer = sq_producer(qp);
    bool window_full = false;
    // The local buffers stay registered while requests are sent or copied: held for the
    // issue batch (the mapped path issues a WQE in well under a microsecond), released
    // before step 3 waits (poll() takes it again, and deregistration must not wait on us).
    std::shared_lock<key_lock> keys_lock;
    const bool to_issue = ((producer - static_cast<uint32_t>(qp.sq_issued)) & 0xffff) != 0;
    // A QP that has no connection yet dials before it takes the key table's lock: a dial
    // to a peer that sheds handshakes may take wire_timeout_ms, and a deregistration (which
    // takes that lock exclusively) must not wait for it. A failed dial fails the next WQE
    // that issue() sees, as a failed dial there did.
    if (to_issue && ops.empty() && qp.dev->wire->needs_connection(qp)) {
      std::string why;
      qp.wire_dial_failed = !qp.dev->wire->connect(qp, &why);
    }
    if (to_issue) keys_lock = std::shared_lock(keys().lock());
    while (((producer - static_cast<uint32_t>(qp.sq_issued)) & 0xffff) != 0) {
      if (issued == budget) {
        res.pending = true;
        break;
      }
      if (ops.empty() && qp.stall == stall_kind::none && qp.dev->wire->maps_writes(qp)) {
        bool cq_overrun = false;
        run_keys held(qp, true);
        const uint32_t k = run_mapped_short(qp, producer, budget - issued, &cq_overrun, held);
        if (k != 0) {
          issued += k;
          moved = true;
          res.worked = true;
        }
        if (cq_overrun) {
          requester_error(qp);  // ERR with nothing in flight: the caller flushes the rest
          return;
        }
        if (k != 0) continue;  // the budget, the end, or a WQE the general path takes next
      }
      const uint32_t n = (producer - static_cast<uint32_t>(qp.sq_issued)) & 0xffff;
      wqe_reader r(qp.sq, qp.log_sq, qp.sq_issued);
      parsed_wqe w;
      parse_ctrl(r, &w);
      if (n > qp.sq_wqebbs() || w.nbb > n) {
        // Producer bug (as in progress_qp), reported in order: once nothing is in flight.
        if (!ops.empty()) break;
        complete_send(qp, w, syndrome::local_qp_op, 0);
        requester_error(qp);
        qp.sq_ci += n;
        qp.sq_ci_seen.store(qp.sq_ci, std::memory_order_release);
        abandon_in_flight(qp, qp.wire_psn);
        res.worked = true;
        return;
      }
      // A fenced WQE waits for everything before it (fence modes, PRM 6.4.4).
      if ((w.fm_ce_se & prm::ctrl_flags::fence_mask) != 0 && !ops.empty()) break;
      syndrome synd;
      const bool go = precheck(qp, r, w, qp.sq_issued, &synd);
      // Nothing of ours in flight and the target's MR already mapped: the copy is the whole
      // WQE, so it completes here, in SQ order, with no op to track (per WQE this saves
      // the op's reference counting and queueing, a fifth of a small WRITE's cost).
      using mapped = wire::endpoint::mapped_copy_status;
      const mapped m = go && ops.empty() ? qp.dev->wire->copy_mapped(qp, r, w) : mapped::not_mapped;
      // A NOP (a flush's, say) with nothing in flight: nothing leaves the QP, so it too
      // completes here, in SQ order, without an op.
      const bool nop_alone = !go && synd == syndrome::none && ops.empty();
      if (m == mapped::copied || nop_alone) {
        qp.sq_issued += w.nbb;
        ++issued;
        moved = true;
        res.worked = true;
        const bool cqe_ok = !w.signaled() || complete_send(qp, w, syndrome::none, static_cast<uint32_t>(w.length));
        qp.sq_ci += w.nbb;
        qp.sq_ci_seen.store(qp.sq_ci, std::memory_order_release);
        if (!cqe_ok) {
          requester_error(qp);  // ERR with nothing in flight: the caller flushes the rest
          return;
        }
        continue;
      }
      std::shared_ptr<wire::wire_op> op = take_op(qp);
      op->sq_index = qp.sq_issued;
      op->nbb = w.nbb;
      op->opcode = w.opcode;
      op->signaled = w.signaled();
      if (m == mapped::dead) {
        op->byte_cnt = static_cast<uint32_t>(w.length);
        op->result = {wire::outcome::fatal};  // as issue() fails a WQE on a dead peer
        op->done.store(true, std::memory_order_release);
      } else if (go) {
        op->byte_cnt = static_cast<uint32_t>(w.length);
        op->psn = qp.wire_psn;
        const wire::issue_status st = qp.dev->wire->issue(qp, r, w, op);
        if (st == wire::issue_status::busy) {
          window_full = true;
          break;
        }
        if (st == wire::issue_status::sent) ++qp.wire_psn;
      } else {
        op->byte_cnt = static_cast<uint32_t>(w.length);
        op->result = {wire::outcome::done, synd};
        op->done.store(true, std::memory_order_release);
      }
      ops.push_back(op);
      qp.wire_busy.store(true, std::memory_order_release);
      qp.sq_issued += w.nbb;
      ++issued;
      moved = true;
      res.worked = true;
    }
    if (keys_lock.owns_lock()) keys_lock.unlock();
    qp.wire_dial_failed = false;  // a later batch dials again
    // Nothing of ours in flight: done, unless the connection held our next WQE back (a
    // bind waits for responses owed to other QPs, or their requests fill the window);
    // then we read those responses too, or nobody might.
    if (ops.empty() && !window_full) return;
    auto head_done = [&ops] { return !ops.empty() && ops.front()->done.load(std::memory_order_acquire); };
    if (head_done()) continue;
    // 3. Collect the responses that have come; block for one only where WQEs wait for
    // room in the window and the caller is the thread that rang for them.
    const bool block_window = mode == wire_wait::window && window_full;
    const bool block_response = mode == wire_wait::response && !moved && !waited && !ops.empty();
    qp.dev->wire->poll(qp, block_window ? window_wait_us : block_response ? response_wait_us : 0);
    waited = waited || block_response;
    if (head_done() || block_window || block_response) continue;
    if (!moved || res.pending) {
      res.pending = true;
      res.wait_fd = qp.dev->wire->response_fd(qp);
      return;
    }
  }
}

exec_outcome execute_one(soft_qp& qp, const wqe_reader& r, parsed_wqe& w, uint32_t* byte_cnt) {
  // Held for the whole WQE: deregistration waits for it, so no MR goes away mid-copy.
  std::shared_lock keys_lock(keys().lock());
  syndrome s;
  const bool go = precheck(qp, r, w, qp.sq_ci, &s);
  *byte_cnt = static_cast<uint32_t>(w.length);
  if (!go) return {s, false};  // a bad WQE, a NOP (none) or a local protection error
  soft_qp* peer = resolve_peer(qp);
  if (peer == nullptr) return transport_retry(qp);
  std::unique_lock pl(peer->resp_mu);
  const uint32_t ps_state = peer->state.load(std::memory_order_acquire);
  if (peer->destroyed || (ps_state != state_of(qp_state::rtr) && ps_state != state_of(qp_state::rts)) ||
      peer->attr.dest_qp_num != qp.qpn) {
    // A responder that is gone, not ready or connected elsewhere drops the request: the
    // requester sees no ACK and retries until retry_cnt runs out.
    pl.unlock();
    return transport_retry(qp);
  }
  const respond_result rr = respond(qp, r, w, *peer);
  pl.unlock();
  if (rr.rnr) {
    const uint32_t limit = qp.attr.rnr_retry == 7 ? ~uint32_t{0} : qp.attr.rnr_retry;
    return retry_later(qp, stall_kind::rnr, rnr_timer_ns(rr.rnr_timer), limit, syndrome::rnr_retry_exc);
  }
  clear_stall(qp);
  return {rr.req, false};
}

}  // namespace

void revoke_grants_locked_resp(soft_qp& qp) {
  for (uint32_t rkey : qp.granted_rkeys) shm::revoke(rkey, shm::revoke_wait_ms);
  qp.granted_rkeys.clear();
}

void enter_error_locked_resp(soft_qp& qp) {
  revoke_grants_locked_resp(qp);
  qp.state.store(state_of(qp_state::err), std::memory_order_release);
  flush_rq_locked(qp);
  if (qp.dev->eng) qp.dev->eng->wake();  // its SQ must be flushed too
}

bool has_work(soft_qp& qp, uint64_t now, uint64_t* deadline) {
  const uint32_t st = qp.state.load(std::memory_order_acquire);
  // The commonest answer first, from the loads it needs alone: an RTS QP whose doorbell
  // record shows nothing past sq_ci_seen, and no responses the caller could collect (it
  // has no clock, or none are in flight). The ringing thread asks after every run.
  if (st == state_of(qp_state::rts) && (now == 0 || !qp.wire_busy.load(std::memory_order_acquire)) &&
      sq_producer(qp) == (qp.sq_ci_seen.load(std::memory_order_acquire) & 0xffff)) {
    return false;
  }
  if (qp.dead.load(std::memory_order_acquire)) return false;
  const bool err = st == state_of(qp_state::err);
  if (err && dbr_rcv(qp) != (qp.rq_ci_seen.load(std::memory_order_acquire) & 0xffff)) return true;
  if (!err && st != state_of(qp_state::rts)) return false;
  if (!err && qp.wire_busy.load(std::memory_order_acquire)) {
    // Requests in flight: responses to collect, unless a CPU thread polls this QP's CQ
    // and so collects them (and issues what its doorbells left) itself (on_poll). The
    // engine stays out of its way, and steps in once it has not polled for host_driven_ns.
    if (now == 0) return false;  // a caller without a clock: the engine decides
    const uint64_t polled = qp.host_polled_ns.load(std::memory_order_relaxed);
    return polled == 0 || now - polled > host_driven_ns;
  }
  if (sq_producer(qp) == (qp.sq_ci_seen.load(std::memory_order_acquire) & 0xffff)) return false;
  const uint64_t until = qp.stall_until.load(std::memory_order_acquire);
  if (!err && until != 0 && now < until) {
    *deadline = until;
    return false;
  }
  return true;
}

namespace {

// Whether the mapped short path may take the QP's new WQEs now: RTS, a remote QP whose
// wire maps its peer's memory, nothing in flight, not stalled. Caller holds exec_mu.
bool short_path_ready(soft_qp& qp, uint32_t state) {
  return state == state_of(qp_state::rts) && qp.wire_ops.empty() && qp.stall == stall_kind::none &&
         qp.remote.load(std::memory_order_relaxed) && qp.dev->wire->maps_writes(qp);
}

}  // namespace

bool short_doorbell(soft_qp& qp) {
  // host_rings: the first doorbell goes through on_doorbell, which tells the engine that
  // CPU threads ring this QP (and so execute its WQEs themselves).
  if (!qp.host_rings.load(std::memory_order_relaxed) || !qp.remote.load(std::memory_order_relaxed)) return false;
  std::unique_lock lk(qp.exec_mu, std::try_to_lock);
  if (!lk.owns_lock()) return false;  // another executor: on_doorbell wakes the engine
  if (qp.destroyed || !short_path_ready(qp, qp.state.load(std::memory_order_acquire))) return false;
  const uint32_t producer = sq_producer(qp);
  bool cq_overrun = false;
  {
    run_keys lazy(qp, false);
    (void)run_mapped_short(qp, producer, ~uint32_t{0}, &cq_overrun, lazy);
  }
  if (cq_overrun) requester_error(qp);  // ERR with nothing in flight: the general path flushes
  if (cq_overrun || ((producer - static_cast<uint32_t>(qp.sq_issued)) & 0xffff) != 0) return false;
  lk.unlock();
  // A doorbell rung while we held the lock found it taken and left its WQEs to us.
  return sq_producer(qp) == (qp.sq_ci_seen.load(std::memory_order_acquire) & 0xffff);
}

progress_result progress_qp(soft_qp& qp, uint32_t budget, wire_wait wait) {
  progress_result res;
  if (qp.destroyed) return res;
  uint32_t st = qp.state.load(std::memory_order_acquire);
  // The commonest case of a remote QP on the shared-memory wire: nothing in flight, not
  // stalled, and its doorbell brought small mapped WRITEs, signals or a flush. They go
  // straight to run_mapped_short, past the general loop's steps that find nothing to do
  // (retiring responses, the window, the stall timer): on a stream rung WQE by WQE those
  // cost more than the copy. Whatever the run leaves (another shape, a check that fails,
  // an error) goes on below as before.
  if (short_path_ready(qp, st)) {
    const uint32_t producer = sq_producer(qp);
    if (((producer - static_cast<uint32_t>(qp.sq_issued)) & 0xffff) == 0) return res;
    bool cq_overrun = false;
    uint32_t k;
    {
      run_keys lazy(qp, false);
      k = run_mapped_short(qp, producer, budget, &cq_overrun, lazy);
    }
    res.worked = k != 0;
    if (cq_overrun) {
      requester_error(qp);  // ERR with nothing in flight: the flush below takes the rest
      st = qp.state.load(std::memory_order_acquire);
    } else if (((producer - static_cast<uint32_t>(qp.sq_issued)) & 0xffff) == 0) {
      return res;
    } else if (k == budget) {
      res.pending = true;
      return res;
    } else {
      budget -= k;  // the rest of the budget for the general path below
    }
  }
  if (st == state_of(qp_state::err)) {
    std::lock_guard lk(qp.resp_mu);
    const uint64_t before = qp.rq_ci;
    flush_rq_locked(qp);
    res.worked = qp.rq_ci != before;
  }
  if (st != state_of(qp_state::rts) && st != state_of(qp_state::err)) return res;
  // The doorbell word is only a hint (PRM 3.5): the doorbell record is the truth (a gated
  // QP also stops at the last rung word: sq_producer).
  qp.last_uar = dev::arch::load_relaxed(qp.uar_db);
  if (st == state_of(qp_state::err) && !qp.wire_ops.empty()) abandon_in_flight(qp, qp.wire_psn);
  if (qp.remote.load(std::memory_order_relaxed) && st == state_of(qp_state::rts)) {
    progress_remote(qp, budget, wait, res);
    if (!qp.wire_ops.empty() || qp.state.load(std::memory_order_acquire) == state_of(qp_state::rts)) {
      return res;  // still RTS, or ERR with nothing in flight: the loop below flushes
    }
  }
  const uint32_t dbr = sq_producer(qp);
  for (uint32_t done = 0;; ++done) {
    const uint32_t n = (dbr - static_cast<uint32_t>(qp.sq_ci)) & 0xffff;
    if (n == 0) break;
    if (done == budget) {
      res.pending = true;
      break;
    }
    st = qp.state.load(std::memory_order_acquire);  // a responder may have moved us to ERR
    const bool err = st == state_of(qp_state::err);
    if (!err) {
      const uint64_t until = qp.stall_until.load(std::memory_order_relaxed);
      if (until != 0 && now_ns() < until) {
        res.deadline = until;
        res.pending = true;
        break;
      }
    }
    wqe_reader r(qp.sq, qp.log_sq, qp.sq_ci);
    parsed_wqe w;
    parse_ctrl(r, &w);
    res.worked = true;
    if (n > qp.sq_wqebbs() || w.nbb > n) {
      // Producer bug: the doorbell record covers more than the ring, or part of a WQE.
      if (!err) {
        complete_send(qp, w, syndrome::local_qp_op, 0);
        requester_error(qp);
      }
      qp.sq_ci += n;
      break;
    }
    if (err) {
      qp.stall = stall_kind::none;
      qp.stall_until.store(0, std::memory_order_release);
      complete_send(qp, w, syndrome::wr_flush, 0);  // every WQE, signaled or not
      qp.sq_ci += w.nbb;
      qp.sq_ci_seen.store(qp.sq_ci, std::memory_order_release);
      continue;
    }
    uint32_t byte_cnt = 0;
    if (qp.stall == stall_kind::none && try_fast_write(qp, r, w, &byte_cnt)) {
      // The short path took it (fast_write.hpp): a one-segment WRITE, every check passed.
      if (w.signaled() && !complete_send(qp, w, syndrome::none, byte_cnt)) requester_error(qp);
      qp.sq_ci += w.nbb;
      qp.sq_ci_seen.store(qp.sq_ci, std::memory_order_release);
      continue;
    }
    const exec_outcome o = execute_one(qp, r, w, &byte_cnt);
    if (o.stalled) {
      res.deadline = qp.stall_until.load(std::memory_order_relaxed);
      res.pending = true;
      break;
    }
    if (o.synd == syndrome::none) {
      if (w.signaled() && !complete_send(qp, w, syndrome::none, byte_cnt)) requester_error(qp);
    } else {
      complete_send(qp, w, o.synd, 0);  // the first error always completes (IBA 10.7.3.1)
      requester_error(qp);
    }
    qp.sq_ci += w.nbb;
    qp.sq_ci_seen.store(qp.sq_ci, std::memory_order_release);
  }
  qp.sq_ci_seen.store(qp.sq_ci, std::memory_order_release);
  return res;
}

}  // namespace gdaki::soft
